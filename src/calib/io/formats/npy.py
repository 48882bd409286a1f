"""NumPy's .npy: one array, memory-mapped when read (a chunk of rows resident at a time)."""

from __future__ import annotations

import io

import numpy as np

from ...errors import InputError
from ..atomic import write_bytes_atomic
from .base import PARSE_ERRORS, Contents, Format


def load_npy(source, name: str, *, mmap: bool) -> np.ndarray:
    """A .npy array (memory-mapped with ``mmap``); never unpickled."""
    try:
        return np.load(source, mmap_mode="r" if mmap else None, allow_pickle=False)
    except PARSE_ERRORS as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise InputError(f"{name}: holds Python objects (pickled data is never loaded); need a numeric array") from None
        raise InputError(f"{name}: not a readable .npy file (truncated or corrupt: {exc.__class__.__name__}: {exc})") from None


def npy_bytes(array: np.ndarray) -> bytes:
    """The .npy encoding of ``array`` (never pickled)."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


class Npy(Format):
    name = "npy"
    suffixes = (".npy",)
    magic = b"\x93NUMPY"

    def read_predictions(self, path, name, score_prefix, label_column, scores=None):
        if scores is not None:
            raise InputError(f"{name}: a .npy file holds one unnamed array; there is no array {scores!r} to pick")
        if label_column is not None:
            raise InputError(f"{name}: a .npy file holds one array and no labels; give the labels in a file of their own")
        return Contents(load_npy(path, name, mmap=True), None, None, None, ())

    def read_named(self, path, key, *, labels=False):
        return np.asarray(load_npy(path, path, mmap=False))

    def read_matrix(self, path, names):
        return load_npy(path, path, mmap=True)

    def write(self, path, name, matrix, labels, passthrough):
        write_bytes_atomic(path, npy_bytes(matrix))


NPY = Npy()
