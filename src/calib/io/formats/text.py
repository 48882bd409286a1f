"""Text files of labels or group values (.txt: one value a line; .csv: a header line naming the
columns, then rows): the files written by hand or by a spreadsheet. They hold no scores."""

from __future__ import annotations

import csv

import numpy as np

from ...errors import InputError
from .base import group_key, labels_key


def text_values(path: str, column: str | None) -> np.ndarray:
    """Values as text: .csv has a header line naming its columns, any other text file one value a
    line (an empty line is a missing value)."""
    if not path.lower().endswith(".csv"):
        return np.array([row[0] for row in _text_rows(path, split=False)], dtype=object)
    rows = _text_rows(path, split=True)
    if not rows:
        return np.array([], dtype=object)
    names = [name.strip() for name in rows[0]]
    index = names.index(group_key(names, column, path))
    return np.array([row[index] if index < len(row) else "" for row in rows[1:]], dtype=object)


def _text_rows(path: str, *, split: bool) -> list[list[str]]:
    """The lines of a text file, split into cells as a CSV (``split``) or each a single cell."""
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return list(csv.reader(handle)) if split else [[line.rstrip("\r\n")] for line in handle]
    except (UnicodeDecodeError, OSError, csv.Error) as exc:
        raise InputError(f"{path}: cannot read it as text ({exc.__class__.__name__})") from None


def text_labels(path: str, column: str | None) -> np.ndarray:
    """Labels from text: one a line, cells split by commas (a CSV), an optional header naming the
    columns. Integral numbers only ("2" or "2.0"); an empty or other cell is refused naming its line."""
    lines = [row for row in _text_rows(path, split=True) if any(cell.strip() for cell in row)]
    header = lines[0] if lines and not all(_is_number(cell) for cell in lines[0] if cell.strip()) else None
    rows = lines[1:] if header else lines
    if header is None:
        width = max((len(row) for row in rows), default=1)
        if width > 1:
            raise InputError(f"{path}: {width} columns and no header line naming them; keep one label a line")
        if column is not None:
            raise InputError(f"{path}: no header line, so no column named {column!r}")
        index = 0
    else:
        names = [cell.strip() for cell in header]
        index = names.index(labels_key(names, column, path))
    values = np.empty(len(rows), dtype=np.float64)
    first_line = 2 if header else 1
    for i, row in enumerate(rows):
        cell = row[index].strip() if index < len(row) else ""
        if not _is_number(cell):
            raise InputError(f"{path}: line {i + first_line}: label {cell[:40]!r} is not a class index (an integer in [0, K))")
        values[i] = float(cell)
    return values


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
