"""Exporting a bundle as an ONNX graph for serving (docs/export.md)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError


@dataclass(frozen=True)
class Exported:
    """What an export wrote: the graph's ``input`` name and ``width`` (its classes, or a
    multi-label bundle's labels), its ``dtype``, its ``outputs`` (probs, and sets for a conformal
    method), the ONNX ``opset`` and the bundle's ``sha256``."""

    input: str
    width: int
    dtype: str
    outputs: tuple[str, ...]
    opset: int
    sha256: str


def export_bundle(bundle: str, out: str, *, dtype: str = "float32", force: bool = False) -> Exported:
    """Write the bundle directory ``bundle`` as the ONNX model file ``out`` (``.onnx``; an existing
    one replaced only with ``force``): scores in, calibrated probs (and sets) out, in ``dtype``
    (float32 or float64). Everything is checked before the bundle is read."""
    from ..api import load
    from ..calibrators.base import builds_sets
    from ..io.atomic import check_output_file
    from ..onnx_export import DTYPES, INPUT_NAMES, OPSET

    if dtype not in DTYPES:
        raise UsageError(f"the graph's dtype must be one of {', '.join(DTYPES)}; got {dtype!r}", cli_hint="--dtype")
    if not out.lower().endswith(".onnx"):
        raise UsageError(f"{out}: an ONNX model's file name ends in .onnx")
    check_output_file(out, force=force)
    calibration = load(bundle)
    calibration.to_onnx(out, dtype=dtype)
    outputs = ("probs", "sets") if builds_sets(calibration.fitted) else ("probs",)
    width = int(calibration.n_labels or calibration.n_classes or 0)
    kind = str(calibration.input_kind)
    return Exported(INPUT_NAMES[kind], width, dtype, outputs, OPSET, calibration.bundle_sha256 or "")
