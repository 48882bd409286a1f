"""`calib evaluate PRED [--bundle B] [--json PATH|-] [--fail-if EXPR]...`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import operations
from ..operations import UsageError, choices_text
from ..reporting.text import comparison_note, gate_text, noise_notes
from . import estimate, options, render

# The metric stack (calib.evaluate, calib.metrics, calib.estimators, calib.bootstrap) is imported in
# the commands that use it, not with the CLI: every other command starts without it.


def evaluate(
    pred: options.Pred,
    labels: options.Labels = None,
    label_column: options.LabelColumn = None,
    bundle: Annotated[
        Optional[str],
        typer.Option("--bundle", "-b", help="Apply this bundle first; the table shows before and after.", show_default=False),
    ] = None,
    reference: Annotated[
        Optional[str],
        typer.Option(
            "--reference",
            help="Labelled predictions of the same model to fit the calibration map on (instead of --bundle) when PRED's rows "
            "lack labels: their accuracy, log loss and Brier score are then estimated.",
            show_default=False,
        ),
    ] = None,
    reference_method: Annotated[
        str, typer.Option("--reference-method", help="The calibration method fitted on --reference's rows.")
    ] = "ts",
    missing_label: Annotated[
        Optional[int],
        typer.Option(
            "--missing-label",
            help="Rows whose label is this value (e.g. -1) have none, as rows with a null label do once --bundle or "
            "--reference is given: they are estimated, the others evaluated.",
            show_default=False,
        ),
    ] = None,
    estimator: Annotated[
        str,
        typer.Option(
            "--estimator",
            help="How estimates without labels read the map's error on its own rows: debiased (added back) | cbpe (counted "
            "as noise, NannyML's estimate).",
        ),
    ] = "debiased",
    html: Annotated[
        Optional[str],
        typer.Option("--html", help="Also write the estimates without labels as a self-contained HTML page.", show_default=False),
    ] = None,
    metrics: Annotated[
        Optional[str],
        typer.Option("--metrics", help="Comma-separated metric keys (`calib methods` lists them).", show_default=False),
    ] = None,
    bins: Annotated[
        str, typer.Option("--bins", help="Equal-width bins of the ECE family: a count, or auto (ceil((2n)^(1/3)) for n rows).")
    ] = "15",
    cmce_bins: Annotated[str, typer.Option("--cmce-bins", help="Equal-width bins of CMCE: a count, or auto.")] = "25",
    json_path: Annotated[
        Optional[str],
        typer.Option("--json", help="Write the JSON report to PATH; - prints it instead of the table.", show_default=False),
    ] = None,
    fail_if: Annotated[
        Optional[list[str]],
        typer.Option("--fail-if", help="Gate, e.g. 'cmce>0.01': exit 1 when it holds (repeatable).", show_default=False),
    ] = None,
    baseline: Annotated[
        Optional[str], typer.Option("--baseline", help="An earlier JSON report to compare against.", show_default=False)
    ] = None,
    max_increase: Annotated[
        Optional[list[str]],
        typer.Option(
            "--max-increase",
            help="Gate against --baseline: fail when METRIC rose by more than an amount (cmce=0.001) or a share of the baseline (cmce=10%); repeatable.",
            show_default=False,
        ),
    ] = None,
    max_decrease: Annotated[
        Optional[list[str]],
        typer.Option(
            "--max-decrease",
            help="The same for metrics where higher is better: fail when accuracy fell by more than 0.01 (accuracy=0.01) or 1% (accuracy=1%); repeatable.",
            show_default=False,
        ),
    ] = None,
    ignore_noise: Annotated[
        bool,
        typer.Option(
            "--ignore-noise",
            help="Gates compare the values themselves (pass or fail), not their bootstrap intervals (pass, fail or inconclusive).",
        ),
    ] = False,
    inconclusive: Annotated[
        str,
        typer.Option(
            "--inconclusive",
            help="What a gate whose bootstrap interval straddles its threshold counts as: pass (exit 0) | fail (exit 1).",
        ),
    ] = "pass",
    junit: Annotated[
        Optional[str],
        typer.Option(
            "--junit", help="Also write the gates as JUnit XML (one test case per gate and gated group).", show_default=False
        ),
    ] = None,
    true_probs: Annotated[
        Optional[str],
        typer.Option(
            "--true-probs",
            help="True probabilities (synthetic data): .npy, or the true_probs array/column of a .npz/.parquet; adds nll_true, brier_true and CPSME.",
            show_default=False,
        ),
    ] = None,
    no_vece: Annotated[
        bool, typer.Option("--no-vece", help="Skip V-ECE (it refits a recalibrator 5 times: seconds to minutes).")
    ] = False,
    vece_recalibrator: Annotated[
        str, typer.Option("--vece-recalibrator", help=f"V-ECE recalibration map: {choices_text('recalibrators')}.")
    ] = "ws-catboost",
    vece_recipe: Annotated[
        str,
        typer.Option(
            "--vece-recipe",
            help=f"WS-CatBoost recipe: {choices_text('recipes')}.",
        ),
    ] = "compact-es10",
    vece_max_rows: Annotated[
        int, typer.Option("--vece-max-rows", min=10, help="V-ECE uses a seeded subsample above this many rows.")
    ] = 20000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of V-ECE's folds and subsample, and of --bootstrap.")] = 0,
    bootstrap: Annotated[
        Optional[int],
        typer.Option(
            "--bootstrap",
            min=0,
            help="Add percentile confidence intervals from N bootstrap replicates of the rows (V-ECE excluded); 0: none. Default: with gates or --json, the baseline's count or 200 (inputs of up to 2,000 classes), else none.",
            show_default=False,
        ),
    ] = None,
    confidence: Annotated[
        float,
        typer.Option(
            "--confidence", min=0.5, max=0.999, help="Level of the --bootstrap intervals and of the intervals the gates read."
        ),
    ] = 0.95,
    engine: options.Engine = "local",
    scheduler: options.Scheduler = None,
    task: options.Task = "auto",
    paired: Annotated[
        bool,
        typer.Option(
            "--paired",
            help="Require change gates to pair with the baseline's bootstrap replicates (same rows, count and seed); without it they pair when they can and say so when they cannot.",
        ),
    ] = False,
    emit_state: Annotated[
        Optional[str],
        typer.Option(
            "--emit-state", help="Also write the additive metric state (.npz) for `calib merge-states`.", show_default=False
        ),
    ] = None,
    first_row: Annotated[
        int,
        typer.Option(
            "--first-row",
            min=0,
            help="The global index of PRED's first row among all rows (a shard's place): bootstrap replicates are keyed by it, so shards evaluated with their first rows merge (merge-states) into the intervals of one evaluation of all rows.",
        ),
    ] = 0,
    features: options.Features = None,
    input_kind: options.InputKind = "auto",
    renormalise: options.Renormalise = False,
    score_prefix: options.ScorePrefix = None,
    input_format: options.InputFormat = None,
    confidence_column: options.ConfidenceColumn = None,
    missing_confidence: options.MissingConfidence = None,
    scores: options.Scores = None,
    group_by: options.GroupBy = None,
    groups_file: options.GroupsFile = None,
    min_group_rows: options.MinGroupRows = 100,
    table_format: options.TableFormat = "auto",
) -> None:
    """Evaluate PRED (after applying --bundle if given): metric table or JSON report, and CI gates.

    Rows without labels (none in PRED, a null, or --missing-label) are estimated under the
    calibration map of --bundle or --reference: accuracy, log loss and Brier score with intervals.

    Exit code 1 when a gate fails (the report is still written). Example:
    calib evaluate test.npz --bundle ts_bundle --fail-if "cmce>0.01"
    """
    render.resolve_format(table_format)
    if html is not None and bundle is None and reference is None:
        raise UsageError("--html is for estimates without labels, which need a calibration map: give --bundle or --reference")
    source = options.source(locals())
    source.check_outputs([json_path, junit, html], [baseline, reference])
    if source.is_directory:
        _refuse_single_input_flags(locals())
    plan = operations.plan_evaluation(
        source,
        _request(locals()),
        gates=fail_if or (),
        vece_off=no_vece,
        reference=reference,
        reference_method=reference_method,
        estimator=estimator,
        missing_label=missing_label,
    )
    for note in plan.notes:
        render.note(note)
    if plan.subsampled:
        render.note(f"V-ECE and KDE-ECE on a seeded subsample of {vece_max_rows} of {plan.rows.preds.n} rows (--vece-max-rows)")
    with render.progress("V-ECE", plan.fits, "boosted fits", "; --no-vece skips V-ECE" if metrics is None else "") as advance:
        done = plan.run(advance)
    if done.estimated:
        estimate.show(done.report, locals(), done.labelled)
        return
    report = done.report
    if bootstrap is None and report.bootstrap is not None and plan.mode == "evaluate":
        replicates = report.bootstrap
        if plan.request.gates.any:
            why = "for the gates"
        elif json_path is not None:
            why = "for the JSON report, which later change gates pair with"
        else:
            why = "for the metric state file, whose merged states get intervals"
        render.note(
            f"note: {replicates.level:g} intervals from {replicates.replicates} bootstrap replicates, drawn {why} "
            "(--bootstrap 0 for none); every interval is the replicates' percentile interval centred on the value"
        )
    _emit(report, json_path, done.shown, table_format, junit)


#: The flags of one input file that a directory of shards does not take, and their parameters.
SINGLE_INPUT_FLAGS = {
    "--groups": "groups_file",
    "--renormalise": "renormalise",
    "--true-probs": "true_probs",
    "--labels": "labels",
    "--features": "features",
    "--emit-state": "emit_state",
    "--first-row": "first_row",
    "--input-format": "input_format",
    "--confidence-column": "confidence_column",
    "--missing-confidence": "missing_confidence",
    "--reference": "reference",
    "--missing-label": "missing_label",
    "--html": "html",
}


def _refuse_single_input_flags(flags: dict) -> None:
    """The flags that do not apply to a directory of shards, refused in one line."""
    named = [flag for flag, name in SINGLE_INPUT_FLAGS.items() if flags[name]]
    if named:
        raise UsageError(f"{named[0]} does not apply to a directory of shards")


def _request(flags: dict):
    """The evaluation request the flags ask for (calib.evaluation.request.EvaluationRequest), its
    gates aside (the evaluation places each: on the metrics or on the estimates); the flags' own
    contradictions refused first, each naming the flags."""
    keys = [k.strip() for k in flags["metrics"].split(",") if k.strip()] if flags["metrics"] else None
    if flags["paired"] and flags["ignore_noise"]:
        raise UsageError("--paired asks for the bootstrap's intervals and --ignore-noise for the raw values; drop one of the two")
    return operations.EvaluationRequest.of(
        metrics=keys,
        bins=flags["bins"],
        cmce_bins=flags["cmce_bins"],
        vece=not flags["no_vece"],
        vece_recalibrator=flags["vece_recalibrator"],
        vece_recipe=flags["vece_recipe"],
        vece_max_rows=flags["vece_max_rows"],
        seed=flags["seed"],
        max_increase=flags["max_increase"] or (),
        max_decrease=flags["max_decrease"] or (),
        baseline=flags["baseline"],
        paired=flags["paired"],
        ignore_noise=flags["ignore_noise"],
        inconclusive=flags["inconclusive"],
        bootstrap="auto" if flags["bootstrap"] is None else flags["bootstrap"],
        level=flags["confidence"],
        keep_as_baseline=flags["json_path"] is not None,  # a JSON report may serve as a later baseline
        min_group_rows=flags["min_group_rows"],
        emit_state=flags["emit_state"],
        first_row=flags["first_row"],
    )


def _emit(
    report,
    json_path: str | None,
    shown,
    table_format: str,
    junit: str | None = None,
    remedy: str = "--bootstrap 200 draws them",
) -> None:
    """The JSON report of ``report`` (calib.evaluation.EvaluationReport) to --json (or stdout for -,
    instead of the table), the table of ``shown`` (the same report, its input named as the table
    names it) otherwise, the CI outputs (--junit, GitHub's summary and step outputs), notes on
    gates that ignore noise or compare other input, and exit 1 when a gate failed."""
    from .ci_output import write_ci_outputs

    if json_path is not None:
        render.write_json(report.to_json(), json_path)
    if json_path != "-":
        render.report_table(shown, table_format)
    for warning in report.warnings or []:
        render.note(f"warning: {warning}")
    for note in dict.fromkeys(comparison_note(g.fields) for g in report.gates if "baseline_input" in g.fields):
        render.note(f"note: {note}")
    for note in noise_notes(report, remedy):
        render.note(note)
    write_ci_outputs(report, junit)
    failed = [g for g in report.gates if not g.passed]
    if failed:
        render.error("gate failed: " + "; ".join(gate_text(g.fields) for g in failed))
        raise typer.Exit(1)


def merge_states(
    states: Annotated[
        list[str],
        typer.Argument(metavar="STATES...", help="State files written by `calib evaluate --emit-state`.", show_default=False),
    ],
    json_path: Annotated[
        Optional[str],
        typer.Option("--json", help="Write the JSON report to PATH; - prints it instead of the table.", show_default=False),
    ] = None,
    min_group_rows: options.MinGroupRows = 100,
    table_format: options.TableFormat = "auto",
) -> None:
    """Merge metric states of several evaluations (shards of one dataset) into one report; estimation
    states (`calib evaluate` without labels) into one estimation.

    The numbers equal one evaluation over all the rows (V-ECE, which is not additive, is left out).
    Example: calib merge-states part1.npz part2.npz --json -
    """
    done = operations.merge_states(states, min_group_rows)
    if done.estimated:
        estimate.show(done.report, {"json_path": json_path, "table_format": table_format, "html": None})
        return
    _emit(done.report, json_path, done.shown, table_format)
