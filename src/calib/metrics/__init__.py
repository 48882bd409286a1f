"""Metrics: mergeable accumulators over chunks of rows (definitions, batch, metric_set) and one
function per metric key on arrays (functional: ``calib.metrics.ece(scores, labels)``)."""

from .batch import Batch
from .definitions import DEFAULT_METRICS, METRICS, TRUTH_METRICS, Metric, MetricConfig, compute_value
from .functional import (
    FUNCTIONS,
    accuracy,
    brier,
    brier_true,
    cmce,
    coverage,
    cpsme,
    cpsme_avg,
    cw_ece,
    debiased_ece_sq,
    ece,
    ece_quantile,
    isotonic_ece,
    mce,
    metric_value,
    nll,
    nll_true,
    smece,
    vece,
)

__all__ = ["Batch", "DEFAULT_METRICS", "FUNCTIONS", "METRICS", "TRUTH_METRICS", "Metric", "MetricConfig", "accuracy",
           "brier", "brier_true", "cmce", "compute_value", "coverage", "cpsme", "cpsme_avg", "cw_ece", "debiased_ece_sq",
           "ece", "ece_quantile", "isotonic_ece", "mce", "metric_value", "nll", "nll_true", "smece", "vece"]
