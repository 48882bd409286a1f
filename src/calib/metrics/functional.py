"""One function per metric key: ``calib.metrics.ece(scores, labels)`` and so on, on arrays,
generated from the metric registry (:data:`calib.metrics.METRICS`).

``scores`` is (N, K) logits, probabilities or log-probabilities (``kind``, or detected as the
command line detects it), ``labels`` (N,) integers; both are checked as a file would be. A streamed
metric's function streams the rows through the same accumulators as ``calib evaluate``, and a
whole-sample metric's (V-ECE, KDE-ECE) scores the same seeded (sub)sample, so each value is the
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

from ..core.validation import check_true_probs
from ..errors import UsageError
from ..estimators.recalibrators import DEFAULT_RECIPE
from ..io.readers import predictions_from_arrays
from .batch import model_batch
from .definitions import METRICS, Metric, MetricConfig
from .metric_set import MetricSet
from .sample import VARIATIONAL, SampleConfig, SampledRows, sample_entries, sample_rows


def metric_value(
    key: str,
    scores,
    labels,
    *,
    kind: str = "auto",
    bins: int = 15,
    cmce_bins: int = 25,
    true_probs=None,
    sample: SampleConfig = SampleConfig(),
) -> float | None:
    """The value of one metric on arrays, as ``calib evaluate`` computes it.

    Parameters
    ----------
    key : str
        A metric key of ``calib methods``.
    scores : array_like, (N, K)
        Logits, probabilities or log-probabilities (``kind``; detected when "auto").
    labels : array_like, (N,)
        Integer labels in [0, K).
    bins, cmce_bins : int
        Equal-width bins of the binned metrics and of CMCE.
    true_probs : ndarray (N, K), optional
        The true probabilities, for the keys that need them.
    sample : SampleConfig
        The whole-sample metrics' settings (recalibrator, seed, rows, recipe).

    Returns
    -------
    float or None
        None where the metric is undefined (never NaN).
    """
    if key not in METRICS:
        raise UsageError(f"unknown metric {key!r}; choose from {', '.join(METRICS)}")
    preds = predictions_from_arrays(scores, labels, kind=kind)
    if preds.labels is None:
        raise UsageError("metrics need labels")
    if not METRICS[key].streamed:
        rows = sample_rows(preds.n, sample)
        return sample_entries([METRICS[key]], SampledRows(preds, rows), preds.labels[rows], sample, n_total=preds.n)[key]["value"]
    if true_probs is not None:
        preds.true_probs = check_true_probs(true_probs, preds.n, preds.k, "true probabilities")
    elif METRICS[key].needs_truth:
        raise UsageError(f"metric {key!r} needs the true probabilities (true_probs=)")
    metric_set = MetricSet([key], MetricConfig(bins=bins, cmce_bins=cmce_bins), preds.k)
    for rows in preds.chunks():
        metric_set.update(model_batch(preds, rows))
    return metric_set.results()[key]["value"]


def _keyed(metric: Metric):
    key = metric.key
    if metric.streamed:

        def function(scores, labels, *, kind: str = "auto", bins: int = 15, cmce_bins: int = 25, true_probs=None):
            return metric_value(key, scores, labels, kind=kind, bins=bins, cmce_bins=cmce_bins, true_probs=true_probs)

    else:

        def function(
            scores,
            labels,
            *,
            kind: str = "auto",
            recalibrator: str = "ws-catboost",
            seed: int = 0,
            max_rows: int = 20_000,
            recipe: str = DEFAULT_RECIPE,
        ):
            sample = SampleConfig(recalibrator=recalibrator, seed=seed, max_rows=max_rows, recipe=recipe)
            return metric_value(key, scores, labels, kind=kind, sample=sample)

    function.__name__ = function.__qualname__ = key
    function.__doc__ = (
        f"{metric.summary[0].upper()}{metric.summary[1:]} (metric key ``{key}``; arguments as :func:`metric_value`)."
    )
    return function


#: metric key -> its function of (scores, labels, **options), for the keys that are Python names
KEYED = {key: _keyed(metric) for key, metric in METRICS.items() if key.isidentifier()}
globals().update(KEYED)


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
    recipe: str = DEFAULT_RECIPE,
) -> dict[str, float]:
    """The V-ECE family (the V-ECE paper): {"l1", "l2", "sq", "top_l1", "over", "under"} from one
    recalibration; ``recipe`` WS-CatBoost's, a name of :data:`calib.estimators.RECIPES` (``compact-es10``,
    the default, ``compact``, the paper's ``paper``, or ``quick``)."""
    config = SampleConfig(recalibrator, seed, max_rows, recipe)
    preds = predictions_from_arrays(scores, labels, kind=kind)
    if preds.labels is None:
        raise UsageError("metrics need labels")
    rows = sample_rows(preds.n, config)
    family = [metric for metric in METRICS.values() if metric.family is VARIATIONAL]
    entries = sample_entries(family, SampledRows(preds, rows), preds.labels[rows], config, n_total=preds.n)
    return {metric.field: entries[metric.key]["value"] for metric in family}


#: metric key -> its function of (scores, labels, **options), for every key of :data:`METRICS`
FUNCTIONS = {key: KEYED.get(key, functools.partial(metric_value, key)) for key in METRICS}
