"""Whole-sample calibration-error estimators (paper 003): V-ECE and its in-sample variants, KDE-ECE."""

from .kde import KDE_METRICS, KDE_SUMMARIES, kde_calibration_errors
from .variational import (
                          IN_SAMPLE_METRICS,
                          LOSSES,
                          VECE_METRICS,
                          VECE_SUMMARIES,
                          VariationalEstimate,
                          variational_calibration_error,
)

#: ``calib evaluate`` keys computed on the whole (sub)sample at once rather than streamed.
SAMPLE_METRICS = {**VECE_METRICS, **IN_SAMPLE_METRICS, **KDE_METRICS}
SAMPLE_SUMMARIES = {**VECE_SUMMARIES, **KDE_SUMMARIES}

__all__ = ["IN_SAMPLE_METRICS", "KDE_METRICS", "LOSSES", "SAMPLE_METRICS", "SAMPLE_SUMMARIES", "VECE_METRICS",
           "VECE_SUMMARIES", "VariationalEstimate", "kde_calibration_errors", "variational_calibration_error"]
