"""Slices of the rows (a data source, language, hospital, demographic group): the streamed metrics
of every group in the same pass as the overall ones, the worst group per metric, and what gates on
groups read.

Every streamed metric's state is additive over rows, so one state per group, filled from the same
chunks, gives each group's metrics exactly as an evaluation of that group's rows alone would
(docs/groups.md). Rows are read in group order (a stable sort of the group codes) when the scores
allow random access, so a chunk updates each of its groups once; V-ECE and the other whole-sample
estimators are computed on all rows only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError, UsageError
from ..metrics.definitions import higher_is_better
from .report_types import GroupEntry, GroupSection

#: Group values that are missing (NaN, null, empty text) form a group of this name.
MISSING = "(missing)"
#: Gate prefixes: ``max_group:cmce>0.02`` gates the largest value over the groups, ``min_group:`` the
#: smallest; ``max_label:`` and ``min_label:`` the same over the labels of a multi-label input.
AGGREGATES = {"max_group": max, "min_group": min, "max_label": max, "min_label": min}
#: The aggregates over a multi-label input's labels.
LABEL_AGGREGATES = ("max_label", "min_label")
#: The source a report names for a multi-label input's label groups.
LABELS_SOURCE = "labels"


@dataclass
class Groups:
    """Each row's group: ``codes[i]`` indexes ``names`` (the distinct values as text, in sorted
    order); ``source`` says where the values came from (a column or a file)."""

    names: list[str]
    codes: np.ndarray
    source: str
    #: A multi-label input's label groups: its rows are (row, label) pairs, this many per row
    #: (the bootstrap resamples the rows).
    pairs_per_row: int = 1

    @property
    def of_labels(self) -> bool:
        """The groups are a multi-label input's labels (:func:`label_groups`: its rows are pairs,
        L > 1 of them per row), whatever the source is called."""
        return self.pairs_per_row > 1

    @property
    def counts(self) -> np.ndarray:
        return np.bincount(self.codes, minlength=len(self.names))

    def order(self) -> np.ndarray:
        """Row indices sorted by group, rows of a group in their file order."""
        return np.argsort(self.codes, kind="stable")


def label_groups(preds) -> Groups | None:
    """The pairs of a multi-label input grouped by their label (its output layout's names and
    codes: calib.io.predictions.LabelLayout); None for rows of classes, which have no labels."""
    layout = preds.output_layout
    if layout.n_labels is None:
        return None
    return Groups(list(layout.names), layout.codes(), LABELS_SOURCE, layout.pairs_per_row)


def groups_for(preds, groups: Groups | None) -> Groups | None:
    """The groups an evaluation of ``preds`` reads: ``groups``, or a multi-label input's labels
    (which take no other groups)."""
    labels = label_groups(preds)
    if labels is None:
        return groups
    if groups is not None and not groups.of_labels:
        raise UsageError("a multi-label input is grouped by its labels; other groups do not apply to it")
    return groups if groups is not None else labels


def groups_from_values(values, n_rows: int, source: str) -> Groups:
    """Groups from one value per row (numbers, text or booleans; NaN, None and empty text are the
    group ``(missing)``). Numeric values sort as numbers, others as text."""
    values = np.asarray(values)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise InputError(f"{source}: group values must be one per row; got shape {values.shape}")
    if len(values) != n_rows:
        raise InputError(f"{source}: {len(values)} group values for {n_rows} rows of scores")
    if values.dtype.kind == "f":
        missing = np.isnan(values)
        distinct, inverse = np.unique(values[~missing], return_inverse=True)
        integral = bool(np.all(distinct == np.round(distinct)))  # pandas' float copy of an integer column
        names = [f"{v:.0f}" if integral else repr(float(v)) for v in distinct]
        codes = np.empty(n_rows, dtype=np.int64)
        codes[~missing] = inverse
        if missing.any():
            codes[missing] = len(names)
            names.append(MISSING)
        return Groups(names, codes, source)
    if values.dtype.kind in "iub":
        distinct, codes = np.unique(values, return_inverse=True)
        return Groups([str(v) for v in distinct.tolist()], codes.astype(np.int64), source)
    text = np.array(["" if v is None else str(v) for v in values.tolist()], dtype=object)
    text[text == ""] = MISSING
    distinct, codes = np.unique(text.astype(str), return_inverse=True)
    return Groups([str(v) for v in distinct], codes.astype(np.int64), source)


def read_groups(preds, pred_path: str, column: str | None, path: str | None, label_column: str | None = None) -> Groups | None:
    """The rows' groups: the values of ``column`` in the predictions file, or of the file ``path``
    (its ``column`` when it has several; calib.io.readers.read_group_values). When neither is
    given, the column the input itself groups by (``preds.groups_by``: the task of each row of a
    harness results directory), else None."""
    if column is None and path is None:
        column = preds.groups_by
        if column is None:
            return None
    from ..io.readers import read_group_values

    values, source = read_group_values(preds, pred_path, column, path, label_column)
    return groups_from_values(values, preds.n, source)


def group_sort_key(name: str):
    """Group names in the order :func:`groups_from_values` gives them: numbers as numbers, then text,
    ``(missing)`` last (for groups merged from several states)."""
    try:
        return (0, float(name), "")
    except ValueError:
        return (2 if name == MISSING else 1, 0.0, name)


def group_section(
    names: list[str],
    counts,
    source: str,
    values: list[dict],
    before: list[dict] | None,
    min_rows: int,
    of_labels: bool = False,
) -> GroupSection:
    """The groups ``names`` of ``counts`` rows with each one's metric values (``values``, and the
    model's own ``before`` with a calibrator), where the group values came from (``source``), the
    rows a group needs to be gated, the worst gated group per metric and, for a multi-label input's
    labels (``of_labels``), the mean over the labels per metric (the macro average)."""
    section = {}
    for i, name in enumerate(names):
        own = None if before is None else {key: item["value"] for key, item in before[i].items()}
        section[name] = GroupEntry(int(counts[i]), {key: item["value"] for key, item in values[i].items()}, own)
    gated = {name: entry for name, entry in section.items() if entry.n >= min_rows}
    worst, averages = {}, {}
    for key in values[0] if values else []:
        found = worst_group(gated, key)
        if found is not None:
            worst[key] = {"group": found[0], "value": found[1]}
        defined = [value for entry in section.values() if (value := entry.metrics.get(key)) is not None]
        if of_labels and defined:
            averages[key] = float(np.mean(defined))
    return GroupSection(section, source, min_rows, worst, averages, of_labels)


def worst_group(section: dict[str, GroupEntry], key: str, aggregate: str | None = None) -> tuple[str, float] | None:
    """(group, value) of the largest value of ``key`` over ``section`` (the smallest for
    ``min_group`` or, without an aggregate, for a metric where higher is better); None when no
    group has a value."""
    pick = AGGREGATES[aggregate] if aggregate is not None else (min if higher_is_better(key) else max)
    candidates = [(value, name) for name, entry in section.items() if (value := entry.metrics.get(key)) is not None]
    if not candidates:
        return None
    value, name = pick(candidates, key=lambda pair: pair[0])
    return name, value
