"""Whole-sample calibration-error estimators (V-ECE paper): V-ECE and its in-sample variants, KDE-ECE.
Their metric keys are entries of the metric registry (calib.metrics)."""

from .kde import kde_calibration_errors
from .recalibrators import DEFAULT_RECIPE, RECALIBRATORS, RECIPES
from .variational import LOSSES, OUTER_FOLDS, VariationalEstimate, variational_calibration_error

__all__ = [
    "DEFAULT_RECIPE",
    "RECIPES",
    "OUTER_FOLDS",
    "RECALIBRATORS",
    "LOSSES",
    "VariationalEstimate",
    "kde_calibration_errors",
    "variational_calibration_error",
]
