"""Writers for calibrated outputs in the format of the output path's extension (docs/cli.md, `apply`)."""

from __future__ import annotations

import io
import os
import zipfile

import numpy as np

from ..errors import InputError
from .atomic import atomic_path, write_bytes_atomic

#: Array / column name used for each output kind.
OUTPUT_NAMES = {"probs": "probs", "log-probs": "log_probs", "logits": "logits", "sets": "sets"}


def check_output_path(path: str, inputs: list[str]) -> None:
    """Refuse unknown extensions and any output that would overwrite one of the inputs."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in WRITERS:
        raise InputError(f"{path}: unknown output type {suffix or '(none)'}; use {', '.join(WRITERS)}")
    check_not_an_input(path, inputs)


def check_not_an_input(path: str, inputs: list[str | None]) -> None:
    """Refuse an output path that is one of the command's input files (``-`` and None are skipped)."""
    for source in inputs:
        if source is None:
            continue
        if source != "-" and os.path.exists(path) and os.path.exists(source) and os.path.samefile(path, source):
            raise InputError(f"{path}: is an input of this command; refusing to overwrite it")


def write_matrix(path: str, matrix: np.ndarray, what: str, *, labels=None, passthrough=None) -> None:
    """Write an (N, K) matrix atomically in the format of ``path``'s suffix: ``what`` = probs,
    log-probs or logits (floats), or sets (the boolean conformal-set mask).

    .npy: the matrix alone. .npz: the matrix under its kind's name, plus ``labels`` if known.
    .parquet: a fixed-size-list column named for the kind (sets: a list column ``set`` of each row's
    class indices, ascending), ``label``, and the carried-through columns.
    """
    WRITERS[os.path.splitext(path)[1].lower()](path, OUTPUT_NAMES[what], matrix, labels, passthrough)


def write_sets(path: str, in_set: np.ndarray, *, labels=None, passthrough=None) -> None:
    """The conformal sets (boolean (N, K) mask): :func:`write_matrix` with ``what="sets"``."""
    write_matrix(path, in_set, "sets", labels=labels, passthrough=passthrough)


def _write_npy(path, name, matrix, labels, passthrough) -> None:
    write_bytes_atomic(path, npy_bytes(matrix))


def _write_npz(path, name, matrix, labels, passthrough) -> None:
    arrays = {name: matrix}
    if labels is not None:
        arrays["labels"] = labels
    write_bytes_atomic(path, npz_bytes(arrays))


def _write_parquet_matrix(path, name, matrix, labels, passthrough) -> None:
    if matrix.dtype == bool:  # sets: each row's class indices
        import pyarrow as pa

        _, classes = np.nonzero(matrix)
        offsets = np.concatenate([[0], np.cumsum(matrix.sum(axis=1))]).astype(np.int32)
        columns = {"set": pa.ListArray.from_arrays(pa.array(offsets), pa.array(classes.astype(np.int32)))}
    else:
        columns = {name: matrix}
    write_parquet(path, columns, labels=labels, passthrough=passthrough)


def write_npy_stream(target, shape: tuple, dtype, blocks) -> None:
    """Write a .npy of ``shape`` block by block (rows in order) to a path (atomically) or a binary
    stream, never holding the whole array. The bytes equal ``np.save`` of the assembled array."""
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": tuple(shape)}

    def _write(handle):
        np.lib.format.write_array_header_1_0(handle, header)
        for block in blocks:
            handle.write(np.ascontiguousarray(block, dtype=dtype).data)

    if isinstance(target, str):
        with atomic_path(target) as tmp, open(tmp, "wb") as handle:
            _write(handle)
    else:
        _write(target)


def npy_bytes(array: np.ndarray) -> bytes:
    """The .npy encoding of ``array`` (never pickled)."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def npz_bytes(arrays: dict) -> bytes:
    """An uncompressed .npz whose bytes depend only on the arrays.

    ``np.savez`` stamps each zip entry with the current time; here every entry gets the fixed
    date 1980-01-01, so the same arrays always give the same file.
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for key, array in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            archive.writestr(info, npy_bytes(np.asarray(array)))
    return buffer.getvalue()


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


#: The formats' writers, one entry each (the readers' table is calib.io.readers.READ_PREDICTIONS).
WRITERS = {".npy": _write_npy, ".npz": _write_npz, ".parquet": _write_parquet_matrix}
