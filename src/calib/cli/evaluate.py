"""`calib evaluate PRED [--bundle B] [--json PATH|-] [--fail-if EXPR]...`."""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace
from typing import Annotated, Optional

import typer

from .. import api
from ..errors import UsageError
from ..estimators.recalibrators import DEFAULT_RECIPE, RECALIBRATORS, RECIPES
from ..io import check_not_an_input, read_features, read_true_probs
from ..io.atomic import write_bytes_atomic
from ..io.formats import listed, shard_formats
from ..report_text import comparison_note, gate_text
from . import options, render

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
        str, typer.Option("--vece-recalibrator", help=f"V-ECE recalibration map: {' | '.join(RECALIBRATORS)}.")
    ] = "ws-catboost",
    vece_recipe: Annotated[
        str,
        typer.Option(
            "--vece-recipe",
            help="WS-CatBoost recipe: " + " | ".join(f"{name} ({recipe.describe()})" for name, recipe in RECIPES.items()) + ".",
        ),
    ] = DEFAULT_RECIPE,
    vece_max_rows: Annotated[
        int, typer.Option("--vece-max-rows", min=10, help="V-ECE uses a seeded subsample above this many rows.")
    ] = 20000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of V-ECE's folds and subsample, and of --bootstrap.")] = 0,
    bootstrap: Annotated[
        Optional[int],
        typer.Option(
            "--bootstrap",
            min=0,
            help="Add percentile confidence intervals from N bootstrap replicates of the rows (V-ECE excluded); 0: none. Default: with gates or --json, the baseline's count or 200 (inputs up to 10^7 scores), else none.",
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
    features: options.Features = None,
    input_kind: options.InputKind = "auto",
    renormalise: options.Renormalise = False,
    score_prefix: options.ScorePrefix = None,
    scores: options.Scores = None,
    group_by: options.GroupBy = None,
    groups_file: options.GroupsFile = None,
    min_group_rows: options.MinGroupRows = 100,
    table_format: options.TableFormat = "auto",
) -> None:
    """Evaluate PRED (after applying --bundle if given): metric table or JSON report, and CI gates.

    Exit code 1 when a gate fails (the report is still written). Example:
    calib evaluate test.npz --bundle ts_bundle --fail-if "cmce>0.01"
    """
    given = SimpleNamespace(**locals())  # the command's options, read by the steps below
    render.resolve_format(table_format)
    _check_choices(given)
    gates, increase_gates, keys = _gates_and_keys(given)
    for path in (json_path, junit):
        if path not in (None, "-"):
            check_not_an_input(path, [pred, labels, true_probs, features, baseline])
    if os.path.isdir(pred):
        _evaluate_directory(given, keys, gates, increase_gates)
    else:
        _evaluate_file(given, keys, gates, increase_gates)


def _check_choices(given) -> None:
    """Options with a fixed set of values, and options that contradict each other."""
    from ..evaluation.gates import INCONCLUSIVE_POLICIES
    from ..metrics.definitions import AUTO_BINS, bin_count

    for name in ("bins", "cmce_bins"):  # before any input is read: one line
        if getattr(given, name) != AUTO_BINS:
            bin_count(getattr(given, name), 1, name)

    if given.vece_recalibrator not in RECALIBRATORS:
        raise UsageError(f"--vece-recalibrator must be one of {', '.join(RECALIBRATORS)}; got {given.vece_recalibrator!r}")
    if given.vece_recipe not in RECIPES:
        raise UsageError(f"--vece-recipe must be one of {', '.join(RECIPES)}; got {given.vece_recipe!r}")
    if given.inconclusive not in INCONCLUSIVE_POLICIES:
        raise UsageError(f"--inconclusive must be one of {', '.join(INCONCLUSIVE_POLICIES)}; got {given.inconclusive!r}")
    if given.paired and given.ignore_noise:
        raise UsageError("--paired asks for the bootstrap's intervals and --ignore-noise for the raw values; drop one of the two")


def _gates_and_keys(given):
    """(threshold gates, change gates, metric keys asked for or None)."""
    from ..evaluation import parse_change_gates, parse_gate
    from ..metrics import VECE_METRICS, check_metric_keys

    gates = [parse_gate(expr) for expr in given.fail_if or []]
    increase_gates = parse_change_gates(given.max_increase or [], given.baseline, given.paired, given.max_decrease or [])
    keys = check_metric_keys([k.strip() for k in given.metrics.split(",") if k.strip()]) if given.metrics else None
    if given.no_vece:  # a V-ECE key asked for by name contradicts --no-vece
        asked = [*(keys or []), *(g.metric for g in (*gates, *increase_gates))]
        contradicting = next((key for key in asked if key in VECE_METRICS), None)
        if contradicting is not None:
            raise UsageError(f"{contradicting} is a V-ECE value, which --no-vece skips; drop one of the two")
    return gates, increase_gates, keys


def _evaluate_file(given, keys, gates, increase_gates) -> None:
    """``calib evaluate FILE``: read and validate once, stream the metrics, V-ECE on a sample, gates."""
    from ..bootstrap import resolve_config
    from ..evaluation.groups import read_groups
    from ..metrics import METRICS, VECE_METRICS
    from ..metrics.sample import SampleConfig, boosted_fit_count

    if given.engine != "local" or given.scheduler is not None:
        raise UsageError(f"--engine dask and --scheduler take a directory of {listed(shard_formats())} files as PRED")
    preds, calibrator = options.read_inputs(
        given.pred,
        given.bundle,
        given.labels,
        given.label_column,
        given.input_kind,
        given.score_prefix,
        require_labels=True,
        renormalise=given.renormalise,
        scores=given.scores,
        task=given.task,
    )
    if given.json_path is not None or given.emit_state is not None:  # the only outputs that hold the sha256
        preds.hash_in_background()  # on the other core while the metrics stream
    else:
        preds.skip_digest()
    groups = read_groups(preds, given.pred, given.group_by, given.groups_file, given.label_column)
    if given.true_probs is not None:
        preds.true_probs = read_true_probs(given.true_probs, preds)
    render.note(f"input kind: {preds.kind} ({preds.kind_reason})")
    replicates = resolve_config(
        "auto" if given.bootstrap is None else given.bootstrap,
        preds.n,
        preds.k,
        seed=given.seed,
        level=given.confidence,
        gated=bool(gates or increase_gates),
        baseline=increase_gates[0].baseline_bootstrap if increase_gates else None,
        recorded=given.json_path is not None,  # a JSON report may serve as a later baseline
    )
    default_vece = [] if given.no_vece or preds.multilabel is not None else VECE_METRICS  # not in a multi-label table
    wanted = [*(keys or default_vece), *(g.metric for g in (*gates, *increase_gates))]
    if any(not METRICS[key].streamed for key in wanted) and preds.n > given.vece_max_rows:
        render.note(f"V-ECE and KDE-ECE on a seeded subsample of {given.vece_max_rows} of {preds.n} rows (--vece-max-rows)")
    # one V-ECE pass per side: the model's own probabilities and, with a bundle, the calibrated ones
    sample_config = SampleConfig(given.vece_recalibrator, given.seed, given.vece_max_rows, given.vece_recipe)
    fits = boosted_fit_count([METRICS[key] for key in wanted], sample_config) * (2 if given.bundle is not None else 1)
    with render.progress("V-ECE", fits, "boosted fits", "; --no-vece skips V-ECE" if keys is None else "") as advance:
        report = api.evaluate(
            preds,
            metrics=keys,
            calibrator=calibrator,
            vece=not given.no_vece,
            bins=given.bins,
            cmce_bins=given.cmce_bins,
            vece_recalibrator=given.vece_recalibrator,
            vece_recipe=given.vece_recipe,
            seed=given.seed,
            vece_max_rows=given.vece_max_rows,
            features=read_features(given.features, preds.n),
            gates=gates,
            increase_gates=increase_gates,
            bootstrap=replicates,
            bundle_path=given.bundle,
            emit_state=given.emit_state,
            progress=advance,
            groups=groups,
            min_group_rows=given.min_group_rows,
            ignore_noise=given.ignore_noise,
            inconclusive=given.inconclusive,
        ).to_dict()
    if given.bootstrap is None and replicates is not None:
        why = "for the gates" if gates or increase_gates else "for the JSON report, which later change gates pair with"
        render.note(
            f"note: {replicates.level:g} intervals from {replicates.replicates} bootstrap replicates, drawn {why} "
            "(--bootstrap 0 for none); every interval is the replicates' percentile interval centred on the value"
        )
    _emit(report, given.json_path, report, given.table_format, given.junit)


def _noise_notes(report: dict, remedy: str) -> list[str]:
    """One note per reason a gate read raw values (noise ignored), unless asked for; ``remedy``
    says how this command would draw replicates."""
    from ..metrics import METRICS

    notes = {}
    for gate in report["gates"]:
        reason = gate.get("noise_reason")
        if gate.get("noise") != "ignored" or reason in (None, "noise ignored on request") or "group" in gate:
            continue
        if not METRICS[gate["metric"]].streamed:
            notes.setdefault(
                "whole-sample " + gate["metric"],
                f"note: {gate['metric']} is never bootstrapped (each replicate would refit its recalibration map), so its "
                "gate compares the raw value: give the threshold a margin (docs/ci-gates.md has the measured false alarms)",
            )
        elif "allowed" in gate:
            notes.setdefault(
                reason,
                f"note: the change gates compare raw values and ignore noise: {reason}. A baseline written by "
                "`calib evaluate --json` on the same rows records bootstrap replicates (--bootstrap N chooses how many)",
            )
        else:
            notes.setdefault(
                "threshold " + reason,
                f"note: the threshold gates compare raw values and ignore noise: {reason} ({remedy})",
            )
    return list(notes.values())


def _emit(
    report: dict,
    json_path: str | None,
    shown: dict,
    table_format: str,
    junit: str | None = None,
    remedy: str = "--bootstrap 200 draws them",
) -> None:
    """The JSON report to --json (or stdout for -, instead of the table), the table of ``shown``
    otherwise, the CI outputs (--junit, GitHub's summary and step outputs), notes on gates that
    ignore noise or compare other input, and exit 1 when a gate failed."""
    from .ci_output import write_ci_outputs

    text = json.dumps(report, indent=2) + "\n"
    if json_path == "-":
        sys.stdout.write(text)
    else:
        if json_path is not None:
            write_bytes_atomic(json_path, text.encode())
        render.report_table(shown, table_format)
    for warning in report.get("warnings", []):
        render.note(f"warning: {warning}")
    for note in dict.fromkeys(comparison_note(g) for g in report["gates"] if "baseline_input" in g):
        render.note(f"note: {note}")
    for note in _noise_notes(report, remedy):
        render.note(note)
    write_ci_outputs(report, junit)
    failed = [g for g in report["gates"] if not g["passed"]]
    if failed:
        render.error("gate failed: " + "; ".join(gate_text(g) for g in failed))
        raise typer.Exit(1)


def _evaluate_directory(given, keys, gates, increase_gates) -> None:
    """``calib evaluate DIR``: streamed metrics of every shard, merged (calib.shards)."""
    from ..evaluation import apply_gates
    from ..metrics import DEFAULT_METRICS, METRICS, MetricConfig, check_metric_keys
    from ..metrics.definitions import AUTO_BINS, bin_count
    from ..shards import ENGINES, evaluate_shards

    if given.engine not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}; got {given.engine!r}")
    refused = {
        "--groups": given.groups_file,
        "--renormalise": given.renormalise,
        "--bootstrap": given.bootstrap,
        "--true-probs": given.true_probs,
        "--labels": given.labels,
        "--features": given.features,
        "--emit-state": given.emit_state,
    }
    named = [flag for flag, value in refused.items() if value]
    if named:
        raise UsageError(f"{named[0]} does not apply to a directory of shards")
    keys = list(keys or DEFAULT_METRICS)
    keys = check_metric_keys(keys + [g.metric for g in (*gates, *increase_gates)])
    additive = [key for key in keys if not METRICS[key].streamed]
    if additive:
        raise UsageError(
            f"{additive[0]} needs every row at once and cannot be merged from shards; pick streamed metrics with --metrics"
        )
    if AUTO_BINS in (given.bins, given.cmce_bins):
        raise UsageError("bins 'auto' depend on the rows of all shards together; give a number of bins for a directory of shards")
    report = evaluate_shards(
        given.pred,
        keys,
        MetricConfig(bins=bin_count(given.bins, 0, "--bins"), cmce_bins=bin_count(given.cmce_bins, 0, "--cmce-bins")),
        bundle=given.bundle,
        input_kind=given.input_kind,
        score_prefix=given.score_prefix,
        scores=given.scores,
        label_column=given.label_column,
        group_by=given.group_by,
        min_group_rows=given.min_group_rows,
        engine=given.engine,
        scheduler=given.scheduler,
    )
    report = apply_gates(
        report, gates, increase_gates, ignore_noise=given.ignore_noise, inconclusive=given.inconclusive
    ).to_json()
    inputs = report["input"]
    _emit(
        report,
        given.json_path,
        {
            **report,
            "input": {
                "path": f"{given.pred} ({len(inputs['merged_from'])} files, {given.engine})",
                "n": inputs["n"],
                "k": inputs["k"],
                "kind": "shards",
            },
        },
        given.table_format,
        given.junit,
        "a directory of shards is evaluated without replicates",
    )


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
    """Merge metric states of several evaluations (shards of one dataset) into one report.

    The numbers equal one evaluation over all the rows (V-ECE, which is not additive, is left out).
    Example: calib merge-states part1.npz part2.npz --json -
    """
    from ..evaluation import merge_metric_states, read_metric_state

    report = merge_metric_states([read_metric_state(path) for path in states], states, min_group_rows).to_json()
    inputs = report["input"]
    _emit(
        report,
        json_path,
        {
            **report,
            "input": {
                "path": f"{len(inputs['merged_from'])} merged states",
                "n": inputs["n"],
                "k": inputs["k"],
                "kind": "state",
                **({"multilabel": inputs["multilabel"]} if "multilabel" in inputs else {}),
            },
        },
        table_format,
    )
