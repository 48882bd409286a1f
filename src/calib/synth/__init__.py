"""Data generators with known truth (docs/synth.md): the Gaussian grid of the CMCE paper (and the
ATS-CP paper's circle), the ATS-CP paper's contamination, predictions with an exactly known
calibration error (also at ImageNet's shape), and multi-label predictions with known per-label truth.

Torch is imported only by :mod:`calib.synth.classifier`, when a model is trained.
"""

from .contamination import class_groups, contaminate, contamination_temperatures
from .gaussian_grid import grid_centres, sample_points, true_posterior
from .known_ce import known_ce_data, true_calibration_errors
from .large_k import large_k_data, large_k_errors
from .multilabel import multilabel_data, true_label_errors

__all__ = [
    "class_groups",
    "contaminate",
    "contamination_temperatures",
    "grid_centres",
    "known_ce_data",
    "large_k_data",
    "large_k_errors",
    "multilabel_data",
    "sample_points",
    "true_calibration_errors",
    "true_label_errors",
    "true_posterior",
]
