"""`calib export BUNDLE --to onnx --out calibrator.onnx`."""

from __future__ import annotations

from typing import Annotated

import typer

from ..api import UsageError, check_output_file
from . import render

TARGETS = ("onnx",)


def export(
    bundle: Annotated[str, typer.Argument(metavar="BUNDLE", help="Bundle directory written by `calib fit`.", show_default=False)],
    out: Annotated[str, typer.Option("--out", "-o", help="The model file to write (.onnx).", show_default=False)],
    to: Annotated[str, typer.Option("--to", help="The format: onnx.")] = "onnx",
    dtype: Annotated[str, typer.Option("--dtype", help="float32 | float64: the graph's input and probs output.")] = "float32",
    force: Annotated[bool, typer.Option("--force", help="Replace an existing model file.")] = False,
) -> None:
    """Export a fitted bundle as an ONNX graph for serving: scores in, calibrated probs (and sets) out.

    Example: calib export ts_bundle --to onnx --out calibrator.onnx
    """
    from ..api import DTYPES, INPUT_NAMES, OPSET, load

    if to not in TARGETS:
        raise UsageError(f"--to must be one of {', '.join(TARGETS)}; got {to!r}")
    if dtype not in DTYPES:
        raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    if not out.lower().endswith(".onnx"):
        raise UsageError(f"{out}: an ONNX model's file name ends in .onnx")
    check_output_file(out, force=force)
    calibration = load(bundle)
    calibration.to_onnx(out, dtype=dtype)
    outputs = "probs and sets" if "sets" in _outputs(calibration) else "probs"
    render.note(
        f"wrote {out}: {INPUT_NAMES[calibration.input_kind]} (N, {calibration.n_labels or calibration.n_classes}) {dtype} "
        f"-> {outputs}, "
        f"opset {OPSET}, bundle sha256 {(calibration.bundle_sha256 or '')[:12]}"
    )


def _outputs(calibration) -> tuple[str, ...]:
    from ..api import builds_sets

    return ("probs", "sets") if builds_sets(calibration.fitted) else ("probs",)
