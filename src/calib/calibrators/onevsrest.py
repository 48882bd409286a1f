"""One-vs-rest baselines (CMCE paper appendix F; docs/calibrators.md): a binary map g_k per class, fitted
on (score_k, 1{y = k}), applied to every class and renormalised, p~_k = g_k / sum_j g_j (a row of all
zeros becomes uniform). A binary model (K = 2) is calibrated as binary calibrators are (scikit-learn's
CalibratedClassifierCV, Platt's and Zadrozny and Elkan's maps): p~_1 = g_1(score_1), p~_0 = 1 - p~_1. The scores are the probabilities as the input gives them (softmax of the
logits for logit inputs): probability inputs reach the maps unchanged, so equal p_k in different rows
stay ties and a value on a bin edge stays on it.

A class absent from the calibration rows has no map to fit: by default (``absent="keep"``) its
probability is the model's own, p~_k proportional to p_k, renormalised with the others; with
``absent="base-rate"`` it gets the constant map at its base rate, 0 (docs/calibrators.md has the
measurement that made "keep" the default).

- ``platt``: g_k = sigma(A_k z_k + B_k) on the logit z_k; ``quadratic``: logistic on (z_k, z_k^2, 1);
  ``beta``: logistic on (log p_k, -log(1 - p_k), 1). All fitted by Newton on the log-loss for all K
  classes at once (a batched d x d system) with a tiny ridge so separable classes stay finite.
- ``isotonic``: the non-decreasing fit of 1{y = k} on p_k (ties pooled, then PAVA:
  :func:`calib.core.numerics.isotonic_fit`), interpolated between its points.
- ``hist``: 15 equal-width bins of p_k per class; an empty bin predicts the class base rate.

Outputs can hold exact zeros; their log-probabilities are floored at log(1e-12), as for inputs.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar

import numpy as np

from ..bundle import State
from ..core.numerics import PROB_FLOOR, bin_index, isotonic_fit, log_of_probs, softmax
from .base import Calibrator, absent_classes

#: What a one-vs-rest method does with a class absent from the calibration rows.
ABSENT_CLASS_RULES = ("keep", "base-rate")


@dataclasses.dataclass(frozen=True)
class OneVsRestOptions:
    """``absent``: keep (the model's probability, renormalised) or base-rate (the constant 0 map)."""

    absent: str = "keep"

    def __post_init__(self):
        if self.absent not in ABSENT_CLASS_RULES:
            raise ValueError(f"'absent' must be one of {', '.join(ABSENT_CLASS_RULES)}; got {self.absent!r}")


#: Fewer calibration rows per class than this (the median over classes) make the maps fitted per
#: class point by point (isotonic, histogram binning, Venn-Abers) noisy enough to raise the ECE they
#: should lower. Measured on CIFAR-100 (validation rows to fit, test rows to score; ECE 0.079
#: uncalibrated): venn-abers 0.043 at 50 rows per class, 0.090 at 20, 0.167 at 10; isotonic 0.060,
#: 0.074, 0.086; beta and Platt, two or three weights a class, 0.055-0.086 throughout.
MIN_ROWS_PER_CLASS = 30
LOGISTIC_RIDGE = 1e-6
MAX_NEWTON_STEPS = 100
NEWTON_STEP_TOL = 1e-10
HIST_BINS = 15


def renormalise(scores: np.ndarray) -> np.ndarray:
    """g_k / sum_j g_j per row; rows of all zeros become uniform."""
    total = scores.sum(axis=1, keepdims=True)
    return np.where(total > 0, scores / np.where(total > 0, total, 1.0), 1.0 / scores.shape[1])


class OneVsRest(Calibrator):
    """Shared transform: class maps of the probabilities as given -> renormalised probabilities ->
    floored logs. Subclasses fit the maps in :meth:`fit_maps`."""

    Options = OneVsRestOptions
    scores_given_probs = True

    @property
    def absent_class_effect(self) -> str:
        if self.options.absent == "keep":
            return "their probabilities are kept as the model gave them, renormalised with the calibrated classes"
        return "they get the constant map at their base rate, probability 0 (absent=base-rate)"

    def softmax_only(self):
        return True  # maps of p_k (Platt and quadratic scaling, maps of z_k, say otherwise)

    #: The maps are fitted point by point per class (no parametric form): noisy on few rows a class.
    pointwise: ClassVar[bool] = False

    def fit(self, logits, labels, *, seed=0, features=None, probs=None):
        logits = np.asarray(logits, dtype=np.float64)
        self.absent_classes_ = absent_classes(labels, logits.shape[1])
        self.rows_per_class_ = float(np.median(np.bincount(np.asarray(labels, dtype=np.int64), minlength=logits.shape[1])))
        self.fit_maps(logits, _model_probs(logits, probs), labels, given=probs is not None)
        return self

    @abc.abstractmethod
    def fit_maps(self, logits: np.ndarray, probs: np.ndarray, labels: np.ndarray, *, given: bool) -> None:
        """Fit g_k of every class from the (N, K) ``logits`` and ``probs`` of the calibration rows;
        ``given``: ``probs`` are the input's own (the same bits on every kernel path), else the
        softmax of the logits."""

    @abc.abstractmethod
    def class_maps(self, logits: np.ndarray, probs: np.ndarray, *, given: bool) -> np.ndarray:
        """(N, K): g_k applied to every class of every row, before renormalising (``given`` as for
        :meth:`fit_maps`)."""

    def warnings(self):
        rows = getattr(self, "rows_per_class_", None)  # a bundle keeps the warning in its fit report
        if not self.pointwise or rows is None or rows >= MIN_ROWS_PER_CLASS or self.n_maps() <= 2:
            return []
        return [
            f"{self.name} fits one map per class point by point, here on a median of {rows:g} calibration rows a class "
            f"(under {MIN_ROWS_PER_CLASS}): such maps can raise the ECE they should lower (on CIFAR-100 venn-abers "
            "went from 0.079 to 0.090 at 20 rows a class and 0.167 at 10); ts, beta or dirichlet pool the classes"
        ]

    def transform_probs_with_info(self, logits, features=None, probs=None):
        logits = np.asarray(logits, dtype=np.float64)
        given = probs is not None
        probs = _model_probs(logits, probs)
        maps = self.class_maps(logits, probs, given=given)
        if self.absent_classes_:
            absent = list(self.absent_classes_)
            maps[:, absent] = probs[:, absent] if self.options.absent == "keep" else 0.0
        if maps.shape[1] == 2:  # a binary model: the positive class's map, P(y = 0) its complement
            return np.column_stack([1.0 - maps[:, 1], maps[:, 1]]), {}
        return renormalise(maps), {}

    def transform(self, logits, features=None, probs=None):
        return log_of_probs(self.transform_probs_with_info(logits, probs=probs)[0])

    @abc.abstractmethod
    def onnx_class_maps(self, graph, logits: str, probs: str, *, given: bool) -> str:
        """:meth:`class_maps` in an ONNX graph (:mod:`calib.onnx_export`)."""

    def onnx_outputs(self, graph, inputs):
        """:meth:`transform_probs_with_info` in an ONNX graph: the class maps, the absent classes'
        columns replaced, the rows renormalised (a row of zeros uniform)."""
        probs = graph.model_probs(inputs)
        maps = self.onnx_class_maps(graph, inputs.logits, probs, given=inputs.probs is not None)
        k = self.n_maps()
        if self.absent_classes_:
            absent = np.zeros((1, k), dtype=bool)
            absent[0, list(self.absent_classes_)] = True
            kept = probs if self.options.absent == "keep" else graph.const(0.0)
            maps = graph.where(graph.const(absent, bool), kept, maps)
        if k == 2:  # a binary model: the positive class's map, P(y = 0) its complement
            positive = graph.column(maps, 1)
            return {"probs": graph.op("Concat", graph.op("Sub", graph.const(1.0), positive), positive, axis=1)}
        total = graph.row_sum(maps)
        positive = graph.op("Greater", total, graph.const(0.0))
        scaled = graph.op("Div", maps, graph.where(positive, total, graph.const(1.0)))
        return {"probs": graph.where(positive, scaled, graph.const(1.0 / k))}

    @abc.abstractmethod
    def n_maps(self) -> int:
        """K, the number of fitted class maps."""


def _model_probs(logits: np.ndarray, probs: np.ndarray | None) -> np.ndarray:
    """The model's probabilities: as the input gives them, else the softmax of the logits."""
    return softmax(logits) if probs is None else np.asarray(probs, dtype=np.float64)


def fit_logistic(phi: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Weights (K, d) of sigma(w_k . phi_k) minimising the mean log-loss of each of the K columns of
    ``target`` (+ a tiny ridge): Newton for all K at once (a stack of K d x d systems) with
    per-column backtracking so the loss never rises, started at the constant base-rate map.
    ``phi`` is (N, K, d) and its last feature is the constant 1."""
    n, k, d = phi.shape
    rate = np.clip(target.mean(axis=0), 1.0 / (n + 1), n / (n + 1))
    weights = np.zeros((k, d))
    weights[:, -1] = np.log(rate / (1.0 - rate))
    loss = _logistic_loss(weights, phi, target)
    for _ in range(MAX_NEWTON_STEPS):
        p = sigmoid(np.einsum("nkd,kd->nk", phi, weights))
        gradient = np.einsum("nk,nkd->kd", p - target, phi) / n + LOGISTIC_RIDGE * weights
        hessian = np.einsum("nk,nkd,nke->kde", p * (1.0 - p), phi, phi) / n + LOGISTIC_RIDGE * np.eye(d)
        step = np.linalg.solve(hessian, gradient[:, :, None])[:, :, 0]
        scale = np.ones(k)
        for _ in range(30):  # backtracking per class: halve the step until the loss does not rise
            trial = _logistic_loss(weights - scale[:, None] * step, phi, target)
            worse = trial > loss + 1e-15
            if not worse.any():
                break
            scale = np.where(worse, scale / 2, scale)
        weights, loss = weights - scale[:, None] * step, trial
        if np.abs(scale[:, None] * step).max() < NEWTON_STEP_TOL:
            break
    return weights


class LogisticOneVsRest(OneVsRest):
    """g_k = sigma(w_k . phi(x)_k) per class, phi a few features of the class score, fitted by
    :func:`fit_logistic`. Subclasses name the features."""

    @abc.abstractmethod
    def features(self, logits: np.ndarray, probs: np.ndarray, given: bool) -> np.ndarray:
        """(N, K, d): the features of each class score; the last one is the constant 1."""

    def fit_maps(self, logits, probs, labels, *, given):
        phi = self.features(logits, probs, given)
        target = (labels[:, None] == np.arange(phi.shape[1])[None, :]).astype(np.float64)
        self.weights_ = fit_logistic(phi, target)

    def class_maps(self, logits, probs, *, given):
        return sigmoid(np.einsum("nkd,kd->nk", self.features(logits, probs, given), self.weights_))

    @abc.abstractmethod
    def onnx_features(self, graph, logits: str, probs: str, given: bool) -> list[str]:
        """:meth:`features` in an ONNX graph: the d (N, K) feature tensors, the constant 1 last."""

    def onnx_class_maps(self, graph, logits, probs, *, given):
        """sigma(sum_d w_kd phi_d) with the d features as separate (N, K) tensors."""
        features = self.onnx_features(graph, logits, probs, given)
        total = graph.op("Mul", features[0], graph.const(self.weights_[None, :, 0]))
        for d, feature in enumerate(features[1:-1], start=1):
            total = graph.op("Add", total, graph.op("Mul", feature, graph.const(self.weights_[None, :, d])))
        return graph.sigmoid(graph.op("Add", total, graph.const(self.weights_[None, :, -1])))

    def n_maps(self):
        return int(self.weights_.shape[0])

    def fit_report(self):
        return {
            "classes fitted": int(self.weights_.shape[0] - len(self.absent_classes_)),
            "mean weights": [round(float(w), 4) for w in self.weights_.mean(axis=0)],
        }

    def to_state(self):
        return State(arrays={"weights": self.weights_})

    @classmethod
    def from_state(cls, options, state):
        calibrator = cls(options)
        calibrator.weights_ = state.arrays["weights"]
        return calibrator


class Platt(LogisticOneVsRest):
    name = "platt"
    summary = "Platt scaling one-vs-rest: sigma(A z_k + B) per class, renormalised"

    def softmax_only(self):
        return False  # sigma(A z_k + B) of the raw logit

    def features(self, logits, probs, given):
        return np.stack([logits, np.ones_like(logits)], axis=2)

    def onnx_features(self, graph, logits, probs, given):
        return [logits, None]


class Quadratic(LogisticOneVsRest):
    name = "quadratic"
    summary = "quadratic scaling one-vs-rest: logistic on z_k, z_k^2 and 1 per class, renormalised"

    def softmax_only(self):
        return False  # logistic on the raw logit and its square

    def features(self, logits, probs, given):
        return quadratic_features(logits)

    def onnx_features(self, graph, logits, probs, given):
        return [logits, graph.op("Mul", logits, logits), None]


class Beta(LogisticOneVsRest):
    name = "beta"
    summary = "beta calibration one-vs-rest: logistic on log p_k, -log(1 - p_k) and 1 (Kull et al. 2017)"

    def features(self, logits, probs, given):
        return beta_features(probs, None if given else logits)

    def onnx_features(self, graph, logits, probs, given):
        """log p and -log(1 - p) of p clipped to [1e-12, 1 - 1e-12], as :func:`beta_features`
        computes them: log(1 - p) for log1p (ONNX has no log1p; for p <= 1/2 the two differ by at
        most 1e-16 in absolute terms), and for logit inputs 1 - p of a probability above 1/2 as the
        sum of the row's other weights over their total."""
        clipped = graph.op("Clip", probs, graph.const(PROB_FLOOR), graph.const(1.0 - PROB_FLOOR))
        complement = graph.op("Sub", graph.const(1.0), clipped)
        if not given:
            weights = graph.op("Exp", graph.op("Sub", logits, graph.row_max(logits)))
            top = graph.op("Greater", probs, graph.const(0.5))
            others = graph.row_sum(graph.where(top, graph.const(0.0), weights))
            from_others = graph.op("Div", others, graph.row_sum(weights))
            complement = graph.where(top, graph.op("Max", from_others, graph.const(PROB_FLOOR)), complement)
        return [graph.op("Log", clipped), graph.op("Neg", graph.op("Log", complement)), None]


def quadratic_features(z: np.ndarray) -> np.ndarray:
    """(z, z^2, 1) of each logit: quadratic scaling's inputs."""
    return np.stack([z, z**2, np.ones_like(z)], axis=2)


def beta_features(probs: np.ndarray, logits: np.ndarray | None = None) -> np.ndarray:
    """(log p, -log(1 - p), 1) of each probability, clipped to [1e-12, 1 - 1e-12]: beta calibration's
    inputs. With the ``logits`` that ``probs`` is the softmax of, 1 - p of a probability above 1/2
    (a row's top class) is computed where it is small, as sum_{j != k} w_j / sum_j w_j with w = e^(z -
    max z): 1 - p from the rounded p would carry p's rounding of 1.1e-16, relative 1e-4 at
    1 - p = 1e-12. For probabilities as given, 1 - p is exact (the input's own number)."""
    clipped = np.clip(probs, PROB_FLOOR, 1.0 - PROB_FLOOR)
    log_complement = np.log1p(-clipped)
    if logits is not None:
        weights = np.exp(logits - logits.max(axis=1, keepdims=True))
        top = probs > 0.5
        others = np.where(top, 0.0, weights).sum(axis=1, keepdims=True) / weights.sum(axis=1, keepdims=True)
        log_complement = np.where(top, np.log(np.maximum(others, PROB_FLOOR)), log_complement)
    return np.stack([np.log(clipped), -log_complement, np.ones_like(probs)], axis=2)


def sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _logistic_loss(weights, phi, target):
    """Mean log-loss per class of sigma(w_k . phi), plus the ridge; log(1 + e^x) computed stably."""
    x = np.einsum("nkd,kd->nk", phi, weights)
    return (np.logaddexp(0.0, x) - target * x).mean(axis=0) + 0.5 * LOGISTIC_RIDGE * (weights**2).sum(axis=1)


class Isotonic(OneVsRest):
    pointwise = True
    name = "isotonic"
    summary = "isotonic regression one-vs-rest: non-decreasing map of p_k per class, renormalised"

    def fit_maps(self, logits, probs, labels, *, given):
        knots_x, knots_y, offsets = [], [], [0]
        for k in range(probs.shape[1]):  # a loop over classes, each fit vectorised over rows
            x, level = isotonic_fit(probs[:, k], labels == k)
            level = np.clip(level, 0.0, 1.0)
            # np.interp needs only the first and last knot of each constant block of the fit
            change = np.diff(level) != 0
            keep = np.ones(len(level), dtype=bool)
            keep[1:-1] = change[:-1] | change[1:]
            knots_x.append(x[keep])
            knots_y.append(level[keep])
            offsets.append(offsets[-1] + int(keep.sum()))
        self.knots_x_, self.knots_y_ = np.concatenate(knots_x), np.concatenate(knots_y)
        self.offsets_ = np.array(offsets)

    def class_maps(self, logits, probs, *, given):
        out = np.empty_like(probs)
        for k in range(probs.shape[1]):
            piece = slice(self.offsets_[k], self.offsets_[k + 1])
            out[:, k] = np.interp(probs[:, k], self.knots_x_[piece], self.knots_y_[piece])
        return out

    def n_maps(self):
        return len(self.offsets_) - 1

    def class_knots(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(x, y) knots of each class's map."""
        return [
            (self.knots_x_[self.offsets_[k] : self.offsets_[k + 1]], self.knots_y_[self.offsets_[k] : self.offsets_[k + 1]])
            for k in range(self.n_maps())
        ]

    def onnx_class_maps(self, graph, logits, probs, *, given):
        """np.interp of every column on its class's knots: j = #{knots <= p} - 1 clamped to the
        class's segments, fp[j] + slope_j (p - xp[j]); fp[0] below the first knot, fp[-1] from the
        last on (a class with one knot is that constant)."""
        knots = [(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)) for x, y in self.class_knots()]
        count = graph.count_at_most(probs, [x for x, _ in knots])
        last_segment = np.array([[max(len(x) - 2, 0) for x, _ in knots]])
        segment = graph.op(
            "Min",
            graph.op("Max", graph.op("Sub", count, graph.const(1, np.int64)), graph.const(0, np.int64)),
            graph.const(last_segment, np.int64),
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            slopes = [np.diff(y) / np.diff(x) if len(x) > 1 else np.zeros(1) for x, y in knots]
        start_x = graph.lookup(graph.per_class_table([x for x, _ in knots], 0.0), segment)
        start_y = graph.lookup(graph.per_class_table([y for _, y in knots], 0.0), segment)
        slope = graph.lookup(graph.per_class_table(slopes, 0.0), segment)
        inner = graph.op("Add", graph.op("Mul", slope, graph.op("Sub", probs, start_x)), start_y)
        first_x, first_y = (np.array([[t[0] for t in column]]) for column in zip(*knots))
        last_x, last_y = (np.array([[t[-1] for t in column]]) for column in zip(*knots))
        low = graph.where(graph.op("Less", probs, graph.const(first_x)), graph.const(first_y), inner)
        return graph.where(graph.op("GreaterOrEqual", probs, graph.const(last_x)), graph.const(last_y), low)

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
    pointwise = True
    name = "hist"
    summary = "histogram binning one-vs-rest: 15 equal-width bins of p_k per class, renormalised"

    def fit_maps(self, logits, probs, labels, *, given):
        n, k = probs.shape
        index = bin_index(probs, HIST_BINS) + np.arange(k)[None, :] * HIST_BINS
        counts = np.bincount(index.ravel(), minlength=k * HIST_BINS).reshape(k, HIST_BINS)
        hits = np.bincount(index[np.arange(n), labels], minlength=k * HIST_BINS).reshape(k, HIST_BINS)
        base_rate = np.bincount(labels, minlength=k) / n
        self.values_ = np.where(counts > 0, hits / np.maximum(counts, 1), base_rate[:, None])

    def class_maps(self, logits, probs, *, given):
        return self.values_[np.arange(probs.shape[1])[None, :], bin_index(probs, HIST_BINS)]

    def n_maps(self):
        return int(self.values_.shape[0])

    def onnx_class_maps(self, graph, logits, probs, *, given):
        """values[k, b], b = :func:`calib.core.numerics.bin_index` (p B (1 + r) truncated, at most B - 1)."""
        from ..core.numerics import EDGE_STRETCH

        scaled = graph.op("Mul", probs, graph.const(HIST_BINS * EDGE_STRETCH))
        index = graph.op("Min", graph.op("Cast", scaled, to=graph.onnx.TensorProto.INT64), graph.const(HIST_BINS - 1, np.int64))
        flat = graph.op("Add", index, graph.const(np.arange(self.n_maps())[None, :] * HIST_BINS, np.int64))
        return graph.op("Gather", graph.const(np.asarray(self.values_, dtype=np.float64).ravel()), flat)

    def to_state(self):
        return State(arrays={"values": self.values_})

    @classmethod
    def from_state(cls, options, state):
        calibrator = cls(options)
        calibrator.values_ = state.arrays["values"]
        return calibrator
