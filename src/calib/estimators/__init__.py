"""Whole-sample calibration-error estimators (V-ECE paper): V-ECE and its in-sample variants, KDE-ECE."""

from .kde import KDE_METRICS, KDE_SUMMARIES, kde_calibration_errors
from .recalibrators import DEFAULT_RECIPE, RECALIBRATORS, RECIPES
from .variational import (
    IN_SAMPLE_METRICS,
    LOSSES,
    OUTER_FOLDS,
    VECE_METRICS,
    VECE_SUMMARIES,
    VariationalEstimate,
    variational_calibration_error,
)


def boosted_fit_count(keys, recalibrator: str, recipe: str = DEFAULT_RECIPE) -> int:
    """CatBoost models one V-ECE pass over ``keys`` trains: OUTER_FOLDS x the recipe's inner folds
    out of fold for the V-ECE keys, the inner folds in sample for the in-sample ones (0 for other
    recalibrators)."""
    if recalibrator != "ws-catboost":
        return 0
    inner = RECIPES[recipe].inner_folds
    return OUTER_FOLDS * inner * any(key in VECE_METRICS for key in keys) + inner * any(key in IN_SAMPLE_METRICS for key in keys)


#: ``calib evaluate`` keys computed on the whole (sub)sample at once rather than streamed.
SAMPLE_METRICS = {**VECE_METRICS, **IN_SAMPLE_METRICS, **KDE_METRICS}
SAMPLE_SUMMARIES = {**VECE_SUMMARIES, **KDE_SUMMARIES}

__all__ = [
    "DEFAULT_RECIPE",
    "RECIPES",
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
