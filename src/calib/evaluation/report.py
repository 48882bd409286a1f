"""The evaluation report (the JSON report of ``calib evaluate``): the streaming pass, the
whole-sample metrics, and the gates, put together."""

from __future__ import annotations

import numpy as np

from .._version import __version__
from ..bootstrap import BootstrapConfig, labels_fingerprint
from ..calibrators.base import Calibrator, absent_class_rows
from ..errors import InputError, UsageError
from ..io.predictions import Predictions
from ..metrics import DEFAULT_METRICS, METRICS, TRUTH_METRICS, VECE_METRICS, MetricConfig, check_metric_keys
from ..metrics.sample import SampleConfig
from .gates import ChangeGate, Gate, check_gates
from .groups import Groups, group_section
from .sample import sample_results
from .states import write_metric_state
from .streaming import compute_metrics


def evaluate(
    preds: Predictions,
    *,
    metrics: list[str] | None = None,
    config: MetricConfig = MetricConfig(),
    calibrator: Calibrator | None = None,
    bundle_path: str | None = None,
    gates: list[Gate] = (),
    increase_gates: list[ChangeGate] = (),
    features: np.ndarray | None = None,
    vece: SampleConfig = SampleConfig(),
    include_vece: bool = True,
    progress=None,
    emit_state: str | None = None,
    bootstrap: BootstrapConfig | None = None,
    groups: Groups | None = None,
    min_group_rows: int = 100,
    ignore_noise: bool = False,
    inconclusive: str = "pass",
) -> dict:
    """The JSON report of docs/cli.md. Gate metrics are computed even when not asked for; V-ECE keys
    (computed with ``vece``'s settings) are in the default list when ``include_vece``. ``groups``
    adds each group's streamed metrics (``groups``) and the worst group per metric (``group_by``);
    groups with fewer than ``min_group_rows`` rows are listed but not gated. Gates read the
    bootstrap replicates when there are some (three outcomes, :mod:`calib.evaluation.gates`) unless
    ``ignore_noise``; ``inconclusive`` ("pass" or "fail") is what an inconclusive gate counts as."""
    if groups is None and any(gate.aggregate is not None for gate in gates):
        raise UsageError(
            "a gate on the worst group needs the rows' groups; none given", cli_hint="--group-by COLUMN or --groups FILE"
        )
    default = DEFAULT_METRICS + (TRUTH_METRICS if preds.true_probs is not None else ())
    default += VECE_METRICS if include_vece else ()
    keys = check_metric_keys(list(metrics or default) + [g.metric for g in (*gates, *increase_gates)])
    vece_keys = [key for key in keys if not METRICS[key].streamed]
    keys = [key for key in keys if METRICS[key].streamed]
    if preds.true_probs is None:
        needing = [key for key in keys if METRICS[key].needs_truth]
        if needing:
            raise UsageError(f"metric {needing[0]!r} needs the true probabilities; none given", cli_hint="--true-probs FILE")
    if any(gate.paired for gate in increase_gates) and bootstrap is None:
        raise UsageError(
            "a paired gate needs bootstrap replicates (the same number and seed as the baseline run)", cli_hint="--bootstrap N"
        )
    streamed: list = []
    replicates: dict = {}
    by_group: dict = {}
    values, before = compute_metrics(preds, keys, config, calibrator, features, streamed, bootstrap, replicates, groups, by_group)
    if emit_state is not None:
        write_metric_state(emit_state, streamed[0], keys, config, preds, bundle_path, groups, by_group.get("states"))
    if vece_keys:
        values.update(sample_results(preds, vece_keys, vece, calibrator, features, progress))
        if before is not None:
            before.update(sample_results(preds, vece_keys, vece, None, None, progress))
    for gate in increase_gates:
        if gate.baseline.get("settings", {}) != values[gate.metric]["settings"]:
            raise InputError(
                f"baseline {gate.metric} was computed with settings {gate.baseline.get('settings')}, "
                f"this run with {values[gate.metric]['settings']}; the numbers are not comparable"
            )
    bootstrap_section = None
    if bootstrap is not None:
        bootstrap_section = {
            "replicates": bootstrap.replicates,
            "seed": bootstrap.seed,
            "level": bootstrap.level,
            "rows": preds.n,
            "groups": replicates["groups"],
            "labels_sha256": labels_fingerprint(preds.labels),
            "not_bootstrapped": vece_keys + [key for key in values if key.startswith("set_")],
            "values": replicates["values"],
        }
        if "by_group" in replicates:  # each group's replicates, for gates on groups
            bootstrap_section["by_group"] = replicates["by_group"]
            bootstrap_section["groups_sha256"] = labels_fingerprint(groups.codes)
    inputs = {
        "path": preds.name,
        "kind": preds.kind,
        "n": preds.n,
        "k": preds.k,
        "sha256": preds.sha256,
        "labels_sha256": labels_fingerprint(preds.labels),
    }
    report = {"calib_version": __version__, "input": inputs, "bundle": bundle_path, "metrics": values}
    if before is not None:
        report["uncalibrated_metrics"] = before
    if bootstrap_section is not None:
        report["bootstrap"] = bootstrap_section
    if groups is not None:
        side = "calibrated" if calibrator is not None else "uncalibrated"
        before_groups = by_group["uncalibrated"] if calibrator is not None else None
        report["groups"], report["group_by"] = group_section(
            groups.names, groups.counts, groups.source, by_group[side], before_groups, min_group_rows
        )
    absent_rows = None if calibrator is None else absent_class_rows(calibrator, preds)
    if absent_rows is not None:
        report["warnings"] = [absent_rows]
    report["gates"], report["passed"] = check_gates(
        report, gates, increase_gates, ignore_noise=ignore_noise, inconclusive=inconclusive
    )
    if report["gates"]:
        report["inconclusive_counts_as"] = inconclusive
    return report
