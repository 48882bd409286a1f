"""The evaluation report (the JSON report of ``calib evaluate``): the streaming pass, the
whole-sample metrics, and the gates, put together."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._version import __version__
from ..bootstrap import CLUSTER_DRAW, BootstrapConfig, groups_fingerprint, rows_fingerprint
from ..calibrators.base import Calibrator, absent_class_rows
from ..errors import InputError, UsageError
from ..estimators.recalibrators import start_catboost_import
from ..io.predictions import Predictions
from ..metrics import (
    BINARY_METRICS,
    DEFAULT_METRICS,
    LABEL_PAIR_METRICS,
    METRICS,
    TRUTH_METRICS,
    VECE_METRICS,
    MetricConfig,
    check_metric_keys,
)
from ..metrics.definitions import bin_count
from ..metrics.sample import boosted_fit_count
from .gates import check_gates, check_same_problem
from .groups import LABEL_AGGREGATES, Groups, group_section, groups_for
from .report_types import BootstrapSection, Deferred, EvaluationReport, InputSection, entries_from_json
from .request import EvaluationRequest, GateSettings
from .resolution import floors_section
from .sample import sample_results
from .states import write_metric_state
from .streaming import stream_metrics


def build_report(
    preds: Predictions,
    request: EvaluationRequest = EvaluationRequest(),
    *,
    calibrator: Calibrator | None = None,
    groups: Groups | None = None,
    features: np.ndarray | None = None,
    bundle_path: str | None = None,
    progress=None,
) -> EvaluationReport:
    """The report of ``calib evaluate`` (docs/cli.md) on validated ``preds``, as ``request`` asks
    (:class:`calib.evaluation.request.EvaluationRequest`: the metrics, bins, V-ECE settings,
    replicates, gates, and the state file to write). Gate metrics are computed even when not asked
    for. ``groups`` adds each group's streamed metrics and the worst group per metric; groups with
    fewer than ``request.min_group_rows`` rows are listed but not gated. Gates read the bootstrap
    replicates when there are some (three outcomes, :mod:`calib.evaluation.gates`) unless they ignore
    the noise. ``progress`` is called once per boosted fit of V-ECE. The report's ``streamed``
    holds the accumulators behind it (what a metric state file holds). A multi-label input's (row,
    label) pairs are grouped by label: the overall values pool every pair (micro), each label is a
    group, and the group section's mean over labels is the macro average (docs/multilabel.md)."""
    gates, increase_gates = request.gates.thresholds, request.gates.changes
    config = metric_config(request.bins, request.cmce_bins, preds)
    vece, min_group_rows = request.vece_settings, request.min_group_rows
    bootstrap = request.bootstrap.resolve(preds.n, preds.k, request.gates, request.emit_state is not None)
    groups = groups_for(preds, groups)
    for gate in increase_gates:
        check_same_problem(gate.baseline_input, preds.output_layout.task())
    keys, sample_keys = _metric_keys(preds, request.metrics, request.vece, gates, increase_gates, groups)
    if any(gate.paired for gate in increase_gates) and bootstrap is None:
        raise UsageError(
            "a paired gate needs bootstrap replicates (the same number and seed as the baseline run)", cli_hint="--bootstrap N"
        )
    if boosted_fit_count([METRICS[key] for key in sample_keys], vece):
        start_catboost_import()  # while the streamed metrics are computed
    streamed = stream_metrics(preds, keys, config, calibrator, features, bootstrap, groups, request.bootstrap.first_row)
    floors = None if bootstrap is None else _deferred_floors(request, streamed, keys, bootstrap, groups, preds.output_layout)
    values, before = streamed.values, streamed.uncalibrated
    if sample_keys:
        values.update(sample_results(preds, sample_keys, vece, calibrator, features, progress))
        if before is not None:
            before.update(sample_results(preds, sample_keys, vece, None, None, progress))
    for gate in increase_gates:
        if gate.baseline_entry.settings != values[gate.metric]["settings"]:
            raise InputError(
                f"baseline {gate.metric} was computed with settings {gate.baseline_entry.settings}, "
                f"this run with {values[gate.metric]['settings']}; the numbers are not comparable"
            )
    if bootstrap is not None and preds.output_layout.pairs_per_row == 1:  # the pairs of a row are not independent
        for key, interval in streamed.state.intervals(bootstrap.level).items():
            values[key]["ci_analytic"] = interval
    report = EvaluationReport(
        __version__, InputSection.of(preds), bundle_path, entries_from_json(values), entries_from_json(before)
    )
    report.streamed = streamed
    if bootstrap is not None and floors is not None:  # the floors are deferred wherever replicates are drawn
        not_bootstrapped = sample_keys + [key for key in values if key.startswith("set_")]
        report.bootstrap = _bootstrap_section(
            bootstrap, preds, streamed.replicates, not_bootstrapped, groups, floors, request.bootstrap.first_row
        )
    if groups is not None:
        side = "calibrated" if calibrator is not None else "uncalibrated"
        before_groups = streamed.group_values["uncalibrated"] if calibrator is not None else None
        report.groups = group_section(
            groups.names,
            groups.counts,
            groups.source,
            streamed.group_values[side],
            before_groups,
            min_group_rows,
            of_labels=groups.of_labels,
        )
    absent_rows = None if calibrator is None else absent_class_rows(calibrator, preds)
    if absent_rows is not None:
        report.warnings = [absent_rows]
    if request.emit_state is not None:  # the accumulators behind the streamed metrics, for merge-states
        write_metric_state(request.emit_state, streamed, preds, bundle_path, groups, bootstrap, request.bootstrap.first_row)
    return apply_gates(report, request.gates)


def _metric_keys(preds: Predictions, metrics, include_vece: bool, gates, increase_gates, groups) -> tuple[list[str], list[str]]:
    """(the streamed keys, the whole-sample keys) to compute: those asked for (or the default
    table) and every gated one; refuses what the input cannot give."""
    pairs = preds.output_layout.n_labels is not None  # a multi-label input's (row, label) pairs
    if any(gate.aggregate in LABEL_AGGREGATES for gate in gates) and not pairs:
        raise UsageError("a gate on the worst label needs a multi-label input (labels a (N, L) 0/1 matrix)")
    if groups is None and any(gate.aggregate is not None for gate in gates):
        raise UsageError(
            "a gate on the worst group needs the rows' groups; none given", cli_hint="--group-by COLUMN or --groups FILE"
        )
    if pairs:  # each pair a binary prediction; V-ECE is not in its table
        default = LABEL_PAIR_METRICS
    else:
        default = DEFAULT_METRICS + (TRUTH_METRICS if preds.true_probs is not None else ())
        default += BINARY_METRICS if preds.k == 2 else ()
        default += VECE_METRICS if include_vece else ()
    keys = check_metric_keys(list(metrics or default) + [g.metric for g in (*gates, *increase_gates)])
    binary_only = [key for key in keys if METRICS[key].binary]
    if binary_only and preds.k != 2:
        raise UsageError(
            f"metric {binary_only[0]!r} is defined for binary models (K = 2), on the positive class; this input has K = {preds.k} "
            "(its multiclass counterpart: brier, ece or cw_ece)"
        )
    streamed = [key for key in keys if METRICS[key].streamed]
    if preds.true_probs is None:
        needing = [key for key in streamed if METRICS[key].needs_truth]
        if needing:
            raise UsageError(f"metric {needing[0]!r} needs the true probabilities; none given", cli_hint="--true-probs FILE")
    return streamed, [key for key in keys if not METRICS[key].streamed]


def planned_work(
    preds: Predictions, request: EvaluationRequest, groups: Groups | None = None, calibrated: bool = False
) -> tuple[int, bool]:
    """(the CatBoost models a report of ``preds`` for ``request`` trains, twice as many with a
    calibrator: the model's own probabilities and the calibrated ones; whether its whole-sample
    metrics run on a seeded subsample), for a progress bar and a note before the work starts."""
    gates = request.gates
    _, sample_keys = _metric_keys(
        preds, request.metrics, request.vece, gates.thresholds, gates.changes, groups_for(preds, groups)
    )
    fits = boosted_fit_count([METRICS[key] for key in sample_keys], request.vece_settings) * (2 if calibrated else 1)
    return fits, bool(sample_keys) and preds.n > request.vece_settings.max_rows


def apply_gates(report: EvaluationReport, gates: GateSettings):
    """``report`` with every gate checked: the gate results, whether all passed, and what an
    inconclusive gate counted as."""
    inconclusive = gates.inconclusive
    checked, passed = check_gates(
        report, gates.thresholds, gates.changes, ignore_noise=gates.ignore_noise, inconclusive=inconclusive
    )
    report.gates, report.passed = checked, passed
    report.inconclusive_counts_as = inconclusive if checked else None
    return report


def metric_config(bins, cmce_bins, preds: Predictions) -> MetricConfig:
    """The bins of the binned metrics and of CMCE, each a positive count or "auto"
    (:func:`calib.metrics.definitions.auto_bins` of the rows; of the rows per label for a multi-label
    input, whose gates and table read each label's rows)."""
    rows = preds.output_layout.shape[0]  # a multi-label input's rows, not its pairs
    return MetricConfig(bins=bin_count(bins, rows, "bins"), cmce_bins=bin_count(cmce_bins, rows, "cmce_bins"))


def _deferred_floors(request: EvaluationRequest, streamed, keys, bootstrap, groups, layout) -> Deferred:
    """The floors (:func:`_floors`), drawn when first read: at once on a thread of their own (their
    binomial draws release the GIL, beside V-ECE's fits and the report's assembly) where a gate
    reads them or the report is kept (a later baseline, a state file), else only if something reads
    them (a table without gates reads none)."""
    settings = (streamed, keys, bootstrap, groups, request.min_group_rows, layout.pairs_per_row)
    if not (request.gates.any or request.bootstrap.keep_as_baseline or request.emit_state is not None):
        return Deferred(lambda: _floors(*settings))
    pool = ThreadPoolExecutor(1, thread_name_prefix="calib-floors")
    started = pool.submit(_floors, *settings)
    pool.shutdown(wait=False)  # the thread ends with its one task
    return Deferred(started)


def _floors(
    streamed, keys, bootstrap: BootstrapConfig, groups: Groups | None, min_group_rows: int, pairs_per_row: int
) -> dict | None:
    """The resolution floors and mean noise of the report's binned errors: of all rows, and
    simultaneous over the gated groups (those with at least ``min_group_rows`` rows) where the
    groups have replicates of their own (:mod:`calib.evaluation.resolution`). The mean-gap bounds
    need one pair per row (``pairs_per_row`` 1): a multi-label input's pooled pairs (of all rows, or
    of a group of rows) have L, its labels one each."""
    group_sets = None
    if groups is not None and streamed.group_states is not None and "by_group" in streamed.replicates:
        group_sets = {
            name: metric_set
            for name, metric_set, count in zip(groups.names, streamed.group_states, groups.counts)
            if count >= min_group_rows
        }
    by_label = groups is not None and groups.of_labels
    one_pair_per_row = pairs_per_row == 1, pairs_per_row == 1 or by_label
    return floors_section(keys, streamed.state, group_sets, bootstrap.level, bootstrap.seed, one_pair_per_row)


def _bootstrap_section(
    bootstrap: BootstrapConfig, preds: Predictions, replicates: dict, not_bootstrapped, groups, floors: Deferred, first_row: int
) -> BootstrapSection:
    """The replicates' settings and values (and each group's, for gates on groups), which a later
    run pairs with its own when it saw the same rows' labels (and groups): their fingerprints are
    sums over the rows keyed by their global index (calib.bootstrap.rows_fingerprint), equal to
    merged states' of the same rows, and the resolution floors."""
    by_group = replicates.get("by_group")
    keys = range(first_row, first_row + preds.n)
    return BootstrapSection(
        bootstrap.replicates,
        bootstrap.seed,
        bootstrap.level,
        preds.n,
        replicates["groups"],
        rows_fingerprint(keys, preds.required_labels()),
        not_bootstrapped,
        replicates["values"],
        by_group,
        None if by_group is None else groups_fingerprint(keys, groups.names, groups.codes),
        floors,
        CLUSTER_DRAW,
    )
