"""safetensors: named tensors, pickle-free by design (Hugging Face). The file is an 8-byte
little-endian header length, a JSON header {name: {"dtype", "shape", "data_offsets"}}, then the
tensors' bytes, which are memory-mapped in place; read with NumPy alone (no extra package).
The scores and labels are picked among the tensors as in a .npz."""

from __future__ import annotations

import json
import struct

import numpy as np

from ...errors import InputError
from ..atomic import write_bytes_atomic
from .base import SCORE_NAMES, Contents, Format, label_name
from .named_arrays import label_key, score_key

#: safetensors dtypes NumPy reads as they are (bfloat16 and the float8 types have no NumPy dtype)
DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U64": "<u8",
    "U32": "<u4",
    "U16": "<u2",
    "U8": "u1",
    "BOOL": "?",
}
#: The largest JSON header read (the format's own limit is 100 MB)
MAX_HEADER = 100_000_000


def _header(path: str, name: str) -> tuple[dict, int]:
    """({tensor: (shape, dtype, start offset in the file)}, file size)."""
    try:
        with open(path, "rb") as handle:
            size_bytes = handle.read(8)
            if len(size_bytes) < 8:
                raise ValueError("shorter than its header length")
            (length,) = struct.unpack("<Q", size_bytes)
            if length > MAX_HEADER:
                raise ValueError(f"a header of {length} bytes")
            header = json.loads(handle.read(length))
            handle.seek(0, 2)
            size = handle.tell()
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{name}: not a readable .safetensors file ({exc})") from None
    tensors = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        if info.get("dtype") not in DTYPES:
            raise InputError(f"{name}: tensor {key!r} is {info.get('dtype')}, which NumPy cannot hold; save it as F32 or F64")
        begin, end = info["data_offsets"]
        dtype, shape = np.dtype(DTYPES[info["dtype"]]), tuple(info["shape"])
        start = 8 + length + begin
        if end - begin != int(np.prod(shape)) * dtype.itemsize or start + (end - begin) > size:
            raise InputError(f"{name}: tensor {key!r} is truncated or its offsets disagree with its shape")
        tensors[key] = (shape, dtype, start)
    return tensors, size


def _tensor(path: str, tensors: dict, key: str) -> np.ndarray:
    shape, dtype, start = tensors[key]
    if int(np.prod(shape)) == 0:
        return np.zeros(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=shape, offset=start)


def safetensors_bytes(arrays: dict) -> bytes:
    """The safetensors encoding of named arrays (C order, little-endian), in the given order."""
    header, chunks, offset = {}, [], 0
    codes = {np.dtype(v): k for k, v in DTYPES.items()}
    for key, array in arrays.items():
        array = np.ascontiguousarray(array)
        data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        header[key] = {
            "dtype": codes[array.dtype.newbyteorder("=")],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


class Safetensors(Format):
    name = "safetensors"
    suffixes = (".safetensors",)
    shards = True

    def sniff(self, start: bytes) -> bool:
        """An 8-byte length, then the JSON header's opening brace."""
        return len(start) > 8 and start[8:9] == b"{" and struct.unpack("<Q", start[:8])[0] <= MAX_HEADER

    def read_predictions(self, path, name, score_prefix, label_column, scores=None):
        tensors, _ = _header(path, name)
        headers = {key: (shape, dtype) for key, (shape, dtype, _) in tensors.items()}
        named_labels = label_name(tuple(tensors), label_column, name)
        key, kind, picked_scores = score_key(headers, named_labels, name, scores)
        labels_key, picked_labels = label_key(headers, key, label_column, name, conventional=key in SCORE_NAMES)
        labels = None if labels_key is None else np.asarray(_tensor(path, tensors, labels_key))
        picked = "; ".join(p for p in (picked_scores, picked_labels) if p) or None
        return Contents(_tensor(path, tensors, key), labels, kind, None, tuple(tensors), picked)

    def names(self, path):
        return tuple(_header(path, path)[0])

    def read_named(self, path, key, *, labels=False):
        tensors, _ = _header(path, path)
        if key not in tensors:
            raise InputError(f"{path}: no tensor named {key!r} (found {', '.join(tensors) or 'none'})")
        return np.asarray(_tensor(path, tensors, key))

    def read_matrix(self, path, names):
        tensors, _ = _header(path, path)
        key = next((k for k in names if k in tensors), None)
        if key is None:
            raise InputError(f"{path}: no tensor named {' or '.join(names)} (found {', '.join(tensors) or 'none'})")
        return _tensor(path, tensors, key)

    def write(self, path, name, matrix, labels, passthrough):
        arrays = {name: matrix}
        if labels is not None:
            arrays["labels"] = np.asarray(labels, dtype=np.int64)
        write_bytes_atomic(path, safetensors_bytes(arrays))


SAFETENSORS = Safetensors()
