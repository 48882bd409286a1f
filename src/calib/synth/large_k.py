"""Predictions at ImageNet's shape with known true probabilities (docs/synth.md): many classes
(1,000 by default), a true distribution per row that is confident about one class, and a model
that ranks the classes as the truth does but is over-confident, as deep networks are (Guo et al.
2017).

Row i: u_i ~ N(0, 3^2)^K; one class c_i, drawn uniformly, gets u_ic += m_i with m_i ~ N(13.5, 2^2);
the true probabilities are C_i = softmax(u_i) and the label y_i ~ C_i; the model's logits are
z_i = u_i / T (T < 1: over-confident). The defaults give the shape of a ResNet-50 on ImageNet's
validation set: top-1 accuracy 0.75 at K = 1,000, the rest of a row's mass on a few confusable
classes (split-conformal msp sets of 4.5 classes at alpha 0.1), and at T = 0.9 a top-label
calibration error of 0.037. Since z determines C (C = softmax(T z)), every calibration error of
softmax(z) is known exactly from (C, z) (:func:`calib.synth.known_ce.true_calibration_errors`),
and temperature scaling at 1 / T recovers the truth.
"""

from __future__ import annotations

import numpy as np

from ..core.numerics import row_chunks, softmax
from .known_ce import draw_labels, true_calibration_errors

#: The other classes' logits' spread, the true class's lift and the lift's spread over rows.
NOISE_SD, MARGIN, SPREAD = 3.0, 13.5, 2.0


def large_k_data(n: int, n_classes: int, temperature: float, rng: np.random.Generator):
    """(logits z as float32, labels, true probabilities C as float32): the model's logits z = u / T
    and C = softmax(u) as the file holds them (z rounded to float32 and C = softmax(T z) of the
    rounded z, so the truth is exact for the written logits); rows made a chunk at a time."""
    logits = np.empty((n, n_classes), dtype=np.float32)
    true_probs = np.empty((n, n_classes), dtype=np.float32)
    labels = np.empty(n, dtype=np.int64)
    for rows in row_chunks(n, n_classes):
        count = rows.stop - rows.start
        u = rng.standard_normal((count, n_classes)) * NOISE_SD
        u[np.arange(count), rng.integers(0, n_classes, count)] += rng.normal(MARGIN, SPREAD, count)
        z = (u / temperature).astype(np.float32)
        truth = softmax(temperature * z.astype(np.float64))
        logits[rows], true_probs[rows] = z, truth
        labels[rows] = draw_labels(truth, rng)
    return logits, labels, true_probs


def large_k_errors(logits: np.ndarray, true_probs: np.ndarray) -> dict:
    """The exact calibration errors of softmax(``logits``) whose true probabilities are
    ``true_probs`` (renormalised in float64, as written), computed a chunk of rows at a time: each
    error is a mean over rows, so the chunks' means weighted by their rows give it."""
    n = len(logits)
    totals: dict = {}
    for rows in row_chunks(*logits.shape):
        truth = true_probs[rows].astype(np.float64)
        errors = true_calibration_errors(softmax(logits[rows].astype(np.float64)), truth / truth.sum(axis=1, keepdims=True))
        for key, value in errors.items():
            totals[key] = totals.get(key, 0.0) + value * (rows.stop - rows.start) / n
    return totals
