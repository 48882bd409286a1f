"""Whole-sample calibration-error estimators (V-ECE paper): V-ECE and its in-sample variants, KDE-ECE."""

from .kde import KDE_METRICS, KDE_SUMMARIES, kde_calibration_errors
from .recalibrators import INNER_FOLDS, RECALIBRATORS
from .variational import (
    IN_SAMPLE_METRICS,
    LOSSES,
    OUTER_FOLDS,
    VECE_METRICS,
    VECE_SUMMARIES,
    VariationalEstimate,
    variational_calibration_error,
)


def boosted_fit_count(keys, recalibrator: str) -> int:
    """CatBoost models one V-ECE pass over ``keys`` trains: OUTER_FOLDS x INNER_FOLDS out of fold
    for the V-ECE keys, INNER_FOLDS in sample for the in-sample ones (0 for other recalibrators)."""
    if recalibrator != "ws-catboost":
        return 0
    return OUTER_FOLDS * INNER_FOLDS * any(key in VECE_METRICS for key in keys) + INNER_FOLDS * any(
        key in IN_SAMPLE_METRICS for key in keys
    )


#: ``calib evaluate`` keys computed on the whole (sub)sample at once rather than streamed.
SAMPLE_METRICS = {**VECE_METRICS, **IN_SAMPLE_METRICS, **KDE_METRICS}
SAMPLE_SUMMARIES = {**VECE_SUMMARIES, **KDE_SUMMARIES}

__all__ = [
    "INNER_FOLDS",
    "OUTER_FOLDS",
    "RECALIBRATORS",
    "boosted_fit_count",
    "IN_SAMPLE_METRICS",
    "KDE_METRICS",
    "LOSSES",
    "SAMPLE_METRICS",
    "SAMPLE_SUMMARIES",
    "VECE_METRICS",
    "VECE_SUMMARIES",
    "VariationalEstimate",
    "kde_calibration_errors",
    "variational_calibration_error",
]
