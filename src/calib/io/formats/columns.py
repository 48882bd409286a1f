"""Scores and labels in a table of named columns (Parquet, Arrow IPC / Feather): a list column
named for the kind of scores (``logits``, ``log_probs``, ``probs``) or wide columns by a name prefix
(``logit_0``, ``logit_1``, ... ordered by their numeric suffix), the labels in a column of their own."""

from __future__ import annotations

import re

import numpy as np

from ...errors import InputError
from .base import SCORE_NAMES, label_name

#: Wide columns tried when no score prefix is given.
WIDE_PREFIXES = {"logit_": "logits", "log_prob_": "log-probs", "prob_": "probs"}


def score_columns(
    columns, score_prefix: str | None, path: str, scores: str | None = None, schema=None, labels=()
) -> tuple[list[str], str | None, bool]:
    """(the columns holding the scores, the kind their names say, whether they are wide columns):
    the list column ``scores`` when named, else the list column named for a kind unless a prefix is
    given, else the wide columns of ``score_prefix`` (or of the first of WIDE_PREFIXES present),
    else, given the table's Arrow ``schema``, every floating-point column but the ``labels`` and
    pandas' index, as a CSV of the same frame is read (:func:`floating_columns`)."""
    if scores is not None:
        if score_prefix is not None:
            raise InputError(
                f"{path}: the scores are named twice, as the column {scores!r} and by the prefix {score_prefix!r}; keep one"
            )
        if scores not in columns:
            raise InputError(f"{path}: no column named {scores!r} (found {', '.join(columns) or 'none'})")
        return [scores], SCORE_NAMES.get(scores), False
    list_names = [c for c in SCORE_NAMES if c in columns]
    if score_prefix is None and list_names:
        if len(list_names) > 1:
            raise InputError(f"{path}: several score columns ({', '.join(list_names)}); keep one")
        return [list_names[0]], SCORE_NAMES[list_names[0]], False
    prefixes = {score_prefix: None} if score_prefix is not None else WIDE_PREFIXES
    for prefix, prefix_kind in prefixes.items():
        used = [c for c in columns if c.startswith(prefix)]
        if used:
            return _order_wide(used), prefix_kind, True
    floating = [] if score_prefix is not None or schema is None else floating_columns(schema, labels)
    if floating:
        return floating, None, True
    raise InputError(
        f"{path}: no score column; expected a list column logits, log_probs or probs, or wide columns by a name prefix",
        cli_hint="--score-prefix PREFIX",
    )


#: Column names pandas gives its index when a frame is written with it.
INDEX_NAMES = ("", "Unnamed: 0", "__index_level_0__")


def floating_columns(schema, labels=()) -> list[str]:
    """The floating-point columns of an Arrow ``schema`` but the ``labels`` and pandas' index: the
    score columns of a table whose names say nothing (a ``to_csv`` or ``to_parquet`` of
    ``predict_proba``'s frame), in the table's order."""
    import pyarrow as pa

    return [f.name for f in schema if pa.types.is_floating(f.type) and f.name not in labels and f.name not in INDEX_NAMES]


def floating_note(used: list[str], kind: str | None, wide: bool, score_prefix: str | None) -> str | None:
    """For the input-kind line, when the scores were taken as every floating-point column (no list
    column, no prefix: :func:`score_columns`' last rule), which ones; else None."""
    if not wide or kind is not None or score_prefix is not None:
        return None
    return f"scores: the {len(used)} floating-point columns {used[0]} ... {used[-1]}, as no list column or prefix names them"


#: Wide label columns of a multi-label input, one 0/1 column per label: label_0, label_1, ...
WIDE_LABELS = re.compile(r"label_\d+")


def label_columns(names, wanted: str | None, path: str) -> list[str]:
    """The columns holding the labels: ``wanted`` (one column, or a name prefix ending in ``*``
    for one 0/1 column per label of a multi-label input), else ``label`` or ``labels``, else the
    wide columns ``label_0``, ``label_1``, ...; wide columns in the order of their numeric suffix.
    Empty when there are none."""
    if wanted is not None and wanted.endswith("*"):
        used = [n for n in names if n.startswith(wanted[:-1])]
        if not used:
            raise InputError(f"{path}: no column starts with {wanted[:-1]!r} (found {', '.join(names) or 'none'})")
        return _order_wide(used)
    single = label_name(names, wanted, path)
    if single is not None:
        return [single]
    return _order_wide([n for n in names if WIDE_LABELS.fullmatch(n)])


def labels_of(columns: list) -> np.ndarray | None:
    """The labels of :func:`label_columns`' columns (:func:`stacked_labels`); None without columns."""
    return stacked_labels(columns) if columns else None


def stacked_labels(columns: list) -> np.ndarray:
    """The labels of one or more label columns: one column's values (a list column gives the
    (N, L) matrix), or wide columns side by side as (N, L)."""
    if len(columns) == 1:
        return label_column_values(columns[0])
    return np.column_stack([label_column_values(column) for column in columns])


def label_column_values(column) -> np.ndarray:
    """A label column as an array; missing entries become NaN, which the label check
    refuses naming the row. A list column (a multi-label input's row of L 0/1 labels) gives the
    (N, L) matrix."""
    import pyarrow as pa

    if _is_list(column.type):
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        width = _list_width(array, "labels", "label", "labels")
        column = array.flatten() if len(array) else pa.array([], pa.int64())
        values = label_column_values(column)
        return values.reshape(len(array), width) if len(array) else values.reshape(0, 0)
    if column.null_count and (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        column = column.cast(pa.float64()).fill_null(np.nan)
    return column_numbers(column)


def named_column_values(column, *, labels: bool) -> np.ndarray:
    """A column read by name: as labels (:func:`label_column_values`) or as plain values
    (:func:`column_numbers`)."""
    return label_column_values(column) if labels else column_numbers(column)


def column_numbers(column) -> np.ndarray:
    """An Arrow column's values as a NumPy array: :func:`plain_numbers` for null-free numbers, else
    Arrow's ``to_numpy`` (strings, booleans, nulls)."""
    numbers = plain_numbers(column)
    return numbers if numbers is not None else column.to_numpy(zero_copy_only=False)


def plain_numbers(array) -> np.ndarray | None:
    """A null-free Arrow array (or chunked array) of integers or floating-point numbers as a NumPy
    view of its data buffer (read-only); None for any other array. Arrow's own ``to_numpy`` imports
    pandas on its first call, which cost a command reading a parquet file 0.5 s and 47 MiB."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()  # one chunk: that chunk, uncopied
    kind = array.type
    if array.null_count or not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        return None
    prefix = "float" if pa.types.is_floating(kind) else "uint" if pa.types.is_unsigned_integer(kind) else "int"
    dtype = np.dtype(f"{prefix}{kind.bit_width}")
    data = array.buffers()[1]
    if data is None:  # an empty array may have no buffer
        return np.empty(0, dtype=dtype)
    return np.frombuffer(data, dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def _is_list(arrow_type) -> bool:
    import pyarrow as pa

    return pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type)


def _list_width(array, path: str, key: str, what: str) -> int:
    """The common length of a list column's rows (``what`` they hold, for the message); a missing
    row or rows of different lengths are refused."""
    import pyarrow as pa

    if array.null_count:
        raise InputError(f"{path}: column {key!r} has {array.null_count} missing rows")
    if len(array) == 0:
        return 0
    if pa.types.is_fixed_size_list(array.type):
        return array.type.list_size
    lengths = column_numbers(array.value_lengths())
    width = int(lengths[0])
    if (lengths != width).any():
        row = int(np.argmax(lengths != width))
        raise InputError(f"{path}: ragged rows in column {key!r}: row 0 has {width} {what}, row {row} has {lengths[row]}")
    return width


def list_column_to_matrix(column, path: str, key: str) -> np.ndarray:
    import pyarrow as pa

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not _is_list(array.type):
        raise InputError(f"{path}: column {key!r} must be a list of numbers per row; got {array.type}")
    width = _list_width(array, path, key, "scores")
    if len(array) == 0:
        return np.zeros((0, 0), dtype=np.float64)
    values = array.flatten()
    if values.null_count:
        raise InputError(f"{path}: column {key!r} has {values.null_count} missing scores")
    if not pa.types.is_floating(values.type):
        raise InputError(f"{path}: column {key!r} must hold floating-point scores; got {values.type}")
    return column_numbers(values).reshape(len(array), width)


def _order_wide(names: list[str]) -> list[str]:
    """Wide columns in the order of their numeric suffix when every suffix is an integer."""
    suffixes = [int(found.group(1)) for n in names if (found := re.search(r"(\d+)$", n))]
    if len(suffixes) == len(names):
        return [n for _, n in sorted(zip(suffixes, names))]
    return names


def wide_columns_to_matrix(table, names: list[str], path: str) -> np.ndarray:
    import pyarrow as pa

    for n in names:
        col = table.column(n)
        if not pa.types.is_floating(col.type):
            raise InputError(f"{path}: score column {n!r} must be floating point; got {col.type}")
        if col.null_count:
            raise InputError(f"{path}: score column {n!r} has {col.null_count} missing values")
    return np.stack([column_numbers(table.column(n)) for n in names], axis=1)


def matrix_columns(name: str, matrix: np.ndarray) -> dict:
    """The output columns of an (N, K) matrix: a fixed-size-list column ``name``, or for the boolean
    conformal-set mask a list column ``set`` of each row's class indices, ascending."""
    if matrix.dtype != bool:
        return {name: matrix}
    import pyarrow as pa

    _, classes = np.nonzero(matrix)
    offsets = np.concatenate([[0], np.cumsum(matrix.sum(axis=1))]).astype(np.int32)
    return {"set": pa.ListArray.from_arrays(pa.array(offsets), pa.array(classes.astype(np.int32)))}


def output_table(list_columns: dict, labels=None, passthrough=None):
    """A table of one fixed-size-list (or list) column per entry, then ``label`` and the columns
    carried through from the input."""
    import pyarrow as pa

    arrays, names = [], []
    for column, values in list_columns.items():
        arrays.append(values if isinstance(values, pa.Array) else _fixed_size_list(values))
        names.append(column)
    if labels is not None:  # one class index per row, or a multi-label input's 0/1 row of L
        labels = np.asarray(labels, dtype=np.int64)
        arrays.append(_fixed_size_list(labels) if labels.ndim == 2 else pa.array(labels))
        names.append("label")
    table = pa.Table.from_arrays(arrays, names=names)
    if passthrough is not None:
        for field_name, column in zip(passthrough.column_names, passthrough.columns):
            table = table.append_column(field_name, column)
    return table


def _fixed_size_list(matrix: np.ndarray):
    import pyarrow as pa

    matrix = np.ascontiguousarray(matrix)
    return pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), matrix.shape[1])
