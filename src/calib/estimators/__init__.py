"""Estimators that fit something to measure calibration (V-ECE); they sit above calibrators/."""

from .variational import LOSSES, VECE_METRICS, VECE_SUMMARIES, VariationalEstimate, variational_calibration_error

__all__ = ["LOSSES", "VECE_METRICS", "VECE_SUMMARIES", "VariationalEstimate", "variational_calibration_error"]
