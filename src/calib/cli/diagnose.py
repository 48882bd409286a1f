"""`calib diagnose PRED [--bundle B] [--out REPORT_DIR] [--compare METHODS]`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import operations
from . import options, render


def diagnose(
    pred: options.Pred,
    labels: options.Labels = None,
    label_column: options.LabelColumn = None,
    bundle: Annotated[
        Optional[str], typer.Option("--bundle", "-b", help="Diagnose the probabilities after this bundle.", show_default=False)
    ] = None,
    out: Annotated[
        Optional[str],
        typer.Option("--out", "-o", help="Write report.json, PNG/SVG figures and report.html here.", show_default=False),
    ] = None,
    compare: Annotated[
        Optional[str],
        typer.Option(
            "--compare", help="Comma-separated methods to compare by cross-validation, e.g. ts,mr,isotonic.", show_default=False
        ),
    ] = None,
    folds: Annotated[int, typer.Option("--folds", min=2, help="Folds of the comparison.")] = 5,
    rank_by: Annotated[str, typer.Option("--rank-by", help="Metric that ranks the compared methods.")] = "cmce",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the comparison's folds and methods.")] = 0,
    input_kind: options.InputKind = "auto",
    renormalise: options.Renormalise = False,
    score_prefix: options.ScorePrefix = None,
    input_format: options.InputFormat = None,
    confidence_column: options.ConfidenceColumn = None,
    missing_confidence: options.MissingConfidence = None,
    scores: options.Scores = None,
    task: options.Task = "auto",
    group_by: options.GroupBy = None,
    groups_file: options.GroupsFile = None,
    min_group_rows: options.MinGroupRows = 100,
    bootstrap: Annotated[
        int, typer.Option("--bootstrap", min=0, help="Add 95% intervals from N bootstrap replicates to the metric table.")
    ] = 0,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing non-empty report directory.")] = False,
    no_vece: Annotated[
        bool, typer.Option("--no-vece", help="Skip the V-ECE family (its boosted fits) in the metric table.")
    ] = False,
) -> None:
    """Check the inputs, show where the probabilities are miscalibrated, and compare calibrators.

    Example: calib diagnose val.npz --compare ts,cmce-ts,mr,isotonic --out report/
    """
    request = operations.EvaluationRequest.of(
        vece=not no_vece, seed=seed, bootstrap=bootstrap or 0, min_group_rows=min_group_rows
    )
    plan = operations.plan_diagnosis(
        options.source(locals()),
        request,
        compare=[m.strip() for m in compare.split(",") if m.strip()] if compare else [],
        folds=folds,
        seed=seed,
        rank_by=rank_by,
        out=out,
        force=force,
    )
    with render.progress("V-ECE", plan.fits, "boosted fits", "; --no-vece skips V-ECE") as advance:
        result = plan.run(advance)
    render.diagnosis(result)
    if out is not None:
        from ..reporting.plots import write_report

        written = write_report(result, out, force=force)
        render.note(f"wrote {', '.join(written)} to {out}")
