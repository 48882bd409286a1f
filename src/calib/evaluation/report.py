"""The evaluation report (the JSON report of ``calib evaluate``): the streaming pass, the
whole-sample metrics, and the gates, put together."""

from __future__ import annotations

import numpy as np

from .. import __version__
from ..bootstrap import BootstrapConfig, labels_fingerprint
from ..calibrators.base import Calibrator
from ..errors import InputError, UsageError
from ..estimators import SAMPLE_METRICS, VECE_METRICS
from ..io.predictions import Predictions
from ..metrics import DEFAULT_METRICS, METRICS, TRUTH_METRICS, MetricConfig
from .gates import Gate, IncreaseGate, check_gates
from .sample import VeceConfig, vece_results
from .states import write_metric_state
from .streaming import check_metric_keys, compute_metrics


def evaluate(
    preds: Predictions,
    *,
    metrics: list[str] | None = None,
    config: MetricConfig = MetricConfig(),
    calibrator: Calibrator | None = None,
    bundle_path: str | None = None,
    gates: list[Gate] = (),
    increase_gates: list[IncreaseGate] = (),
    features: np.ndarray | None = None,
    vece: VeceConfig = VeceConfig(),
    include_vece: bool = True,
    progress=None,
    emit_state: str | None = None,
    bootstrap: BootstrapConfig | None = None,
) -> dict:
    """The JSON report of docs/cli.md. Gate metrics are computed even when not asked for; V-ECE keys
    (computed with ``vece``'s settings) are in the default list when ``include_vece``."""
    default = DEFAULT_METRICS + (TRUTH_METRICS if preds.true_probs is not None else ())
    default += tuple(VECE_METRICS) if include_vece else ()
    keys = check_metric_keys(list(metrics or default) + [g.metric for g in (*gates, *increase_gates)])
    vece_keys = [key for key in keys if key in SAMPLE_METRICS]
    keys = [key for key in keys if key not in SAMPLE_METRICS]
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
    values, before = compute_metrics(preds, keys, config, calibrator, features, streamed, bootstrap, replicates)
    if emit_state is not None:
        write_metric_state(emit_state, streamed[0], keys, config, preds, bundle_path)
    if vece_keys:
        values.update(vece_results(preds, vece_keys, vece, calibrator, features, progress))
        if before is not None:
            before.update(vece_results(preds, vece_keys, vece, None, None, progress))
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
    inputs = {
        "path": preds.name,
        "kind": preds.kind,
        "n": preds.n,
        "k": preds.k,
        "sha256": preds.sha256,
        "labels_sha256": labels_fingerprint(preds.labels),
    }
    checked, passed = check_gates(values, gates, increase_gates, bootstrap_section, inputs)
    report = {
        "calib_version": __version__,
        "input": inputs,
        "bundle": bundle_path,
        "metrics": values,
        "gates": checked,
        "passed": passed,
    }
    if before is not None:
        report["uncalibrated_metrics"] = before
    if bootstrap_section is not None:
        report["bootstrap"] = bootstrap_section
    return report
