"""`calib export BUNDLE --to onnx --out calibrator.onnx`."""

from __future__ import annotations

from typing import Annotated

import typer

from ..operations import UsageError
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
    from ..operations import export_bundle

    if to not in TARGETS:
        raise UsageError(f"--to must be one of {', '.join(TARGETS)}; got {to!r}")
    done = export_bundle(bundle, out, dtype=dtype, force=force)
    render.note(
        f"wrote {out}: {done.input} (N, {done.width}) {done.dtype} -> {' and '.join(done.outputs)}, "
        f"opset {done.opset}, bundle sha256 {done.sha256[:12]}"
    )
