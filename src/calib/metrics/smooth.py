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


class Smoother:
    """Gaussian smoothing of gridded residual mass and density mass at any width sigma, reflected at
    0 and 1 (the kernel sampled at the grid), as a "valid" convolution by FFT: O(G log G) per width
    instead of np.convolve's O(G^2). The spectra of the two reflected masses are taken once; each
    width adds the kernel's spectrum and one inverse transform of both."""

    def __init__(self, mass: np.ndarray, density_mass: np.ndarray):
        grid = len(mass)
        extended = np.stack([np.concatenate([m[1:][::-1], m, m[:-1][::-1]]) for m in (mass, density_mass)])
        self.offsets = np.arange(-(grid - 1), grid) / (grid - 1)
        self.width = extended.shape[1]
        self.size = 1 << int(self.width + len(self.offsets) - 2).bit_length()
        self.spectra = np.fft.rfft(extended, self.size)

    def smoothed(self, sigma: float) -> np.ndarray:
        """(2, G): the smoothed residual mass and the smoothed density."""
        kernel = np.exp(-0.5 * (self.offsets / sigma) ** 2)
        full = np.fft.irfft(self.spectra * np.fft.rfft(kernel, self.size), self.size)
        return full[:, len(kernel) - 1 : self.width]

    def smooth_ece_at(self, sigma: float) -> float:
        """smECE_sigma: integral |smoothed residual| / integral smoothed density, both as sums over
        the grid (the normalisation of relplot; it equals (1/N) integral |.| up to the discretisation)."""
        residual, density = self.smoothed(sigma)
        return float(np.abs(residual).sum() / density.sum())


def smooth_ece_at(mass: np.ndarray, density_mass: np.ndarray, sigma: float) -> float:
    """smECE_sigma of gridded residual and density masses (:meth:`Smoother.smooth_ece_at`)."""
    return Smoother(mass, density_mass).smooth_ece_at(sigma)


def smooth_ece(confidence: np.ndarray, correct: np.ndarray) -> tuple[float, float]:
    """(smECE, sigma*) at the fixed point sigma* = smECE_{sigma*}."""
    smoother = Smoother(
        grid_mass(confidence, correct.astype(np.float64) - confidence), grid_mass(confidence, np.ones(len(confidence)))
    )
    gap = lambda sigma: smoother.smooth_ece_at(sigma) - sigma  # noqa: E731  decreasing in sigma
    lo, hi = np.log(SIGMA_MIN), 0.0
    if gap(SIGMA_MIN) <= 0:
        return smoother.smooth_ece_at(SIGMA_MIN), SIGMA_MIN
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if gap(np.exp(mid)) > 0:
            lo = mid
        else:
            hi = mid
    sigma = float(np.exp(hi))
    return smoother.smooth_ece_at(sigma), sigma
