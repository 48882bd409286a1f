"""Writers for calibrated outputs in the format of the output path's extension (docs/cli.md, `apply`)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from ..errors import InputError
from .atomic import atomic_path
from .formats import FORMATS, suffix_of

#: Array / column name used for each output kind.
OUTPUT_NAMES = {"probs": "probs", "log-probs": "log_probs", "logits": "logits", "sets": "sets"}


def check_output_path(path: str, inputs: Sequence[str | None]) -> None:
    """Refuse unknown extensions and any output that would overwrite one of the inputs."""
    suffix = suffix_of(path)
    if suffix not in WRITERS:
        raise InputError(f"{path}: unknown output type {suffix or '(none)'}; use {', '.join(WRITERS)}")
    check_not_an_input(path, inputs)


def check_not_an_input(path: str, inputs: Sequence[str | None]) -> None:
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
    WRITERS[suffix_of(path)].write(path, OUTPUT_NAMES[what], matrix, labels, passthrough)


def write_sets(path: str, in_set: np.ndarray, *, labels=None, passthrough=None) -> None:
    """The conformal sets (boolean (N, K) mask): :func:`write_matrix` with ``what="sets"``."""
    write_matrix(path, in_set, "sets", labels=labels, passthrough=passthrough)


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


#: suffix -> the format that writes it (calib.io.formats)
WRITERS = {suffix: fmt for fmt in FORMATS if fmt.writable for suffix in fmt.suffixes}
