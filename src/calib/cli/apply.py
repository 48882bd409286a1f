"""`calib apply BUNDLE_DIR PRED --out OUT`."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from .. import api
from ..api import (
    WRITERS,
    UsageError,
    absent_class_rows,
    check_output_file,
    check_output_path,
    listed,
    read_features,
    shard_formats,
)
from . import options, render

WHAT = ("probs", "log-probs", "sets")


def apply(
    bundle: Annotated[str, typer.Argument(metavar="BUNDLE", help="Bundle directory written by `calib fit`.", show_default=False)],
    pred: options.Pred,
    out: Annotated[
        str,
        typer.Option(
            "--out",
            "-o",
            help=f"Output file ({listed(WRITERS.values())}); - writes .npy to stdout; for a directory PRED, the output directory.",
            show_default=False,
        ),
    ],
    what: Annotated[str, typer.Option("--what", help="probs | log-probs | sets (conformal methods: the sets C(x)).")] = "probs",
    labels: options.Labels = None,
    label_column: options.LabelColumn = None,
    features: options.Features = None,
    input_kind: options.InputKind = "auto",
    renormalise: options.Renormalise = False,
    score_prefix: options.ScorePrefix = None,
    input_format: options.InputFormat = None,
    confidence_column: options.ConfidenceColumn = None,
    missing_confidence: options.MissingConfidence = None,
    scores: options.Scores = None,
    task: options.Task = "auto",
    engine: options.Engine = "local",
    scheduler: options.Scheduler = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Replace an existing output file; for a directory PRED, redo the shards already written "
            "(those written with another bundle are replaced only with it).",
        ),
    ] = False,
) -> None:
    """Apply a fitted bundle to PRED and write calibrated probabilities.

    Example: calib apply ts_bundle test.npz --out calibrated.npz
    Sets of a conformal bundle: calib apply ats_bundle test.parquet --what sets --out sets.parquet
    A directory of shards, one task per file: calib apply ts_bundle shards/ --out out_shards/ --engine dask
    """
    if what not in WHAT:
        raise UsageError(f"--what must be one of {', '.join(WHAT)}; got {what!r}")
    reading = options.reading(locals(), require_labels=False)
    if os.path.isdir(pred) and not api.is_log_folder(pred):  # a folder of evaluation logs is one input
        if input_format is not None or confidence_column is not None:
            raise UsageError("--input-format and --confidence-column take one file; shards are told by their suffixes")
        if labels is not None or features is not None:
            raise UsageError("--labels and --features take one file; a directory of shards carries its labels in each shard")
        _apply_directory(bundle, pred, out, what, reading, engine, scheduler, force)
        return
    if engine != "local" or scheduler is not None:
        raise UsageError(f"--engine and --scheduler take a directory of {listed(shard_formats())} files as PRED")
    if out == "-" and sys.stdout.isatty():
        raise UsageError(
            "--out - writes binary .npy to stdout, which is a terminal here; redirect it (> out.npy, | next-command)"
        )
    if out != "-":
        check_output_path(out, [pred, labels or "-", features or "-"])
        check_output_file(out, force=force)
    preds, calibrator = api.read_with_bundle(pred, bundle, reading)
    render.note(f"input kind: {preds.kind} ({preds.kind_reason})")
    feature_rows = read_features(features, preds)
    counts = api.write_applied(calibrator, preds, sys.stdout.buffer if out == "-" else out, what, feature_rows)
    _note_infeasible(counts)
    absent_rows = absent_class_rows(calibrator, preds)
    if absent_rows is not None:
        render.note(f"warning: {absent_rows}")
    if out != "-":
        render.note(f"wrote {what} for {preds.output_layout.describe()} to {out}")


def _apply_directory(bundle: str, pred: str, out: str, what: str, reading, engine: str, scheduler, force: bool):
    """``calib apply BUNDLE shards/ --out out_shards/``: one output per shard (calib.shards)."""
    from ..api import apply_shards

    if out == "-" or (os.path.exists(out) and not os.path.isdir(out)):
        raise UsageError(f"--out {out}: a directory PRED writes a directory of outputs; name a directory")
    done = apply_shards(bundle, pred, out, what=what, reading=reading, engine=engine, scheduler=scheduler, force=force)
    _note_infeasible(done.counts)
    skipped = f"{len(done.skipped)} shards already written with this bundle, skipped (--force redoes them)"
    if not done.written:
        render.note(f"nothing to write to {out}: {skipped}")
        return
    more = f"; {skipped}" if done.skipped else ""
    render.note(f"wrote {what} for {done.rows} rows of {len(done.written)} shards to {out} ({engine}){more}")


def _note_infeasible(counts: dict) -> None:
    """One note counting the rows a conformal method left as its infeasible-row rule says."""
    flagged = ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in counts.items() if count)
    if flagged:
        render.note(f"infeasible rows left as the rule says: {flagged}")
