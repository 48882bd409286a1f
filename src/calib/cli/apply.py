"""`calib apply BUNDLE_DIR PRED --out OUT`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .. import pipeline
from ..errors import UsageError
from ..io import check_output_path, read_predictions, write_matrix
from ..io.writers import npy_bytes
from . import options, render

WHAT = ("probs", "log-probs")


def apply(
    bundle: Annotated[str, typer.Argument(help="Bundle directory written by `calib fit`.", show_default=False)],
    pred: options.Pred,
    out: Annotated[str, typer.Option("--out", "-o", help="Output file (.npy, .npz, .parquet); - writes .npy to stdout.", show_default=False)],
    what: Annotated[str, typer.Option("--what", help="probs | log-probs.")] = "probs",
    labels: options.Labels = None,
    input_kind: options.InputKind = "auto",
    score_prefix: options.ScorePrefix = None,
) -> None:
    """Apply a fitted bundle to PRED and write calibrated probabilities.

    Example: calib apply ts_bundle test.npz --out calibrated.npz
    """
    if what not in WHAT:
        raise UsageError(f"--what must be one of {', '.join(WHAT)}; got {what!r}")
    if out != "-":
        check_output_path(out, [pred, labels or "-"])
    calibrator, saved = pipeline.load_calibrator(bundle)
    preds = read_predictions(pred, labels_path=labels, input_kind=input_kind, score_prefix=score_prefix)
    pipeline.check_compatible(saved, preds, bundle)
    render.note(f"input kind: {preds.kind} ({preds.kind_reason})")
    result = pipeline.apply_calibrator(calibrator, preds, what)
    if out == "-":
        sys.stdout.buffer.write(npy_bytes(result))
        sys.stdout.buffer.flush()
        return
    write_matrix(out, result, what, labels=preds.labels, passthrough=preds.passthrough)
    render.note(f"wrote {what} for {preds.n} rows to {out}")
