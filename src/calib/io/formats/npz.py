"""NumPy's .npz: named arrays in a zip archive; an uncompressed score array is memory-mapped in place."""

from __future__ import annotations

import io
import struct
import zipfile

import numpy as np

from ...errors import InputError
from ..atomic import write_bytes_atomic
from .base import PARSE_ERRORS, SCORE_NAMES, Contents, Format, label_name, unreadable
from .named_arrays import label_key, score_key
from .npy import npy_bytes


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


def npz_array(path: str, names: tuple[str, ...]) -> np.ndarray:
    """The first of ``names`` that a .npz holds; a clear error when it holds none or is unreadable."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            key = next((k for k in names if k in archive.files), None)
            if key is None:
                raise InputError(f"{path}: no array named {' or '.join(names)} (found {', '.join(archive.files) or 'none'})")
            return archive[key]
    except PARSE_ERRORS as exc:
        raise unreadable(path, ".npz", exc) from None


def _member_headers(archive: zipfile.ZipFile) -> dict[str, tuple[tuple, np.dtype]]:
    """{array: (shape, dtype)} of a .npz from the members' .npy headers, no array read."""
    headers = {}
    for info in archive.infolist():
        if not info.filename.endswith(".npy"):
            continue
        with archive.open(info) as handle:
            version = np.lib.format.read_magic(handle)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = read(handle)
        headers[info.filename[: -len(".npy")]] = (shape, dtype)
    return headers


def _mapped_member(path: str, archive: zipfile.ZipFile, key: str) -> np.ndarray | None:
    """Array ``key`` of a .npz memory-mapped in place when its member is stored uncompressed (what
    ``np.savez`` writes), so a large score matrix is neither copied nor CRC-checked up front (0.7 s
    per 200 MB); None for a compressed member, which is read the ordinary way."""
    info = archive.getinfo(f"{key}.npy")
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        local = handle.read(30)  # the local file header: its name and extra-field lengths are at 26
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            raise ValueError("bad local header")
        name_length, extra_length = struct.unpack("<HH", local[26:30])
        start = info.header_offset + 30 + name_length + extra_length
        handle.seek(start)
        version = np.lib.format.read_magic(handle)
        shape, fortran_order, dtype = (
            np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        )(handle)
        offset = handle.tell()
    if dtype.hasobject:
        raise ValueError("object arrays are never loaded")
    if offset - start + int(np.prod(shape)) * dtype.itemsize > info.file_size:
        raise ValueError("the member is truncated")
    if int(np.prod(shape)) == 0:
        return np.zeros(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=shape, order="F" if fortran_order else "C", offset=offset)


class Npz(Format):
    name = "npz"
    suffixes = (".npz",)
    magic = b"PK\x03\x04"

    def read_predictions(self, path, name, score_prefix, label_column, scores=None):
        try:
            archive = np.load(path, allow_pickle=False)
        except PARSE_ERRORS as exc:
            raise unreadable(name, ".npz", exc) from None
        with archive:
            try:
                headers = _member_headers(archive.zip)
            except PARSE_ERRORS as exc:
                raise unreadable(name, ".npz", exc) from None
            names = tuple(archive.files)
            named_labels = label_name(names, label_column, name)
            key, kind, picked_scores = score_key(headers, named_labels, name, scores)
            labels_key, picked_labels = label_key(headers, key, label_column, name, conventional=key in SCORE_NAMES)
            picked = "; ".join(p for p in (picked_scores, picked_labels) if p) or None
            try:
                matrix = _mapped_member(path, archive.zip, key)
                if matrix is None:
                    matrix = archive[key]
                labels = archive[labels_key] if labels_key is not None else None
            except PARSE_ERRORS as exc:
                raise InputError(f"{name}: array {key!r} is unreadable ({exc})") from None
        return Contents(matrix, labels, kind, None, names, picked)

    def names(self, path):
        try:
            with np.load(path, allow_pickle=False) as archive:
                return tuple(archive.files)
        except PARSE_ERRORS as exc:
            raise unreadable(path, ".npz", exc) from None

    def read_named(self, path, key, *, labels=False):
        return np.asarray(npz_array(path, (key,)))

    def read_matrix(self, path, names):
        return npz_array(path, names)

    def write(self, path, name, matrix, labels, passthrough):
        arrays = {name: matrix}
        if labels is not None:
            arrays["labels"] = labels
        write_bytes_atomic(path, npz_bytes(arrays))


NPZ = Npz()
