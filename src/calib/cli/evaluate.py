"""`calib evaluate PRED [--bundle B] [--json PATH|-] [--fail-if EXPR]...`."""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Optional

import typer

from .. import api
from ..errors import UsageError
from ..estimators.recalibrators import RECALIBRATORS, RECIPES
from ..io import check_not_an_input, read_features, read_true_probs
from ..io.atomic import write_bytes_atomic
from ..io.formats import listed, shard_formats
from ..report_text import gate_text
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
    bins: Annotated[int, typer.Option("--bins", min=1, help="Equal-width bins of the ECE family.")] = 15,
    cmce_bins: Annotated[int, typer.Option("--cmce-bins", min=1, help="Equal-width bins of CMCE.")] = 25,
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
            help="WS-CatBoost recipe: compact (4 inner folds of depth-4 trees) | paper (the V-ECE paper's 8 of depth 6).",
        ),
    ] = "compact",
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
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help=f"For a directory of {listed(shard_formats())} files: local (in this process) or dask (one task per file on a cluster); metric states are merged in file order.",
        ),
    ] = "local",
    scheduler: Annotated[
        Optional[str],
        typer.Option(
            "--scheduler", help="--engine dask: the scheduler address (default: a local two-worker cluster).", show_default=False
        ),
    ] = None,
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
    group_by: options.GroupBy = None,
    groups_file: options.GroupsFile = None,
    min_group_rows: options.MinGroupRows = 100,
    table_format: options.TableFormat = "auto",
) -> None:
    """Evaluate PRED (after applying --bundle if given): metric table or JSON report, and CI gates.

    Exit code 1 when a gate fails (the report is still written). Example:
    calib evaluate test.npz --bundle ts_bundle --fail-if "cmce>0.01"
    """
    from ..bootstrap import BootstrapConfig, default_config
    from ..evaluation import parse_change_gates, parse_gate
    from ..evaluation.gates import INCONCLUSIVE_POLICIES
    from ..evaluation.groups import read_groups
    from ..metrics import METRICS, VECE_METRICS, check_metric_keys
    from ..metrics.sample import SampleConfig, boosted_fit_count

    render.resolve_format(table_format)
    if vece_recalibrator not in RECALIBRATORS:
        raise UsageError(f"--vece-recalibrator must be one of {', '.join(RECALIBRATORS)}; got {vece_recalibrator!r}")
    if vece_recipe not in RECIPES:
        raise UsageError(f"--vece-recipe must be one of {', '.join(RECIPES)}; got {vece_recipe!r}")
    if inconclusive not in INCONCLUSIVE_POLICIES:
        raise UsageError(f"--inconclusive must be one of {', '.join(INCONCLUSIVE_POLICIES)}; got {inconclusive!r}")
    if paired and ignore_noise:
        raise UsageError("--paired asks for the bootstrap's intervals and --ignore-noise for the raw values; drop one of the two")
    gates = [parse_gate(expr) for expr in fail_if or []]
    increase_gates = parse_change_gates(max_increase or [], baseline, paired, max_decrease or [])
    keys = check_metric_keys([k.strip() for k in metrics.split(",") if k.strip()]) if metrics else None
    if no_vece:  # a V-ECE key asked for by name contradicts --no-vece
        asked = [*(keys or []), *(g.metric for g in (*gates, *increase_gates))]
        contradicting = next((key for key in asked if key in VECE_METRICS), None)
        if contradicting is not None:
            raise UsageError(f"{contradicting} is a V-ECE value, which --no-vece skips; drop one of the two")
    for path in (json_path, junit):
        if path not in (None, "-"):
            check_not_an_input(path, [pred, labels, true_probs, features, baseline])
    if os.path.isdir(pred):
        _evaluate_directory(
            pred,
            keys,
            gates,
            increase_gates,
            bundle=bundle,
            bins=bins,
            cmce_bins=cmce_bins,
            engine=engine,
            scheduler=scheduler,
            json_path=json_path,
            junit=junit,
            ignore_noise=ignore_noise,
            inconclusive=inconclusive,
            table_format=table_format,
            input_kind=input_kind,
            score_prefix=score_prefix,
            label_column=label_column,
            group_by=group_by,
            min_group_rows=min_group_rows,
            refused={
                "--groups": groups_file,
                "--renormalise": renormalise,
                "--bootstrap": bootstrap,
                "--true-probs": true_probs,
                "--labels": labels,
                "--features": features,
                "--emit-state": emit_state,
            },
        )
        return
    if engine != "local" or scheduler is not None:
        raise UsageError(f"--engine dask and --scheduler take a directory of {listed(shard_formats())} files as PRED")
    preds, calibrator = options.read_inputs(
        pred, bundle, labels, label_column, input_kind, score_prefix, require_labels=True, renormalise=renormalise
    )
    preds.hash_in_background()  # the report's sha256, on the other core while the metrics stream
    groups = read_groups(preds, pred, group_by, groups_file, label_column)
    if true_probs is not None:
        preds.true_probs = read_true_probs(true_probs, preds)
    render.note(f"input kind: {preds.kind} ({preds.kind_reason})")
    if bootstrap is None and (gates or increase_gates or json_path is not None):  # replicates for noise-aware gates
        baseline_section = increase_gates[0].baseline_bootstrap if increase_gates else None
        replicates = default_config(preds.n, preds.k, confidence, baseline_section)
    else:
        replicates = BootstrapConfig(bootstrap, seed, confidence) if bootstrap else None
    wanted = [*(keys or ([] if no_vece else VECE_METRICS)), *(g.metric for g in (*gates, *increase_gates))]
    if any(not METRICS[key].streamed for key in wanted) and preds.n > vece_max_rows:
        render.note(f"V-ECE and KDE-ECE on a seeded subsample of {vece_max_rows} of {preds.n} rows (--vece-max-rows)")
    # one V-ECE pass per side: the model's own probabilities and, with a bundle, the calibrated ones
    sample_config = SampleConfig(vece_recalibrator, seed, vece_max_rows, vece_recipe)
    fits = boosted_fit_count([METRICS[key] for key in wanted], sample_config) * (2 if bundle is not None else 1)
    with render.progress("V-ECE", fits, "boosted fits", "; --no-vece skips V-ECE" if keys is None else "") as advance:
        report = api.evaluate(
            preds,
            metrics=keys,
            calibrator=calibrator,
            vece=not no_vece,
            bins=bins,
            cmce_bins=cmce_bins,
            vece_recalibrator=vece_recalibrator,
            vece_recipe=vece_recipe,
            seed=seed,
            vece_max_rows=vece_max_rows,
            features=read_features(features, preds.n),
            gates=gates,
            increase_gates=increase_gates,
            bootstrap=replicates,
            bundle_path=bundle,
            emit_state=emit_state,
            progress=advance,
            groups=groups,
            min_group_rows=min_group_rows,
            ignore_noise=ignore_noise,
            inconclusive=inconclusive,
        ).to_dict()
    _emit(report, json_path, report, table_format, junit)


def _noise_notes(report: dict, remedy: str) -> list[str]:
    """One note per reason a gate read raw values (noise ignored), unless asked for; ``remedy``
    says how this command would draw replicates."""
    notes = {}
    for gate in report["gates"]:
        reason = gate.get("noise_reason")
        if gate.get("noise") != "ignored" or reason in (None, "noise ignored on request") or "group" in gate:
            continue
        if "allowed" in gate:
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
    for note in dict.fromkeys(g["baseline_input"] for g in report["gates"] if "baseline_input" in g):
        render.note(f"note: {note}; the change gates compare different data")
    for note in _noise_notes(report, remedy):
        render.note(note)
    write_ci_outputs(report, junit)
    failed = [g for g in report["gates"] if not g["passed"]]
    if failed:
        render.error("gate failed: " + "; ".join(gate_text(g) for g in failed))
        raise typer.Exit(1)


def _evaluate_directory(
    directory,
    keys,
    gates,
    increase_gates,
    *,
    bundle,
    bins,
    cmce_bins,
    engine,
    scheduler,
    json_path,
    junit,
    ignore_noise,
    inconclusive,
    table_format,
    input_kind,
    score_prefix,
    label_column,
    group_by,
    min_group_rows,
    refused,
) -> None:
    """``calib evaluate DIR``: streamed metrics of every shard, merged (calib.shards)."""
    from ..evaluation import check_gates
    from ..metrics import DEFAULT_METRICS, METRICS, MetricConfig, check_metric_keys
    from ..shards import ENGINES, evaluate_shards

    if engine not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}; got {engine!r}")
    given = [flag for flag, value in refused.items() if value]
    if given:
        raise UsageError(f"{given[0]} does not apply to a directory of shards")
    keys = list(keys or DEFAULT_METRICS)
    keys = check_metric_keys(keys + [g.metric for g in (*gates, *increase_gates)])
    additive = [key for key in keys if not METRICS[key].streamed]
    if additive:
        raise UsageError(
            f"{additive[0]} needs every row at once and cannot be merged from shards; pick streamed metrics with --metrics"
        )
    report = evaluate_shards(
        directory,
        keys,
        MetricConfig(bins=bins, cmce_bins=cmce_bins),
        bundle=bundle,
        input_kind=input_kind,
        score_prefix=score_prefix,
        label_column=label_column,
        group_by=group_by,
        min_group_rows=min_group_rows,
        engine=engine,
        scheduler=scheduler,
    )
    report["gates"], report["passed"] = check_gates(
        report, gates, increase_gates, ignore_noise=ignore_noise, inconclusive=inconclusive
    )
    inputs = report["input"]
    _emit(
        report,
        json_path,
        {
            **report,
            "input": {
                "path": f"{directory} ({len(inputs['merged_from'])} files, {engine})",
                "n": inputs["n"],
                "k": inputs["k"],
                "kind": "shards",
            },
        },
        table_format,
        junit,
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

    report = merge_metric_states([read_metric_state(path) for path in states], states, min_group_rows)
    inputs = report["input"]
    _emit(
        report,
        json_path,
        {
            **report,
            "input": {"path": f"{len(inputs['merged_from'])} merged states", "n": inputs["n"], "k": inputs["k"], "kind": "state"},
        },
        table_format,
    )
