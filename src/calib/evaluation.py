"""The evaluation report: metrics streamed over chunks of rows, and the CI gates (cli.md)."""

from __future__ import annotations

import json
import operator
import re
import zipfile
from dataclasses import dataclass

import numpy as np

from . import __version__
from .bootstrap import BootstrapConfig, GroupedStates, intervals, labels_fingerprint, paired_increase
from .calibrators.base import Calibrator, given_probs
from .errors import InputError, UsageError
from .estimators import (
    IN_SAMPLE_METRICS,
    KDE_METRICS,
    SAMPLE_METRICS,
    VECE_METRICS,
    kde_calibration_errors,
    variational_calibration_error,
)
from .io.predictions import Predictions
from .metrics import DEFAULT_METRICS, METRICS, TRUTH_METRICS, Batch, MetricConfig, compute_value
from .numerics import log_softmax_and_softmax, map_in_order, softmax

_OPERATORS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_GATE = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(<=|>=|<|>)\s*([-+0-9.eE]+)\s*$")


class MetricSet:
    """The accumulators behind a list of metrics, shared where metrics read the same one."""

    def __init__(self, keys: list[str], config: MetricConfig, n_classes: int):
        self.config = config
        self.metrics = [METRICS[key] for key in keys]
        self.accumulators: dict[tuple, object] = {}
        self.source: dict[str, tuple] = {}
        for metric in self.metrics:
            identity, factory = metric.accumulator(config, n_classes)
            if identity not in self.accumulators:
                self.accumulators[identity] = factory()
            self.source[metric.key] = identity

    def update(self, batch: Batch) -> None:
        for accumulator in self.accumulators.values():
            accumulator.update(batch)

    def state(self) -> dict[str, np.ndarray]:
        """Every accumulator's additive state, keyed "<index>/<name>" in accumulator order."""
        return {f"{i}/{name}": array for i, accumulator in enumerate(self.accumulators.values())
                for name, array in accumulator.state().items()}

    def absorb(self, state: dict[str, np.ndarray]) -> None:
        for i, accumulator in enumerate(self.accumulators.values()):
            prefix = f"{i}/"
            accumulator.absorb({key[len(prefix):]: value for key, value in state.items() if key.startswith(prefix)})

    def concatenated_state_keys(self) -> set[str]:
        """State keys that merge by concatenation (per-row values) rather than by addition."""
        return {f"{i}/{name}" for i, accumulator in enumerate(self.accumulators.values())
                for name in accumulator.STATE if isinstance(getattr(accumulator, name), list)}

    def results(self) -> dict[str, dict]:
        out = {}
        for metric in self.metrics:
            state = self.accumulators[self.source[metric.key]]
            out[metric.key] = {"value": compute_value(metric, state, self.config), "settings": metric.settings(self.config, state)}
        return out


def check_metric_keys(keys) -> list[str]:
    unknown = [k for k in keys if k not in METRICS and k not in SAMPLE_METRICS]
    if unknown:
        raise UsageError(f"unknown metric {unknown[0]!r}; choose from {', '.join([*METRICS, *SAMPLE_METRICS])}")
    return list(dict.fromkeys(keys))


@dataclass(frozen=True)
class VeceConfig:
    """V-ECE settings of an evaluation (metrics.md); it needs every row at once, so inputs with more
    than ``max_rows`` rows are subsampled (seeded) and the report says so."""

    recalibrator: str = "ws-catboost"
    seed: int = 0
    max_rows: int = 20_000


def vece_results(preds: Predictions, keys: list[str], config: VeceConfig, calibrator: Calibrator | None = None,
                 features: np.ndarray | None = None, progress=None) -> dict:
    """The whole-sample entries (V-ECE, its in-sample variants, KDE-ECE) on one (sub)sample of rows:
    one recalibration serves every key of a family."""
    rows = np.arange(preds.n)
    if preds.n > config.max_rows:
        rows = np.sort(np.random.default_rng(config.seed).choice(preds.n, config.max_rows, replace=False))
    probs = _sample_probs(preds, rows, calibrator, None if features is None else features[rows])
    labels, subsampled = preds.labels[rows], len(rows) < preds.n
    out = {}
    for family, folds in ((VECE_METRICS, None), (IN_SAMPLE_METRICS, 1)):
        wanted = [key for key in keys if key in family]
        if not wanted:
            continue
        estimate = variational_calibration_error(probs, labels, config.recalibrator, seed=config.seed, progress=progress,
                                                 **({} if folds is None else {"folds": folds}))
        settings = {"recalibrator": config.recalibrator, "folds": estimate.folds, "seed": config.seed,
                    "rows": len(rows), "subsampled": subsampled, "coarsened_boosting": estimate.coarsened}
        out.update({key: {"value": estimate.values[family[key]], "settings": settings,
                          "unclipped": estimate.unclipped[family[key]]} for key in wanted})
    wanted = [key for key in keys if key in KDE_METRICS]
    if wanted:
        values, bandwidth = kde_calibration_errors(probs, labels)
        settings = {"kernel": "dirichlet", "bandwidth": bandwidth, "bandwidth_choice": "leave-one-out likelihood",
                    "rows": len(rows), "subsampled": subsampled}
        out.update({key: {"value": values[KDE_METRICS[key]], "settings": settings} for key in wanted})
    return {key: out[key] for key in keys}


def _sample_probs(preds: Predictions, rows: np.ndarray, calibrator: Calibrator | None,
                  features: np.ndarray | None) -> np.ndarray:
    """The probabilities V-ECE and KDE-ECE score on ``rows`` (the float64 logits are freed on return,
    before the estimators' own copies)."""
    if calibrator is not None:
        return calibrator.transform_probs_with_info(preds.logits(rows), features, **given_probs(calibrator, preds, rows))[0]
    given = preds.probs_as_given(rows)
    return given if given is not None else softmax(preds.logits(rows))


def uncalibrated_batch(preds: Predictions, rows: slice) -> Batch:
    """The model's own probabilities: as given for probs inputs, else log-softmax of the logits."""
    labels, truth = preds.labels[rows], preds.true_probs_rows(rows)
    given = preds.probs_as_given(rows)
    if given is not None:
        return Batch(labels, probs=given, true_probs=truth)
    log_probs, probs = log_softmax_and_softmax(preds.logits(rows))
    return Batch(labels, log_probs=log_probs, probs=probs, true_probs=truth)


class SetStats:
    """Conformal sets of a bundle on the evaluated rows: coverage P(y in C(x)), mean |C(x)|, and the
    shares of empty and full sets."""

    def __init__(self, calibrator):
        self.settings = {k: v for k, v in calibrator.fit_report().items() if k in ("alpha", "score", "threshold")}
        self.n = self.covered = self.size = self.empty = self.full = 0

    def update(self, in_set: np.ndarray, labels: np.ndarray) -> None:
        sizes = in_set.sum(axis=1)
        self.n += len(labels)
        self.covered += int(in_set[np.arange(len(labels)), labels].sum())
        self.size += int(sizes.sum())
        self.empty += int((sizes == 0).sum())
        self.full += int((sizes == in_set.shape[1]).sum())

    def results(self) -> dict:
        values = {"set_coverage": self.covered, "set_size": self.size, "set_empty": self.empty, "set_full": self.full}
        return {key: {"value": value / self.n, "settings": self.settings} for key, value in values.items()}


def compute_metrics(preds: Predictions, keys: list[str], config: MetricConfig, calibrator: Calibrator | None = None,
                    features: np.ndarray | None = None, state_out: list | None = None,
                    bootstrap: BootstrapConfig | None = None, replicates_out: dict | None = None):
    """Stream ``preds`` in chunks; returns (metrics, uncalibrated metrics or None).

    With a calibrator, the first dict holds the calibrated metrics and the second the model's own;
    a conformal calibrator adds its set statistics (set_coverage, set_size, set_empty, set_full).
    ``state_out``, if given, receives the MetricSet behind the first dict (for --emit-state).
    ``bootstrap`` adds a percentile interval "ci" to every entry (:mod:`calib.bootstrap`) and puts the
    first dict's replicate values into ``replicates_out``.
    """
    if preds.labels is None:
        raise InputError(f"{preds.name}: evaluation needs labels; pass --labels FILE")
    calibrated = MetricSet(keys, config, preds.k) if calibrator is not None else None
    sets = SetStats(calibrator) if calibrator is not None and calibrator.builds_sets else None
    uncalibrated = MetricSet(keys, config, preds.k)
    grouped = {}
    if bootstrap is not None:
        sides = ["uncalibrated"] + (["calibrated"] if calibrated is not None else [])
        grouped = {side: GroupedStates(lambda: MetricSet(keys, config, preds.k), preds.n, bootstrap.seed) for side in sides}
    def batches(rows: slice):
        """The chunk's model and calibrated batches and set mask: the costly part, run on worker
        threads; the accumulators are updated in row order on this thread (same result for any
        thread count)."""
        batch, after, in_set = uncalibrated_batch(preds, rows), None, None
        if calibrated is not None:
            logits, given = preds.logits(rows), given_probs(calibrator, preds, rows)
            chunk_features = None if features is None else features[rows]
            if sets is None:
                log_probs = calibrator.transform(logits, chunk_features, **given)
            else:
                log_probs, in_set = calibrator.transform_and_sets(logits, chunk_features, **given)
            after = Batch(preds.labels[rows], log_probs=log_probs, true_probs=preds.true_probs_rows(rows))
        return rows, batch, after, in_set

    for rows, batch, after, in_set in map_in_order(batches, preds.chunks()):
        uncalibrated.update(batch)
        if "uncalibrated" in grouped:
            grouped["uncalibrated"].update(batch, rows)
        if after is None:
            continue
        if in_set is not None:
            sets.update(in_set, preds.labels[rows])
        calibrated.update(after)
        if "calibrated" in grouped:
            grouped["calibrated"].update(after, rows)
    if state_out is not None:
        state_out.append(calibrated if calibrated is not None else uncalibrated)
    results = {"uncalibrated": uncalibrated.results()}
    if calibrated is not None:
        results["calibrated"] = calibrated.results()
    for side, states in grouped.items():
        replicates = states.replicate_values(bootstrap)
        for key, interval in intervals(replicates, bootstrap.level).items():
            results[side][key]["ci"] = interval
        if replicates_out is not None and side == ("calibrated" if calibrated is not None else "uncalibrated"):
            replicates_out.update({"groups": states.groups, "values": {k: v.tolist() for k, v in replicates.items()}})
    if calibrated is None:
        return results["uncalibrated"], None
    values = results["calibrated"]
    if sets is not None:
        values.update(sets.results())
    return values, results["uncalibrated"]


@dataclass(frozen=True)
class Gate:
    """``--fail-if "cmce>0.01"``: the gate fails when the condition holds (or the value is undefined)."""

    expr: str
    metric: str
    op: str
    threshold: float

    def check(self, metrics: dict) -> dict:
        value = metrics[self.metric]["value"]
        failed = value is None or _OPERATORS[self.op](value, self.threshold)
        return {"expr": self.expr, "value": value, "passed": not failed}


@dataclass(frozen=True)
class IncreaseGate:
    """``--baseline old.json --max-increase cmce=0.001``: fails when new - old > allowed."""

    metric: str
    allowed: float
    baseline: dict
    #: With ``--paired``: the baseline report's bootstrap section; the gate then fails only when the
    #: one-sided lower confidence bound of the paired increase exceeds ``allowed``.
    baseline_bootstrap: dict | None = None
    paired: bool = False

    def check(self, metrics: dict, bootstrap: dict | None = None) -> dict:
        new = metrics[self.metric]["value"]
        old = self.baseline["value"]
        increase = None if new is None or old is None else new - old
        result = {"expr": f"{self.metric} - baseline <= {self.allowed:g}", "value": new, "baseline": old,
                  "increase": increase, "passed": increase is not None and increase <= self.allowed}
        if self.paired:
            level = (bootstrap or {}).get("level", 0.95)
            bound, reason = paired_increase(bootstrap or {}, self.baseline_bootstrap or {}, self.metric, level)
            if reason is not None:
                raise InputError(f"--paired: {reason}")
            result.update(expr=f"{self.metric} - baseline <= {self.allowed:g} (paired bootstrap, {level:g} one-sided)",
                          increase_lower_bound=bound, passed=increase is not None and bound <= self.allowed)
        return result


def parse_gate(expr: str) -> Gate:
    match = _GATE.match(expr)
    if not match:
        raise UsageError(f"--fail-if {expr!r}: expected METRIC OP NUMBER with OP one of < <= > >=, e.g. 'cmce>0.01'")
    metric, op, number = match.groups()
    check_metric_keys([metric])
    try:
        return Gate(expr, metric, op, float(number))
    except ValueError:
        raise UsageError(f"--fail-if {expr!r}: {number!r} is not a number") from None


def parse_increase_gates(specs: list[str], baseline_path: str | None, paired: bool = False) -> list[IncreaseGate]:
    if not specs:
        if paired:
            raise UsageError("--paired applies to --max-increase gates; none given")
        return []
    if baseline_path is None:
        raise UsageError("--max-increase needs --baseline REPORT.json")
    baseline = read_report(baseline_path)
    gates = []
    for spec in specs:
        metric, sep, number = spec.partition("=")
        metric = metric.strip()
        try:
            allowed = float(number)
        except ValueError:
            allowed = None
        if not sep or allowed is None:
            raise UsageError(f"--max-increase {spec!r}: expected METRIC=NUMBER, e.g. cmce=0.001")
        check_metric_keys([metric])
        if metric not in baseline.get("metrics", {}):
            raise InputError(f"{baseline_path}: the baseline report has no metric {metric!r}")
        gates.append(IncreaseGate(metric, allowed, baseline["metrics"][metric], baseline.get("bootstrap"), paired))
    return gates


def read_report(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON report of calib evaluate ({exc})") from None
    if not isinstance(report, dict) or not isinstance(report.get("metrics"), dict):
        raise InputError(f"{path}: not a JSON report of calib evaluate (no 'metrics')")
    return report


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
    vece: VeceConfig | None = VeceConfig(),
    progress=None,
    emit_state: str | None = None,
    bootstrap: BootstrapConfig | None = None,
) -> dict:
    """The JSON report of cli.md. Gate metrics are computed even when not asked for; V-ECE keys are
    in the default list unless ``vece`` is None."""
    default = DEFAULT_METRICS + (TRUTH_METRICS if preds.true_probs is not None else ())
    default += tuple(VECE_METRICS) if vece is not None else ()
    keys = check_metric_keys(list(metrics or default) + [g.metric for g in (*gates, *increase_gates)])
    vece_keys = [key for key in keys if key in SAMPLE_METRICS]
    keys = [key for key in keys if key not in SAMPLE_METRICS]
    if preds.true_probs is None:
        needing = [key for key in keys if METRICS[key].needs_truth]
        if needing:
            raise UsageError(f"metric {needing[0]!r} needs the true probabilities: pass --true-probs FILE")
    if any(gate.paired for gate in increase_gates) and bootstrap is None:
        raise UsageError("--paired needs --bootstrap N (with the same N and --seed as the baseline run)")
    streamed: list = []
    replicates: dict = {}
    values, before = compute_metrics(preds, keys, config, calibrator, features, streamed, bootstrap, replicates)
    if emit_state is not None:
        write_metric_state(emit_state, streamed[0], keys, config, preds, bundle_path)
    if vece_keys:
        vece = vece or VeceConfig()
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
        bootstrap_section = {"replicates": bootstrap.replicates, "seed": bootstrap.seed, "level": bootstrap.level,
                             "rows": preds.n, "groups": replicates["groups"], "labels_sha256": labels_fingerprint(preds.labels),
                             "not_bootstrapped": vece_keys + [key for key in values if key.startswith("set_")],
                             "values": replicates["values"]}
    checked = [g.check(values) for g in gates] + [g.check(values, bootstrap_section) for g in increase_gates]
    report = {
        "calib_version": __version__,
        "input": {"path": preds.name, "kind": preds.kind, "n": preds.n, "k": preds.k, "sha256": preds.sha256},
        "bundle": bundle_path,
        "metrics": values,
        "gates": checked,
        "passed": all(g["passed"] for g in checked),
    }
    if before is not None:
        report["uncalibrated_metrics"] = before
    if bootstrap_section is not None:
        report["bootstrap"] = bootstrap_section
    return report


#: Metric state files: an .npz of numeric arrays, the header as JSON bytes (no pickle anywhere).
STATE_FORMAT = "calib-metric-state"
STATE_VERSION = 1


def state_header(keys: list[str], config: MetricConfig, preds: Predictions, bundle_path: str | None) -> dict:
    """What a metric state must agree on to merge (metrics, settings, K), and where it came from."""
    return {"format": STATE_FORMAT, "format_version": STATE_VERSION, "calib_version": __version__,
            "keys": keys, "config": {"bins": config.bins, "cmce_bins": config.cmce_bins}, "k": preds.k,
            "n": preds.n, "inputs": [{"path": preds.name, "sha256": preds.sha256}], "bundle": bundle_path}


def write_metric_state(path: str, metric_set: MetricSet, keys: list[str], config: MetricConfig,
                       preds: Predictions, bundle_path: str | None) -> None:
    """The additive state behind this evaluation's streamed metrics (V-ECE is not additive: left out)."""
    from .io.atomic import write_bytes_atomic
    from .io.writers import npz_bytes

    header = state_header(keys, config, preds, bundle_path)
    arrays = {"header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8), **metric_set.state()}
    write_bytes_atomic(path, npz_bytes(arrays))


def read_metric_state(path: str) -> tuple[dict, dict]:
    """(header, state arrays) of a file written by ``evaluate --emit-state``."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
        header = json.loads(arrays.pop("header").tobytes())
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise InputError(f"{path}: not a calib metric state file ({exc.__class__.__name__})") from None
    if header.get("format") != STATE_FORMAT or header.get("format_version", 99) > STATE_VERSION:
        raise InputError(f"{path}: not a calib metric state file of a version this calib reads")
    return header, arrays


def merge_metric_states(states: list[tuple[dict, dict]], names: list[str]) -> dict:
    """Add up metric states (same metrics, settings and K) in the given order and compute the
    metrics of all their rows together: the same numbers as one run over every row."""
    merged = headers = None
    for (header, arrays), name in zip(states, names):
        if merged is None:
            headers = {**header, "inputs": list(header["inputs"])}
            merged = MetricSet(check_metric_keys(header["keys"]), MetricConfig(**header["config"]), int(header["k"]))
        elif (header["keys"], header["config"], header["k"]) != (headers["keys"], headers["config"], headers["k"]):
            raise InputError(f"{name}: its metrics, settings or K differ from {names[0]}'s; states cannot be merged")
        else:
            headers["n"] += header["n"]
            headers["inputs"] += header["inputs"]
        merged.absorb(arrays)
    return {"calib_version": __version__, "input": {"merged_from": headers["inputs"], "n": headers["n"], "k": headers["k"]},
            "bundle": headers["bundle"], "metrics": merged.results(), "gates": [], "passed": True}
