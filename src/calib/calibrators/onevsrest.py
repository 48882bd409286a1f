"""One-vs-rest baselines (paper 000 appendix F; calibrators.md): a binary map g_k per class, fitted
on (score_k, 1{y = k}), applied to every class and renormalised, p~_k = g_k / sum_j g_j (a row of all
zeros becomes uniform). A class absent from the calibration split gets the constant map at its
base rate (0), never a crash.

- ``platt``: g_k = sigma(A_k z_k + B_k) on the logit z_k; Newton on the log-loss for all K classes at
  once (a batched 2x2 system) with a tiny ridge so separable classes stay finite.
- ``isotonic``: the non-decreasing PAVA fit of 1{y = k} on p_k, interpolated between its points.
- ``hist``: 15 equal-width bins of p_k per class; an empty bin predicts the class base rate.

Outputs can hold exact zeros; their log-probabilities are floored at log(1e-12), as for inputs.
"""

from __future__ import annotations

import numpy as np

from ..bundle import State
from ..numerics import bin_index, log_of_probs, softmax
from .base import Calibrator

PLATT_RIDGE = 1e-6
PLATT_ITERATIONS = 100
PLATT_TOL = 1e-10
HIST_BINS = 15


def renormalise(scores: np.ndarray) -> np.ndarray:
    """g_k / sum_j g_j per row; rows of all zeros become uniform."""
    total = scores.sum(axis=1, keepdims=True)
    return np.where(total > 0, scores / np.where(total > 0, total, 1.0), 1.0 / scores.shape[1])


class OneVsRest(Calibrator):
    """Shared transform: class maps -> renormalised probabilities -> floored logs."""

    def class_maps(self, logits: np.ndarray) -> np.ndarray:  # (N, K) values of g_k
        raise TypeError("subclasses define class_maps")

    def transform_probs_with_info(self, logits, features=None):
        return renormalise(self.class_maps(np.asarray(logits, dtype=np.float64))), {}

    def transform(self, logits, features=None):
        return log_of_probs(self.transform_probs_with_info(logits)[0])


class Platt(OneVsRest):
    name = "platt"
    summary = "Platt scaling one-vs-rest: sigma(A z_k + B) per class, renormalised"

    def fit(self, logits, labels, *, seed=0, features=None):
        z = np.asarray(logits, dtype=np.float64)
        n, k = z.shape
        target = (labels[:, None] == np.arange(k)[None, :]).astype(np.float64)
        rate = np.clip(target.mean(axis=0), 1.0 / (n + 1), n / (n + 1))
        a, b = np.zeros(k), np.log(rate / (1.0 - rate))  # start: the constant base-rate map
        loss = _platt_loss(a, b, z, target)
        for _ in range(PLATT_ITERATIONS):
            p = _sigmoid(a * z + b)
            w = p * (1.0 - p)
            residual = p - target
            # gradient and Hessian of the mean log-loss (+ ridge) in (A, B), every class at once
            g_a = (residual * z).mean(axis=0) + PLATT_RIDGE * a
            g_b = residual.mean(axis=0) + PLATT_RIDGE * b
            h_aa = (w * z * z).mean(axis=0) + PLATT_RIDGE
            h_ab = (w * z).mean(axis=0)
            h_bb = w.mean(axis=0) + PLATT_RIDGE
            det = h_aa * h_bb - h_ab**2
            step_a = (h_bb * g_a - h_ab * g_b) / det
            step_b = (h_aa * g_b - h_ab * g_a) / det
            # backtracking per class: halve the Newton step until the loss does not rise
            scale = np.ones(k)
            for _ in range(30):
                trial = _platt_loss(a - scale * step_a, b - scale * step_b, z, target)
                worse = trial > loss + 1e-15
                if not worse.any():
                    break
                scale = np.where(worse, scale / 2, scale)
            a, b, loss = a - scale * step_a, b - scale * step_b, trial
            if max(np.abs(scale * step_a).max(), np.abs(scale * step_b).max()) < PLATT_TOL:
                break
        present = target.sum(axis=0) > 0
        self.slope_ = np.where(present, a, 0.0)
        self.intercept_ = np.where(present, b, -np.inf)  # absent class: the constant 0 map
        return self

    def class_maps(self, logits):
        return _sigmoid(self.slope_ * logits + self.intercept_)

    def fit_report(self):
        return {"classes fitted": int(np.isfinite(self.intercept_).sum()), "mean slope": float(self.slope_.mean())}

    def to_state(self):
        return State(arrays={"slope": self.slope_, "intercept": self.intercept_})

    @classmethod
    def from_state(cls, options, state):
        calibrator = cls(options)
        calibrator.slope_, calibrator.intercept_ = state.arrays["slope"], state.arrays["intercept"]
        return calibrator


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _platt_loss(a, b, z, target):
    """Mean log-loss per class of sigma(a z + b), plus the ridge; log(1 + e^x) computed stably."""
    x = a * z + b
    softplus = np.logaddexp(0.0, x)
    return (softplus - target * x).mean(axis=0) + 0.5 * PLATT_RIDGE * (a**2 + b**2)


class Isotonic(OneVsRest):
    name = "isotonic"
    summary = "isotonic regression one-vs-rest: non-decreasing map of p_k per class, renormalised"

    def fit(self, logits, labels, *, seed=0, features=None):
        from scipy.optimize import isotonic_regression

        probs = softmax(logits)
        knots_x, knots_y, offsets = [], [], [0]
        for k in range(probs.shape[1]):  # a loop over classes, each fit vectorised over rows
            order = np.argsort(probs[:, k], kind="stable")
            x = probs[order, k]
            y = np.clip(isotonic_regression((labels[order] == k).astype(np.float64)).x, 0.0, 1.0)
            # keep one point per distinct x (the mean of the fit there) so np.interp is well defined
            unique_x, start = np.unique(x, return_index=True)
            counts = np.diff(np.append(start, len(x)))
            knots_x.append(unique_x)
            knots_y.append(np.add.reduceat(y, start) / counts)
            offsets.append(offsets[-1] + len(unique_x))
        self.knots_x_, self.knots_y_ = np.concatenate(knots_x), np.concatenate(knots_y)
        self.offsets_ = np.array(offsets)
        return self

    def class_maps(self, logits):
        probs = softmax(logits)
        out = np.empty_like(probs)
        for k in range(probs.shape[1]):
            piece = slice(self.offsets_[k], self.offsets_[k + 1])
            out[:, k] = np.interp(probs[:, k], self.knots_x_[piece], self.knots_y_[piece])
        return out

    def fit_report(self):
        return {"knots": int(len(self.knots_x_))}

    def to_state(self):
        return State(arrays={"knots_x": self.knots_x_, "knots_y": self.knots_y_, "offsets": self.offsets_})

    @classmethod
    def from_state(cls, options, state):
        calibrator = cls(options)
        calibrator.knots_x_, calibrator.knots_y_ = state.arrays["knots_x"], state.arrays["knots_y"]
        calibrator.offsets_ = state.arrays["offsets"]
        return calibrator


class HistogramBinning(OneVsRest):
    name = "hist"
    summary = "histogram binning one-vs-rest: 15 equal-width bins of p_k per class, renormalised"

    def fit(self, logits, labels, *, seed=0, features=None):
        probs = softmax(logits)
        n, k = probs.shape
        index = bin_index(probs, HIST_BINS) + np.arange(k)[None, :] * HIST_BINS
        counts = np.bincount(index.ravel(), minlength=k * HIST_BINS).reshape(k, HIST_BINS)
        hits = np.bincount(index[np.arange(n), labels], minlength=k * HIST_BINS).reshape(k, HIST_BINS)
        base_rate = np.bincount(labels, minlength=k) / n
        self.values_ = np.where(counts > 0, hits / np.maximum(counts, 1), base_rate[:, None])
        return self

    def class_maps(self, logits):
        probs = softmax(logits)
        return self.values_[np.arange(probs.shape[1])[None, :], bin_index(probs, HIST_BINS)]

    def to_state(self):
        return State(arrays={"values": self.values_})

    @classmethod
    def from_state(cls, options, state):
        calibrator = cls(options)
        calibrator.values_ = state.arrays["values"]
        return calibrator
