"""`calib apply BUNDLE_DIR PRED --out OUT`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .. import operations
from ..operations import UsageError, choices_text
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
            help=f"Output file ({choices_text('outputs')}); - writes .npy to stdout; for a directory PRED, the output directory.",
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
    source = options.source(locals())
    if source.is_directory:
        if input_format is not None or confidence_column is not None:
            raise UsageError("--input-format and --confidence-column take one file; shards are told by their suffixes")
        if labels is not None or features is not None:
            raise UsageError("--labels and --features take one file; a directory of shards carries its labels in each shard")
        done = operations.apply_source(source, out, what=what, force=force)
        _note_infeasible(done.counts)
        skipped = f"{len(done.skipped)} shards already written with this bundle, skipped (--force redoes them)"
        if not done.written:
            render.note(f"nothing to write to {out}: {skipped}")
            return
        more = f"; {skipped}" if done.skipped else ""
        render.note(f"wrote {what} for {done.rows} of {len(done.written)} shards to {out} ({engine}){more}")
        return
    if out == "-" and sys.stdout.isatty():
        raise UsageError(
            "--out - writes binary .npy to stdout, which is a terminal here; redirect it (> out.npy, | next-command)"
        )
    done = operations.apply_source(source, sys.stdout.buffer if out == "-" else out, what=what, force=force)
    render.note(f"input kind: {done.kind_line}")
    _note_infeasible(done.counts)
    for warning in done.warnings:
        render.note(f"warning: {warning}")
    if out != "-":
        render.note(f"wrote {what} for {done.rows} to {out}")


def _note_infeasible(counts: dict) -> None:
    """One note counting the rows a conformal method left as its infeasible-row rule says."""
    flagged = ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in counts.items() if count)
    if flagged:
        render.note(f"infeasible rows left as the rule says: {flagged}")
