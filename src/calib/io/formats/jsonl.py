"""JSON lines: one object per row, the scores a list of numbers and the label a number, named as
the columns of a Parquet file (``logits``, ``log_probs`` or ``probs``; ``label`` or ``labels``;
``--scores`` and ``--label-column`` name others), the way evaluation harnesses export per-question
option log-likelihoods. Other fields are carried through."""

from __future__ import annotations

import os

import numpy as np

from ...errors import InputError
from . import harness_samples
from .base import Contents, Format
from .columns import label_columns, labels_of, list_column_to_matrix, named_column_values, score_columns, wide_columns_to_matrix


def _table(path: str, name: str):
    import pyarrow as pa
    import pyarrow.json as pajson

    try:
        return pajson.read_json(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"{name}: not a readable JSON-lines file ({str(exc).splitlines()[0][:200]})") from None


class JsonLines(Format):
    name = "jsonl"
    suffixes = (".jsonl",)
    carries_columns = True
    shards = True

    def read_predictions(self, path, name, score_prefix, label_column, scores=None):
        if _first_line_is_harness_sample(path):  # an lm-evaluation-harness sample log
            match = harness_samples.SAMPLE_FILE.search(os.path.basename(name))
            task = match.group("task") if match else os.path.basename(name)
            return harness_samples.read_samples([(task, path)], name, scores)
        table = _table(path, name)
        columns = table.column_names
        label_keys = label_columns(columns, label_column, name)
        labels = labels_of([table.column(key) for key in label_keys])
        used, kind, wide = score_columns(columns, score_prefix, path, scores)
        if wide:
            matrix = wide_columns_to_matrix(table, used, path)
        else:
            matrix = list_column_to_matrix(_as_floats(table.column(used[0])), path, used[0])
        keep = [c for c in columns if c not in used and c not in label_keys]
        return Contents(matrix, labels, kind, table.select(keep) if keep else None, tuple(columns))

    def names(self, path):
        return tuple(_table(path, path).column_names)

    def read_named(self, path, key, *, labels=False):
        column = _table(path, path).column(key)
        return named_column_values(column, labels=labels)

    def write(self, path, name, matrix, labels, passthrough):
        """One object per row: the row's scores under ``name`` (the set mask as the list of its
        classes under ``set``), ``label``, the carried fields; floats in their shortest round-trip
        decimals; atomically."""
        import json

        from ..atomic import atomic_path

        carried = passthrough.to_pylist() if passthrough is not None else None
        with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
            for i, row in enumerate(matrix):
                record = {"set": np.flatnonzero(row).tolist()} if matrix.dtype == bool else {name: row.tolist()}
                if labels is not None:
                    record["label"] = int(labels[i])
                if carried is not None:
                    record.update(carried[i])
                handle.write(json.dumps(record) + "\n")

    def read_matrix(self, path, names):
        table = _table(path, path)
        key = next((k for k in names if k in table.column_names), None)
        if key is None:
            raise InputError(f"{path}: no field named {' or '.join(names)} (found {', '.join(table.column_names) or 'none'})")
        return list_column_to_matrix(_as_floats(table.column(key)), path, key)


def _first_line_is_harness_sample(path: str) -> bool:
    with open(path, "rb") as handle:
        line = handle.readline(harness_samples.FIRST_LINE)
    return harness_samples.is_sample_record(line)


def _as_floats(column):
    """A list column of integers and floats (JSON does not tell 1 from 1.0) as floats; other types
    are left for the matrix check to refuse."""
    import pyarrow as pa

    if pa.types.is_list(column.type) and pa.types.is_integer(column.type.value_type):
        return column.cast(pa.list_(pa.float64()))
    return column


JSON_LINES = JsonLines()
