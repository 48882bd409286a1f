"""Predictions with an exactly known calibration error (docs/benchmarks.md, docs/metrics.md V-ECE).

C ~ Dirichlet(1) is the true conditional distribution of each row, labels y ~ C, and the model
predicts f = softmax(log C / T) (T < 1 over-confident, T > 1 under-confident). f determines C, so the
calibration errors are computed from (C, f) exactly, with no estimate.
"""

from __future__ import annotations

import numpy as np

from ..core.numerics import log_of_probs, softmax


def known_ce_data(n: int, n_classes: int, temperature: float, rng: np.random.Generator):
    """(f, labels, C): predictions, labels drawn from C, and the true probabilities C."""
    true_probs = rng.dirichlet(np.ones(n_classes), size=n)
    labels = draw_labels(true_probs, rng)
    probs = softmax(log_of_probs(true_probs) / temperature)
    return probs, labels, true_probs


def draw_labels(true_probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One label per row drawn from its distribution (inverse CDF, vectorised over rows)."""
    cumulative = true_probs.cumsum(axis=1)
    cumulative[:, -1] = np.inf  # a float sum just below 1 must not lose the last class
    return (cumulative > rng.random((len(true_probs), 1))).argmax(axis=1)


def true_calibration_errors(probs: np.ndarray, true_probs: np.ndarray) -> dict:
    """The calibration errors of f = ``probs`` whose true conditional is C = ``true_probs``.

    Multiclass (keys as the V-ECE metrics): l1 = mean ||C - f||_1, l2 = mean ||C - f||_2,
    sq = mean ||C - f||_2^2. Top class j* = argmax f: top_l1 = mean |F - C_j*|,
    over = mean (F - C_j*)_+, under = mean (C_j* - F)_+ (so over + under = top_l1).
    Binary (K = 2): l1 = l2 = mean |C_1 - f_1| and sq = mean (C_1 - f_1)^2, on class 1 only.
    """
    diff = true_probs - probs
    top = probs.argmax(axis=1)
    rows = np.arange(len(probs))
    top_gap = probs[rows, top] - true_probs[rows, top]
    out = {
        "top_l1": float(np.abs(top_gap).mean()),
        "over": float(np.maximum(top_gap, 0.0).mean()),
        "under": float(np.maximum(-top_gap, 0.0).mean()),
    }
    if probs.shape[1] == 2:
        gap = np.abs(diff[:, 1])
        out.update(l1=float(gap.mean()), l2=float(gap.mean()), sq=float((gap**2).mean()))
    else:
        out.update(
            l1=float(np.abs(diff).sum(axis=1).mean()),
            l2=float(np.sqrt((diff**2).sum(axis=1)).mean()),
            sq=float((diff**2).sum(axis=1).mean()),
        )
    return out
