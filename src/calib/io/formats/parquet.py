"""Apache Parquet: scores as a list column (``logits``, ``log_probs`` or ``probs``) or wide columns by
a name prefix, decoded a row group at a time; other columns are carried through to the outputs."""

from __future__ import annotations

import re
import threading

import numpy as np

from ...errors import InputError
from ..atomic import atomic_path
from .base import PARSE_ERRORS, SCORE_NAMES, Contents, Format, label_name, unreadable

#: Wide parquet columns tried when no score prefix is given.
WIDE_PREFIXES = {"logit_": "logits", "log_prob_": "log-probs", "prob_": "probs"}


def _read_parquet(path: str, name: str, score_prefix: str | None, label_column: str | None) -> Contents:
    """The scores stay in the file and are decoded a row group at a time (:class:`ParquetScores`);
    labels and pass-through columns are read whole."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        columns = parquet.schema_arrow.names
        labels_key = label_name(columns, label_column, name)
        labels = None if labels_key is None else _label_column(parquet.read(columns=[labels_key]).column(labels_key))
    except (pa.ArrowException, *PARSE_ERRORS) as exc:
        raise InputError(f"{name}: not a readable parquet file ({exc})") from None
    list_names = [c for c in SCORE_NAMES if c in columns]
    if score_prefix is None and list_names:
        if len(list_names) > 1:
            raise InputError(f"{path}: several score columns ({', '.join(list_names)}); keep one")
        used, kind = [list_names[0]], SCORE_NAMES[list_names[0]]
    else:
        prefixes = {score_prefix: None} if score_prefix is not None else WIDE_PREFIXES
        used, kind = [], None
        for prefix, prefix_kind in prefixes.items():
            used = [c for c in columns if c.startswith(prefix)]
            if used:
                kind = prefix_kind
                break
        if not used:
            raise InputError(
                f"{path}: no score column; expected a list column logits, log_probs or probs, or wide columns by a name prefix",
                cli_hint="--score-prefix PREFIX",
            )
        used = _order_wide(used)
    scores = ParquetScores(parquet, used, wide=not (score_prefix is None and list_names), path=path)
    keep = [c for c in columns if c not in used and c != labels_key]
    passthrough = parquet.read(columns=keep) if keep else None
    return Contents(scores, labels, kind, passthrough, tuple(columns))


def _label_column(column) -> np.ndarray:
    """A parquet label column as an array; missing entries become NaN, which the label check
    refuses naming the row."""
    import pyarrow as pa

    if column.null_count and (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        column = column.cast(pa.float64())
    return column.to_numpy(zero_copy_only=False)


class ParquetScores:
    """The (N, K) score matrix of a parquet file, read on demand a row group at a time.

    Supports what the pipeline asks of a score array: ``shape``, ``ndim``, ``dtype``, ``reshape`` to
    its own shape, and row indexing by a slice or an index array. Decoding one row group at a time
    (the last one cached) keeps memory at the row groups a chunk of rows touches, so a file written
    with row groups is streamed like a memory-mapped .npy; a file with one huge row group is not.
    """

    def __init__(self, parquet, columns: list[str], *, wide: bool, path: str):
        self.parquet, self.columns, self.wide, self.path = parquet, columns, wide, path
        sizes = [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)]
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._cached: tuple[int, np.ndarray] | None = None
        self._lock = threading.Lock()
        first = self._group(0) if sizes and sizes[0] else self._decode(parquet.read(columns=columns))
        self.dtype = first.dtype
        self.shape = (int(self.starts[-1]), int(first.shape[1]))
        self.ndim = 2

    def _decode(self, table) -> np.ndarray:
        if self.wide:
            return _wide_columns_to_matrix(table, self.columns, self.path)
        return _list_column_to_matrix(table.column(self.columns[0]), self.path, self.columns[0])

    def _group(self, index: int) -> np.ndarray:
        """Row group ``index`` decoded; one reader at a time (chunks are read from worker threads),
        and the cache is read and replaced whole, so a thread never returns another's group."""
        import pyarrow as pa

        cached = self._cached
        if cached is not None and cached[0] == index:
            return cached[1]
        with self._lock:
            try:
                table = self.parquet.read_row_group(index, columns=self.columns)
            except (pa.ArrowException, *PARSE_ERRORS) as exc:
                raise InputError(f"{self.path}: row group {index} is unreadable ({exc})") from None
            matrix = self._decode(table)
        if index and matrix.shape[1] != self.shape[1]:
            raise InputError(
                f"{self.path}: row group {index} has {matrix.shape[1]} scores per row, the first has {self.shape[1]}"
            )
        self._cached = (index, matrix)
        return matrix

    def reshape(self, *shape):
        if shape in ((self.shape[0], -1), (self.shape,), (self.shape[0], self.shape[1])):
            return self
        raise ValueError(f"ParquetScores cannot take shape {shape}")

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self[:], dtype=dtype)

    def __getitem__(self, rows) -> np.ndarray:
        if isinstance(rows, slice):
            start, stop, step = rows.indices(self.shape[0])
            if step != 1:
                return self[np.arange(start, stop, step)]
            first = int(np.searchsorted(self.starts, start, side="right")) - 1
            parts, position = [], start
            for group in range(max(first, 0), len(self.starts) - 1):
                if position >= stop:
                    break
                lo, hi = self.starts[group], self.starts[group + 1]
                block = self._group(group)
                parts.append(block[position - lo : min(stop, hi) - lo])
                position = min(stop, hi)
            if not parts:
                return np.empty((0, self.shape[1]), dtype=self.dtype)
            return parts[0] if len(parts) == 1 else np.concatenate(parts)
        index = np.asarray(rows)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        out = np.empty((len(index), self.shape[1]), dtype=self.dtype)
        group_of = np.searchsorted(self.starts, index, side="right") - 1
        for group in np.unique(group_of):
            chosen = group_of == group
            out[chosen] = self._group(int(group))[index[chosen] - self.starts[group]]
        return out


def _list_column_to_matrix(column, path: str, key: str) -> np.ndarray:
    import pyarrow as pa

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type) or pa.types.is_fixed_size_list(array.type)):
        raise InputError(f"{path}: column {key!r} must be a list of numbers per row; got {array.type}")
    if array.null_count:
        raise InputError(f"{path}: column {key!r} has {array.null_count} missing rows")
    if len(array) == 0:
        return np.zeros((0, 0), dtype=np.float64)
    if pa.types.is_fixed_size_list(array.type):
        width = array.type.list_size
    else:
        lengths = array.value_lengths().to_numpy()
        width = int(lengths[0])
        if (lengths != width).any():
            row = int(np.argmax(lengths != width))
            raise InputError(f"{path}: ragged rows in column {key!r}: row 0 has {width} scores, row {row} has {lengths[row]}")
    values = array.flatten()
    if values.null_count:
        raise InputError(f"{path}: column {key!r} has {values.null_count} missing scores")
    if not pa.types.is_floating(values.type):
        raise InputError(f"{path}: column {key!r} must hold floating-point scores; got {values.type}")
    return values.to_numpy(zero_copy_only=False).reshape(len(array), width)


def _order_wide(names: list[str]) -> list[str]:
    """Wide columns in the order of their numeric suffix when every suffix is an integer."""
    suffixes = [re.search(r"(\d+)$", n) for n in names]
    if all(suffixes):
        return [n for _, n in sorted(zip((int(s.group(1)) for s in suffixes), names))]
    return names


def _wide_columns_to_matrix(table, names: list[str], path: str) -> np.ndarray:
    import pyarrow as pa

    for n in names:
        col = table.column(n)
        if not pa.types.is_floating(col.type):
            raise InputError(f"{path}: score column {n!r} must be floating point; got {col.type}")
        if col.null_count:
            raise InputError(f"{path}: score column {n!r} has {col.null_count} missing values")
    return np.stack([table.column(n).to_numpy() for n in names], axis=1)


def parquet_array(path: str, names: tuple[str, ...]) -> np.ndarray:
    """The first of ``names`` that a parquet file holds as a list column, as an (N, K) matrix."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        columns = pq.ParquetFile(path).schema_arrow.names
        key = next((k for k in names if k in columns), None)
        if key is None:
            raise InputError(f"{path}: no column named {' or '.join(names)} (found {', '.join(columns) or 'none'})")
        table = pq.read_table(path, columns=[key])
    except (pa.ArrowException, *PARSE_ERRORS) as exc:
        raise InputError(f"{path}: not a readable parquet file ({exc})") from None
    return _list_column_to_matrix(table.column(key), path, key)


def write_parquet(path: str, list_columns: dict, *, labels=None, passthrough=None) -> None:
    """Parquet with one fixed-size-list (or list) column per entry, then ``label`` and pass-through."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays, names = [], []
    for column, values in list_columns.items():
        arrays.append(values if isinstance(values, pa.Array) else _fixed_size_list(values))
        names.append(column)
    if labels is not None:
        arrays.append(pa.array(np.asarray(labels, dtype=np.int64)))
        names.append("label")
    table = pa.Table.from_arrays(arrays, names=names)
    if passthrough is not None:
        for field_name, column in zip(passthrough.column_names, passthrough.columns):
            table = table.append_column(field_name, column)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def _fixed_size_list(matrix: np.ndarray):
    import pyarrow as pa

    matrix = np.ascontiguousarray(matrix)
    return pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), matrix.shape[1])


def _write_parquet_matrix(path, name, matrix, labels, passthrough) -> None:
    if matrix.dtype == bool:  # sets: each row's class indices
        import pyarrow as pa

        _, classes = np.nonzero(matrix)
        offsets = np.concatenate([[0], np.cumsum(matrix.sum(axis=1))]).astype(np.int32)
        columns = {"set": pa.ListArray.from_arrays(pa.array(offsets), pa.array(classes.astype(np.int32)))}
    else:
        columns = {name: matrix}
    write_parquet(path, columns, labels=labels, passthrough=passthrough)


class Parquet(Format):
    name = "parquet"
    suffixes = (".parquet",)
    magic = b"PAR1"
    shards = True
    carries_columns = True

    def read_predictions(self, path, name, score_prefix, label_column):
        return _read_parquet(path, name, score_prefix, label_column)

    def names(self, path):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return tuple(pq.ParquetFile(path).schema_arrow.names)
        except (pa.ArrowException, *PARSE_ERRORS) as exc:
            raise unreadable(path, ".parquet", exc) from None

    def read_named(self, path, key, *, labels=False):
        import pyarrow.parquet as pq

        column = pq.read_table(path, columns=[key]).column(key)
        return _label_column(column) if labels else column.to_numpy(zero_copy_only=False)

    def read_matrix(self, path, names):
        return parquet_array(path, names)

    def write(self, path, name, matrix, labels, passthrough):
        _write_parquet_matrix(path, name, matrix, labels, passthrough)


PARQUET = Parquet()
