"""Metric keys of docs/metrics.md: what each accumulates, how it is computed, and its settings.

Metrics that share an accumulator (ece, mce and debiased_ece_sq share one set of top-label bins)
share one instance: the accumulator's identity is ``(class, settings)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..numerics import PROB_FLOOR, edge_index, isotonic_fit
from . import accumulators as acc
from .smooth import GRID, smooth_ece


@dataclass(frozen=True)
class MetricConfig:
    bins: int = 15
    cmce_bins: int = 25


@dataclass(frozen=True)
class Metric:
    key: str
    summary: str
    #: (config, K) -> (identity, factory) of the accumulator it reads.
    accumulator: Callable[[MetricConfig, int], tuple[tuple, Callable[[], object]]]
    #: (accumulator, config) -> value (None when undefined, e.g. no pair in a coverage band).
    compute: Callable[[object, MetricConfig], float | None]
    #: (config, accumulator) -> the settings reported beside the value.
    settings: Callable[[MetricConfig, object], dict]
    #: True when the metric needs the true conditional probabilities (--true-probs).
    needs_truth: bool = False


def _proper(config, k):
    return ("proper",), acc.ProperScores


def _top_bins(config, k):
    return ("top", config.bins), lambda: acc.TopLabelBins(config.bins)


def _top_values(config, k):
    return ("top-values",), acc.TopLabelValues


def _classwise(config, k):
    return ("classwise", config.bins, k), lambda: acc.ClasswiseBins(config.bins, k)


def _cumulative(config, k):
    return ("cumulative", config.cmce_bins), lambda: acc.CumulativeMassBins(config.cmce_bins)


def _coverage(lo, hi):
    return lambda config, k: (("coverage", lo, hi), lambda: acc.CumulativeMassRange(lo, hi))


def _clip_settings(config, state):
    return {"prob_clip": PROB_FLOOR} if state.prob_clipped else {}


def _bins(config, state):
    return {"bins": config.bins, "scheme": "equal-width", "norm": "l1", "label": "top"}


def debiased_ece_sq(state: acc.TopLabelBins, config: MetricConfig) -> float:
    """sum_b (n_b/N) [(f_b - y_b)^2 - y_b (1 - y_b) / (n_b - 1)] over bins with n_b > 1 (Kumar et al. 2019)."""
    counter = state.counter
    keep = counter.count > 1
    n_b = counter.count[keep]
    f_b = counter.sum_pred[keep] / n_b
    y_b = counter.sum_true[keep] / n_b
    return float(np.sum(n_b / state.n * ((f_b - y_b) ** 2 - y_b * (1.0 - y_b) / (n_b - 1.0))))


def ece_quantile(state: acc.TopLabelValues, config: MetricConfig) -> float:
    """Top-label ECE with equal-mass bins: edges at the quantiles of the confidences, duplicate
    edges merged, bins [l, u) with the last one closed."""
    confidence = np.concatenate(state.confidence)
    correct = np.concatenate(state.correct)
    edges = np.unique(np.quantile(confidence, np.linspace(0.0, 1.0, config.bins + 1)))
    gaps = np.bincount(edge_index(confidence, edges), weights=correct - confidence)
    return float(np.abs(gaps).sum() / len(confidence))


def isotonic_ece(state: acc.TopLabelValues, config: MetricConfig) -> float:
    """Plug-in top-label ECE with the binning chosen by isotonic regression (V-ECE paper, estimator
    family (i)): mean |F_i - g(F_i)| with g the PAVA fit of correctness on confidence, ties in F
    pooled (the same g as the ``isotonic`` recalibrator, fitted on the evaluated rows)."""
    confidence = np.concatenate(state.confidence)
    x, level = isotonic_fit(confidence, np.concatenate(state.correct))
    return float(np.abs(confidence - level[np.searchsorted(x, confidence)]).mean())


def _smece(state: acc.TopLabelValues, config: MetricConfig) -> float:
    return smooth_ece(np.concatenate(state.confidence), np.concatenate(state.correct))[0]


def _coverage_value(state: acc.CumulativeMassRange, config: MetricConfig) -> float | None:
    return state.covered / state.count if state.count else None


_METRICS = [
    Metric("accuracy", "share of rows whose argmax is the label", _proper, lambda s, c: s.n_correct / s.n, lambda c, s: {}),
    Metric("nll", "negative log-likelihood of the label", _proper, lambda s, c: s.nll_sum / s.n, _clip_settings),
    Metric(
        "brier",
        "Brier score summed over classes",
        _proper,
        lambda s, c: s.brier_sum / s.n,
        lambda c, s: {"sum_over_classes": True},
    ),
    Metric(
        "ece",
        "top-label expected calibration error, equal-width bins",
        _top_bins,
        lambda s, c: float(s.counter.weighted_error()[0]),
        _bins,
    ),
    Metric(
        "mce", "top-label maximum calibration error over non-empty bins", _top_bins, lambda s, c: s.counter.max_error(), _bins
    ),
    Metric(
        "ece_quantile",
        "top-label ECE with equal-mass bins",
        _top_values,
        ece_quantile,
        lambda c, s: {"bins": c.bins, "scheme": "equal-mass", "norm": "l1", "label": "top"},
    ),
    Metric(
        "smece",
        "smooth ECE at its fixed-point bandwidth (Blasiok & Nakkiran 2024)",
        _top_values,
        _smece,
        lambda c, s: {"grid": GRID, "kernel": "gaussian, reflected", "bandwidth": "fixed point", "label": "top"},
    ),
    Metric(
        "isotonic_ece",
        "top-label plug-in ECE with isotonic-regression bins (V-ECE paper)",
        _top_values,
        isotonic_ece,
        lambda c, s: {"scheme": "isotonic", "norm": "l1", "label": "top"},
    ),
    Metric(
        "debiased_ece_sq",
        "debiased squared top-label ECE (Kumar et al. 2019); may be negative",
        _top_bins,
        debiased_ece_sq,
        lambda c, s: {"bins": c.bins, "scheme": "equal-width", "norm": "squared", "label": "top"},
    ),
    Metric(
        "cw_ece",
        "classwise ECE averaged over all K classes",
        _classwise,
        lambda s, c: float(np.mean(s.counter.weighted_error())),
        lambda c, s: {"bins": c.bins, "scheme": "equal-width", "norm": "l1", "label": "classwise"},
    ),
    Metric(
        "cmce",
        "cumulative mass calibration error, weighted over N*K pairs",
        _cumulative,
        lambda s, c: float(s.counter.weighted_error()[0]),
        lambda c, s: {"bins": c.cmce_bins, "scheme": "equal-width", "weighting": "weighted"},
    ),
    Metric(
        "coverage_0.9_0.92",
        "label coverage of top-k sets with mass in [0.9, 0.92]",
        _coverage(0.9, 0.92),
        _coverage_value,
        lambda c, s: {"range": [0.9, 0.92]},
    ),
    Metric(
        "coverage_0.99_0.995",
        "label coverage of top-k sets with mass in [0.99, 0.995]",
        _coverage(0.99, 0.995),
        _coverage_value,
        lambda c, s: {"range": [0.99, 0.995]},
    ),
]


def _truth(config, k):
    return ("truth",), acc.TrueProbScores


def _cpsme(index):
    return lambda s, c: float(s.cpsme_sum[index] / s.n)


_TRUTH_METRICS = [
    Metric(
        "nll_true",
        "expected NLL under the true probabilities: mean -sum_k p_k log p^_k",
        _truth,
        lambda s, c: s.nll_sum / s.n,
        lambda c, s: {"against": "true_probs"},
        needs_truth=True,
    ),
    Metric(
        "brier_true",
        "squared distance to the true probabilities: mean sum_k (p^_k - p_k)^2",
        _truth,
        lambda s, c: s.brier_sum / s.n,
        lambda c, s: {"against": "true_probs"},
        needs_truth=True,
    ),
    Metric(
        "cpsme_avg",
        "CPSME averaged over alpha = 0.05..0.5 (ATS-CP paper)",
        _truth,
        lambda s, c: float(s.cpsme_sum.mean() / s.n),
        lambda c, s: {"alphas": list(acc.CPSME_ALPHAS)},
        needs_truth=True,
    ),
] + [
    Metric(
        f"cpsme_{alpha:g}",
        f"mass error on the true {1 - alpha:g}-set of the true probabilities",
        _truth,
        _cpsme(i),
        lambda c, s, a=alpha: {"alpha": a},
        needs_truth=True,
    )
    for i, alpha in enumerate(acc.CPSME_ALPHAS)
]

METRICS: dict[str, Metric] = {m.key: m for m in _METRICS + _TRUTH_METRICS}
#: Added to the default table when the true probabilities are given.
TRUTH_METRICS = tuple(m.key for m in _TRUTH_METRICS)
#: The default table of `calib evaluate` (docs/metrics.md keys; V-ECE joins when it exists).
DEFAULT_METRICS = ("accuracy", "nll", "brier", "ece", "mce", "cw_ece", "cmce", "coverage_0.9_0.92", "coverage_0.99_0.995")


def compute_value(metric: Metric, state, config: MetricConfig) -> float | None:
    """The metric's value as a float, or None where it is undefined (never NaN in a report)."""
    value = metric.compute(state, config)
    return None if value is None or not np.isfinite(value) else float(value)


#: Metrics where a higher value is better (a name ending in "_" covers its family): the worst group
#: of one is its lowest.
HIGHER_IS_BETTER = ("accuracy", "coverage_", "set_coverage")


def higher_is_better(key: str) -> bool:
    return any(key == name or (name.endswith("_") and key.startswith(name)) for name in HIGHER_IS_BETTER)


def metric_badness(key: str, value: float | None) -> float:
    """How far a value is from ideal, for ranking methods and marking the best: the value itself
    for errors and losses, minus it where higher is better (accuracy), the distance to the band's
    middle for a coverage band (coverage_0.9_0.92 ideally lies in [0.9, 0.92])."""
    if value is None:
        return np.inf
    if key.startswith("coverage_"):
        lo, hi = (float(x) for x in key.split("_")[1:3])
        return abs(value - (lo + hi) / 2)
    return -value if higher_is_better(key) else value
