"""Metrics: the registry of metric keys (definitions: streamed ones read mergeable accumulators over
chunks of rows, whole-sample ones an estimate on one sample, sample) and one function per metric key
on arrays, generated from it (functional: ``calib.metrics.ece(scores, labels)``)."""

from .batch import Batch
from .definitions import (
    BINARY_METRICS,
    DEFAULT_METRICS,
    LABEL_PAIR_METRICS,
    METRICS,
    TRUTH_METRICS,
    VECE_METRICS,
    Metric,
    MetricConfig,
    check_metric_keys,
    compute_value,
)
from .functional import FUNCTIONS, KEYED, coverage, cpsme, metric_value, vece

globals().update(KEYED)

__all__ = [
    "BINARY_METRICS",
    "Batch",
    "DEFAULT_METRICS",
    "FUNCTIONS",
    "METRICS",
    "LABEL_PAIR_METRICS",
    "TRUTH_METRICS",
    "VECE_METRICS",
    "Metric",
    "MetricConfig",
    "check_metric_keys",
    "compute_value",
    "coverage",
    "cpsme",
    "metric_value",
    "vece",
    *KEYED,
]
