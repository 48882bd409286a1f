"""Smooth ECE (Blasiok & Nakkiran 2024; docs/metrics.md), top-label confidence against correctness.

Residuals y_i - f_i are placed on a G = 1024-point grid of [0, 1] at f_i (linear interpolation
between the two nearest grid points), smoothed with a Gaussian kernel of width sigma reflected at 0
and 1, and smECE_sigma = integral |smoothed residual| / integral smoothed density (= (1/N) integral
|smoothed residual| up to the discretisation; the normalisation relplot uses). The reported value is the fixed
point sigma* = smECE_{sigma*}, found by bisection on log sigma (smECE_sigma decreases in sigma).
"""

from __future__ import annotations

import numpy as np

GRID = 1024
SIGMA_MIN = 1e-3
BISECTION_STEPS = 40


def grid_mass(values: np.ndarray, weights: np.ndarray, grid: int = GRID) -> np.ndarray:
    """sum of ``weights`` placed at ``values`` in [0, 1], split linearly between neighbouring grid points."""
    position = np.clip(values, 0.0, 1.0) * (grid - 1)
    left = np.minimum(position.astype(np.intp), grid - 2)
    right_share = position - left
    return np.bincount(left, weights * (1.0 - right_share), minlength=grid) + np.bincount(
        left + 1, weights * right_share, minlength=grid
    )


def _smooth(mass: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian smoothing of gridded mass, reflected at 0 and 1 (the kernel sampled at the grid)."""
    grid = len(mass)
    extended = np.concatenate([mass[1:][::-1], mass, mass[:-1][::-1]])
    offsets = np.arange(-(grid - 1), grid) / (grid - 1)
    kernel = np.exp(-0.5 * (offsets / sigma) ** 2)
    # "valid" convolution by FFT: O(G log G) per bandwidth instead of np.convolve's O(G^2)
    size = 1 << int(len(extended) + len(kernel) - 2).bit_length()
    full = np.fft.irfft(np.fft.rfft(extended, size) * np.fft.rfft(kernel, size), size)
    return full[len(kernel) - 1 : len(extended)]


def smooth_ece_at(mass: np.ndarray, density_mass: np.ndarray, sigma: float) -> float:
    """smECE_sigma: integral |smoothed residual| / integral smoothed density, both as sums over the
    grid (the normalisation of relplot; it equals (1/N) integral |.| up to the discretisation)."""
    return float(np.abs(_smooth(mass, sigma)).sum() / _smooth(density_mass, sigma).sum())


def smooth_ece(confidence: np.ndarray, correct: np.ndarray) -> tuple[float, float]:
    """(smECE, sigma*) at the fixed point sigma* = smECE_{sigma*}."""
    mass = grid_mass(confidence, correct.astype(np.float64) - confidence)
    density = grid_mass(confidence, np.ones(len(confidence)))
    gap = lambda sigma: smooth_ece_at(mass, density, sigma) - sigma  # noqa: E731  decreasing in sigma
    lo, hi = np.log(SIGMA_MIN), 0.0
    if gap(SIGMA_MIN) <= 0:
        return smooth_ece_at(mass, density, SIGMA_MIN), SIGMA_MIN
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if gap(np.exp(mid)) > 0:
            lo = mid
        else:
            hi = mid
    sigma = float(np.exp(hi))
    return smooth_ece_at(mass, density, sigma), sigma
