"""Metrics of metrics.md as mergeable accumulators over chunks of rows."""

from .batch import Batch
from .definitions import DEFAULT_METRICS, METRICS, TRUTH_METRICS, Metric, MetricConfig, compute_value

__all__ = ["Batch", "DEFAULT_METRICS", "METRICS", "TRUTH_METRICS", "Metric", "MetricConfig", "compute_value"]
