"""`calib apply BUNDLE_DIR PRED --out OUT`."""

from __future__ import annotations

import sys
from typing import Annotated

import numpy as np
import typer

from .. import pipeline
from ..calibrators.base import absent_class_rows
from ..errors import UsageError
from ..io import check_output_path, read_features, write_matrix, write_npy_stream, write_sets
from ..io.formats import listed
from ..io.writers import WRITERS
from . import options, render

WHAT = ("probs", "log-probs", "sets")


def apply(
    bundle: Annotated[str, typer.Argument(metavar="BUNDLE", help="Bundle directory written by `calib fit`.", show_default=False)],
    pred: options.Pred,
    out: Annotated[
        str,
        typer.Option(
            "--out", "-o", help=f"Output file ({listed(WRITERS.values())}); - writes .npy to stdout.", show_default=False
        ),
    ],
    what: Annotated[str, typer.Option("--what", help="probs | log-probs | sets (conformal methods: the sets C(x)).")] = "probs",
    labels: options.Labels = None,
    label_column: options.LabelColumn = None,
    features: options.Features = None,
    input_kind: options.InputKind = "auto",
    renormalise: options.Renormalise = False,
    score_prefix: options.ScorePrefix = None,
    scores: options.Scores = None,
) -> None:
    """Apply a fitted bundle to PRED and write calibrated probabilities.

    Example: calib apply ts_bundle test.npz --out calibrated.npz
    Sets of a conformal bundle: calib apply ats_bundle test.parquet --what sets --out sets.parquet
    """
    if what not in WHAT:
        raise UsageError(f"--what must be one of {', '.join(WHAT)}; got {what!r}")
    if out == "-" and sys.stdout.isatty():
        raise UsageError(
            "--out - writes binary .npy to stdout, which is a terminal here; redirect it (> out.npy, | next-command)"
        )
    if out != "-":
        check_output_path(out, [pred, labels or "-", features or "-"])
    preds, calibrator = options.read_inputs(
        pred, bundle, labels, label_column, input_kind, score_prefix, require_labels=False, renormalise=renormalise, scores=scores
    )
    render.note(f"input kind: {preds.kind} ({preds.kind_reason})")
    feature_rows = read_features(features, preds.n)
    if out == "-" or out.lower().endswith(".npy"):  # streamed: one chunk of rows in memory at a time
        counts: dict = {}

        def blocks():
            for _, block, info in pipeline.calibrated_blocks(calibrator, preds, what, feature_rows):
                pipeline.add_counts(counts, info)
                yield block

        dtype = bool if what == "sets" else np.float64
        write_npy_stream(sys.stdout.buffer if out == "-" else out, (preds.n, preds.k), dtype, blocks())
    else:
        result, counts = pipeline.apply_calibrator(calibrator, preds, what, feature_rows)
        if what == "sets":
            write_sets(out, result, labels=preds.labels, passthrough=preds.passthrough)
        else:
            write_matrix(out, result, what, labels=preds.labels, passthrough=preds.passthrough)
    flagged = ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in counts.items() if count)
    if flagged:
        render.note(f"infeasible rows left as the rule says: {flagged}")
    absent_rows = absent_class_rows(calibrator, preds)
    if absent_rows is not None:
        render.note(f"warning: {absent_rows}")
    if out != "-":
        render.note(f"wrote {what} for {preds.n} rows to {out}")
