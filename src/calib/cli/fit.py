"""`calib fit PRED --method NAME --out BUNDLE_DIR`."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from .. import operations
from ..operations import UsageError, choices_text
from . import options, render

#: Method options with a flag of their own; every other option is set with -O NAME=VALUE.
FLAG_OPTIONS = ("alpha", "score", "threshold", "variant", "flow", "aggregate", "model")


def fit(
    pred: options.Pred,
    method: Annotated[str, typer.Option("--method", "-m", help="Calibrator; `calib methods` lists them.", show_default=False)],
    out: Annotated[str, typer.Option("--out", "-o", help="Bundle directory to write.", show_default=False)],
    labels: options.Labels = None,
    label_column: options.LabelColumn = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for every random choice of the method.")] = 0,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing non-empty bundle directory.")] = False,
    alpha: Annotated[
        Optional[float], typer.Option("--alpha", help="Miscoverage level of conformal methods.", show_default=False)
    ] = None,
    score: Annotated[
        Optional[str],
        typer.Option("--score", help=f"Nonconformity score of conformal methods: {choices_text('score')}.", show_default=False),
    ] = None,
    threshold: Annotated[
        Optional[str],
        typer.Option("--threshold", help=f"Conformal threshold: {choices_text('threshold')}.", show_default=False),
    ] = None,
    variant: Annotated[
        Optional[str], typer.Option("--variant", help=f"ATS-CP variant: {choices_text('variant')}.", show_default=False)
    ] = None,
    flow: Annotated[
        Optional[str], typer.Option("--flow", help=f"Flow of the adaptive threshold: {choices_text('flow')}.", show_default=False)
    ] = None,
    aggregate: Annotated[
        Optional[str],
        typer.Option(
            "--aggregate",
            help=f"Alpha-agnostic ATS-CP: how the levels' distributions combine: {choices_text('aggregate')}.",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        Optional[str],
        typer.Option("--model", help=f"ats-maq's conditional quantiles: {choices_text('model')}.", show_default=False),
    ] = None,
    option: Annotated[
        Optional[list[str]],
        typer.Option("--option", "-O", help="Any method option as KEY=VALUE (repeatable).", show_default=False),
    ] = None,
    features: options.Features = None,
    train: Annotated[
        Optional[str],
        typer.Option(
            "--train",
            help="Labelled rows apart from PRED (same format, classes and kind) on which ats-aq, ats-maq and the adaptive threshold fit their model; PRED's rows then all conformalise it (default: seeded halves of PRED).",
            show_default=False,
        ),
    ] = None,
    train_features: Annotated[
        Optional[str],
        typer.Option("--train-features", help="The --train rows' features, when --features is given.", show_default=False),
    ] = None,
    input_kind: options.InputKind = "auto",
    renormalise: options.Renormalise = False,
    score_prefix: options.ScorePrefix = None,
    input_format: options.InputFormat = None,
    confidence_column: options.ConfidenceColumn = None,
    missing_confidence: options.MissingConfidence = None,
    scores: options.Scores = None,
    task: options.Task = "auto",
    per_label: Annotated[
        bool, typer.Option("--per-label", help="Multi-label input: one calibrator per label (default: one shared by all labels).")
    ] = False,
    joint: Annotated[
        bool,
        typer.Option(
            "--joint",
            help="Multi-label input, conformal method: sets covering every label of a row at once "
            "(--per-label: each label's own coverage).",
        ),
    ] = False,
    json_path: options.FitSummaryJson = None,
    device: Annotated[
        str,
        typer.Option(
            "--device",
            help="Where the torch-trained methods train: auto (a GPU where torch sees one, else the CPU) | cpu | cuda | cuda:N. "
            "The bundle applies on any machine.",
        ),
    ] = "auto",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display while the method fits.")] = False,
) -> None:
    """Fit a calibrator on PRED and its labels and save it as a bundle directory; print a summary
    (method, fitted parameters, rows flagged, time).

    Example: calib fit val.npz --method ts --out ts_bundle
    Conformal: calib fit val.npz --method ats-gq --alpha 0.1 --score aps --out ats_bundle
    """
    flags = dict(zip(FLAG_OPTIONS, (alpha, score, threshold, variant, flow, aggregate, model)))
    given = {name: value for name, value in flags.items() if value is not None}
    for item in option or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--option {item!r}: expected KEY=VALUE")
        given[key.strip()] = value.strip()
    if train is None and train_features is not None:
        raise UsageError("--train-features needs --train")
    source = options.source(locals())
    source.check_outputs([json_path], [train, train_features])
    train_source = None if train is None else operations.Source(train, features=train_features)
    start = time.perf_counter()
    with render.activity(f"fitting {method}", quiet) as report:
        done = operations.fit_source(
            source,
            method,
            out,
            options=given,
            seed=seed,
            train=train_source,
            per_label=per_label,
            joint=joint,
            device=device,
            force=force,
            progress=report,
        )
    render.note(f"input kind: {done.input.kind_line}")
    summary = done.summary
    seconds = time.perf_counter() - start
    if json_path is not None:
        render.write_json(summary, json_path)
    if json_path != "-":
        report = {key: value for key, value in summary["fit_report"].items() if not key.startswith("warning")}
        rows = {**done.shape, **report, **({"trained on": summary["device"]} if "device" in summary else {})}
        render.key_values(f"calib fit: {method}", {**rows, "time": f"{seconds:.2f} s", "bundle": out})
    for warning in summary["warnings"]:
        render.note(f"warning: {warning}")
