"""One function per metric key: ``calib.metrics.ece(scores, labels)`` and so on, on arrays.

``scores`` is (N, K) logits, probabilities or log-probabilities (``kind``, or detected as the
command line detects it), ``labels`` (N,) integers; both are checked as a file would be. Each
function streams the rows through the same accumulators as ``calib evaluate``, so its value is the
report's to the last bit. Keys with numbers take them as arguments: ``coverage(lo=0.9, hi=0.92)``,
``cpsme(alpha=0.1)``.

>>> import numpy as np, calib
>>> logits = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 3.0]])
>>> labels = np.array([0, 1, 1, 1])
>>> calib.metrics.accuracy(logits, labels)
0.75
>>> round(calib.metrics.ece(logits, labels, bins=2), 6)  # one bin holds all 4 rows: |3/4 - mean confidence 0.823872|
0.073872
"""

from __future__ import annotations

import functools

from ..errors import UsageError
from ..io.readers import predictions_from_arrays
from ..validation import check_true_probs
from .batch import model_batch
from .definitions import METRICS, MetricConfig
from .metric_set import MetricSet


def metric_value(
    key: str, scores, labels, *, kind: str = "auto", bins: int = 15, cmce_bins: int = 25, true_probs=None
) -> float | None:
    """The value of metric ``key`` (a key of ``calib methods``); None where it is undefined."""
    if key not in METRICS:
        raise UsageError(f"unknown metric {key!r}; choose from {', '.join(METRICS)}")
    preds = predictions_from_arrays(scores, labels, kind=kind)
    if preds.labels is None:
        raise UsageError("metrics need labels")
    if true_probs is not None:
        preds.true_probs = check_true_probs(true_probs, preds.n, preds.k, "true probabilities")
    elif METRICS[key].needs_truth:
        raise UsageError(f"metric {key!r} needs the true probabilities (true_probs=)")
    metric_set = MetricSet([key], MetricConfig(bins=bins, cmce_bins=cmce_bins), preds.k)
    for rows in preds.chunks():
        metric_set.update(model_batch(preds, rows))
    return metric_set.results()[key]["value"]


def _keyed(key: str, doc: str):
    def metric(scores, labels, *, kind: str = "auto", bins: int = 15, cmce_bins: int = 25, true_probs=None):
        return metric_value(key, scores, labels, kind=kind, bins=bins, cmce_bins=cmce_bins, true_probs=true_probs)

    metric.__name__ = metric.__qualname__ = key
    metric.__doc__ = f"{doc} (metric key ``{key}``; arguments as :func:`metric_value`)."
    return metric


accuracy = _keyed("accuracy", "Top-1 accuracy")
nll = _keyed("nll", "Mean negative log-likelihood, p clipped at 1e-12")
brier = _keyed("brier", "Brier score summed over classes")
ece = _keyed("ece", "Top-label ECE with equal-width bins")
mce = _keyed("mce", "Top-label maximum calibration error over non-empty bins")
ece_quantile = _keyed("ece_quantile", "Top-label ECE with equal-mass bins")
smece = _keyed("smece", "Smooth ECE (Blasiok & Nakkiran 2024)")
isotonic_ece = _keyed("isotonic_ece", "Top-label plug-in ECE with isotonic-regression bins")
debiased_ece_sq = _keyed("debiased_ece_sq", "Debiased squared top-label ECE (Kumar et al. 2019)")
cw_ece = _keyed("cw_ece", "Classwise ECE averaged over the K classes")
cmce = _keyed("cmce", "Cumulative mass calibration error, weighted over N x K pairs")
nll_true = _keyed("nll_true", "Expected NLL under the true probabilities")
brier_true = _keyed("brier_true", "Squared distance to the true probabilities")
cpsme_avg = _keyed("cpsme_avg", "CPSME averaged over alpha = 0.05..0.5")


def coverage(scores, labels, *, lo: float = 0.9, hi: float = 0.92, kind: str = "auto") -> float | None:
    """Label coverage of the top-k sets whose mass lies in [lo, hi] (keys ``coverage_LO_HI``)."""
    return metric_value(f"coverage_{lo:g}_{hi:g}", scores, labels, kind=kind)


def cpsme(scores, labels, *, alpha: float, true_probs, kind: str = "auto") -> float | None:
    """Mass error on the true 1 - alpha set of the true probabilities (keys ``cpsme_ALPHA``)."""
    return metric_value(f"cpsme_{alpha:g}", scores, labels, kind=kind, true_probs=true_probs)


def vece(
    scores,
    labels,
    *,
    recalibrator: str = "ws-catboost",
    seed: int = 0,
    kind: str = "auto",
    max_rows: int = 20_000,
    recipe: str = "compact",
) -> dict[str, float]:
    """The V-ECE family (the V-ECE paper): {"l1", "l2", "sq", "top_l1", "over", "under"}; ``recipe``
    WS-CatBoost's (``compact`` or the paper's, ``paper``)."""
    from ..api import vece_values  # the estimators sit above the metrics: imported on use

    return vece_values(scores, labels, recalibrator=recalibrator, seed=seed, kind=kind, max_rows=max_rows, recipe=recipe)


#: metric key -> its function of (scores, labels, **options), for every key of :data:`METRICS`
FUNCTIONS = {key: globals().get(key, functools.partial(metric_value, key)) for key in METRICS}
