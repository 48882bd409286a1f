"""Apache Parquet: scores as a list column (``logits``, ``log_probs`` or ``probs``) or wide columns by
a name prefix, decoded a row group at a time; other columns are carried through to the outputs."""

from __future__ import annotations

import threading

import numpy as np

from ...errors import InputError
from ..atomic import atomic_path
from .base import PARSE_ERRORS, Contents, Format, unreadable
from .columns import (
    floating_note,
    label_columns,
    labels_of,
    list_column_to_matrix,
    matrix_columns,
    named_column_values,
    output_table,
    score_columns,
    wide_columns_to_matrix,
)


def _read_parquet(path: str, name: str, score_prefix: str | None, label_column: str | None, scores: str | None) -> Contents:
    """The scores stay in the file and are decoded a row group at a time (:class:`ParquetScores`);
    labels and pass-through columns are read whole."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        columns = parquet.schema_arrow.names
        label_keys = label_columns(columns, label_column, name)
        label_table = parquet.read(columns=label_keys)
        labels = labels_of([label_table.column(key) for key in label_keys])
    except (pa.ArrowException, *PARSE_ERRORS) as exc:
        raise InputError(f"{name}: not a readable parquet file ({exc})") from None
    used, kind, wide = score_columns(columns, score_prefix, path, scores, parquet.schema_arrow, label_keys)
    picked = floating_note(used, kind, wide, score_prefix)
    read_on_demand = ParquetScores(parquet, used, wide=wide, path=path)
    keep = [c for c in columns if c not in used and c not in label_keys]
    passthrough = parquet.read(columns=keep) if keep else None
    return Contents(read_on_demand, labels, kind, passthrough, tuple(columns), picked)


#: Rows of a row group decoded at a time (:meth:`ParquetScores._decode_in_batches`).
BATCH_ROWS = 512


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
            return wide_columns_to_matrix(table, self.columns, self.path)
        return list_column_to_matrix(table.column(self.columns[0]), self.path, self.columns[0])

    def _decode_in_batches(self, index: int) -> np.ndarray:
        """Row group ``index`` decoded BATCH_ROWS rows at a time into one matrix, on this thread, with
        Arrow's freed memory handed back after: reading a row group whole holds about five times its
        decoded size in Arrow's buffers (levels, pages, the list arrays), batches a few MiB."""
        import pyarrow as pa

        matrix, position = None, 0
        batches = self.parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=[index], columns=self.columns, use_threads=False)
        for batch in batches:
            part = self._decode(pa.Table.from_batches([batch]))
            if matrix is None:
                matrix = np.empty((self.parquet.metadata.row_group(index).num_rows, part.shape[1]), dtype=part.dtype)
            matrix[position : position + len(part)] = part
            position += len(part)
        pa.default_memory_pool().release_unused()
        if matrix is None:  # a row group without rows
            return self._decode(self.parquet.read_row_group(index, columns=self.columns))
        return matrix

    def _group(self, index: int) -> np.ndarray:
        """Row group ``index`` decoded; one reader at a time (chunks are read from worker threads),
        and the cache is read and replaced whole, so a thread never returns another's group. A
        thread that waited for the lock while another decoded the same group takes that one: two
        threads reading either side of a group boundary otherwise decoded most groups twice."""
        import pyarrow as pa

        matrix = self._cached_group(index)
        if matrix is not None:
            return matrix
        with self._lock:
            matrix = self._cached_group(index)
            if matrix is not None:
                return matrix
            try:
                matrix = self._decode_in_batches(index)
            except (pa.ArrowException, *PARSE_ERRORS) as exc:
                raise InputError(f"{self.path}: row group {index} is unreadable ({exc})") from None
            if index and matrix.shape[1] != self.shape[1]:
                raise InputError(
                    f"{self.path}: row group {index} has {matrix.shape[1]} scores per row, the first has {self.shape[1]}"
                )
            self._cached = (index, matrix)
        return matrix

    def _cached_group(self, index: int) -> np.ndarray | None:
        cached = self._cached
        return cached[1] if cached is not None and cached[0] == index else None

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
    return list_column_to_matrix(table.column(key), path, key)


def write_parquet(path: str, list_columns: dict, *, labels=None, passthrough=None) -> None:
    """Parquet with one fixed-size-list (or list) column per entry, then ``label`` and pass-through."""
    import pyarrow.parquet as pq

    with atomic_path(path) as tmp:
        pq.write_table(output_table(list_columns, labels, passthrough), tmp)


class Parquet(Format):
    name = "parquet"
    suffixes = (".parquet",)
    magic = b"PAR1"
    shards = True
    carries_columns = True

    def read_predictions(self, path, name, score_prefix, label_column, scores=None):
        return _read_parquet(path, name, score_prefix, label_column, scores)

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
        return named_column_values(column, labels=labels)

    def read_matrix(self, path, names):
        return parquet_array(path, names)

    def write(self, path, name, matrix, labels, passthrough):
        write_parquet(path, matrix_columns(name, matrix), labels=labels, passthrough=passthrough)


PARQUET = Parquet()
