"""Shared machinery of the calibrators built on conformal sets (MR, conformal TS, ATS-CP).

Fitting computes the calibration scores V(x_i, y_i), fits the threshold (constant, adaptive flow,
or quantile regression; :mod:`calib.calibrators.thresholds`) conditioned on the logits or on
``features``, and counts the infeasible rows of the calibration split. Subclasses turn each row's
set into probabilities in :meth:`SetCalibrator.calibrate`.
"""

from __future__ import annotations

import abc
import dataclasses

import numpy as np

from ..bundle import State
from ..core.numerics import log_softmax_and_softmax, map_in_order, row_chunks, softmax
from ..errors import ExportError, InputError, UsageError
from . import mlp
from .base import SetBuilder, add_counts
from .conditioning import check_conditioning, chosen, conditioning_inputs
from .conformal import (
    CATEGORY_NAMES,
    ScoreOptions,
    check_alpha,
    check_choice,
    given_score_terms,
    in_conformal_set,
    label_scores,
    nonconformity,
    set_rule_slack,
    training_part,
)
from .scores import SCORES as SCORE_REGISTRY
from .thresholds import (
    DEFAULT_FLOW_TRAINING,
    FLOW_TRAININGS,
    FLOWS,
    class_thresholds,
    clustered_thresholds,
    fit_threshold,
    threshold_values,
)

#: Where a threshold's model was fitted without training rows: a seeded half of the calibration rows.
TRAINED_ON_HALVES = "half of the calibration rows"
#: The thresholds a set method offers (docs/calibrators.md).
THRESHOLDS = ("constant", "adaptive", "classwise", "clustered")
#: Thresholds with one q per class (the candidate class's), not per row.
PER_CLASS = ("classwise", "clustered")


@dataclasses.dataclass(frozen=True)
class ConformalOptions(ScoreOptions):
    """Options every conformal method takes: the score (and its parameters), alpha, and whether the
    trivial full set may stand in when the calibration rows are too few for alpha."""

    alpha: float = 0.1
    allow_full_set: bool = False
    #: What a model-trained threshold is a function of (calib.calibrators.conditioning)
    conditioning: str = "auto"

    def __post_init__(self):
        super().__post_init__()
        check_alpha(self.alpha)
        check_conditioning(self.conditioning)


@dataclasses.dataclass(frozen=True)
class SetOptions(ConformalOptions):
    """...plus the choice of threshold, for the methods that offer one."""

    threshold: str = "constant"
    flow: str = "gauss"
    flow_training: str = DEFAULT_FLOW_TRAINING
    min_class_rows: int = 0

    def __post_init__(self):
        super().__post_init__()
        check_choice("threshold", self.threshold, THRESHOLDS)
        check_choice("flow", self.flow, FLOWS)
        check_choice("flow_training", self.flow_training, tuple(FLOW_TRAININGS))
        if self.min_class_rows < 0:
            raise UsageError(f"'min_class_rows' must be >= 0; got {self.min_class_rows}")


class SetCalibrator(SetBuilder):
    Options = SetOptions
    absent_class_effect = (
        "the set threshold is fitted on the other classes' rows alone, so the coverage guarantee does not extend to them"
    )
    scores_given_probs = True
    #: The joint-coverage sets of a multi-label input's pairs ({"labels": L, "pair_alpha"};
    #: calib.calibrators.joint_coverage), else None.
    joint_: dict | None = None

    @property
    def mass_alpha(self) -> float:
        """The alpha whose 1 - alpha the calibrated probabilities put on each set: the method's
        alpha, or for joint coverage the per-pair level its sets reach (alpha_pair)."""
        return self.options.alpha if self.joint_ is None else self.joint_["pair_alpha"]

    @property
    def threshold_kind(self) -> str:
        return self.options.threshold

    @property
    def flow(self) -> str:
        return getattr(self.options, "flow", "gauss")

    def trains_a_model(self) -> bool:
        return self.threshold_kind in ("adaptive", "qr")

    def softmax_only(self):
        """Sets and calibrated rows come from softmax(z); an adaptive threshold is a function of the
        logits themselves unless it conditions on features or on the ranked log-probabilities."""
        return not self.trains_a_model() or self.conditioning_ != "logits"

    def fit(self, logits, labels, *, seed=0, features=None, probs=None, train=None):
        """``train``: :class:`~calib.calibrators.base.TrainingRows` for an adaptive threshold's model."""
        logits, scores, train = start_fit(self, logits, labels, seed=seed, features=features, probs=probs, train=train)
        if self.threshold_kind in PER_CLASS:
            if self.threshold_kind == "classwise":
                self.threshold_ = class_thresholds(
                    scores, labels, logits.shape[1], self.options.alpha, min_class_rows=self.options.min_class_rows
                )
            else:
                self.threshold_ = clustered_thresholds(scores, labels, logits.shape[1], self.options.alpha, seed=seed)
            self.fit_counts_ = self._count_rows(logits, features, probs)
            return self
        self.threshold_ = fit_threshold(
            self.threshold_kind,
            scores,
            self._conditioning(logits, features),
            self.options.alpha,
            flow=self.flow,
            seed=seed,
            allow_full_set=self.options.allow_full_set,
            train=train,
            flow_training=getattr(self.options, "flow_training", DEFAULT_FLOW_TRAINING),
        )
        self.fit_counts_ = self._count_rows(logits, features, probs)
        return self

    def _count_rows(self, logits, features, probs) -> dict:
        """Infeasible-row counts on the calibration rows, chunks of rows in parallel."""

        def count(rows):
            return _count(
                self.categories(
                    *self._prepare(
                        logits[rows], None if features is None else features[rows], probs=None if probs is None else probs[rows]
                    )
                )
            )

        counts: dict = {}
        for chunk_counts in map_in_order(count, row_chunks(*logits.shape), values=logits.size):
            add_counts(counts, chunk_counts)
        return counts

    def _conditioning(self, logits, features):
        """What an adaptive threshold is a function of: the logits, the ranked log-probabilities or
        the features it was fitted on (calib.calibrators.conditioning)."""
        if self.threshold_kind == "constant" or self.threshold_kind in PER_CLASS:
            return None
        return conditioning_inputs(self.conditioning_, self.n_conditioning_, logits, features, "this bundle's threshold")

    def thresholds(self, logits, features=None) -> np.ndarray:
        """q(x) for every row."""
        return threshold_values(
            self.threshold_kind, self.threshold_, self._conditioning(logits, features), len(logits), flow=self.flow
        )

    def sets(self, logits, features=None, probs=None) -> np.ndarray:
        """Boolean (N, K) mask of the conformal sets C(x) = {y : V(x, y) <= q(x)}, V scored on
        ``probs`` (the model's probabilities as given) when given, else on softmax(logits)."""
        return self._scores_and_sets(softmax(logits) if probs is None else probs, logits, features, probs is not None)[1]

    def _scores_and_sets(self, probs, logits, features, given: bool):
        """Scores V and the set mask; ``given``: ``probs`` are the input's own, and the set rule's
        slack is their sums' rounding (:func:`calib.calibrators.conformal.set_rule_slack`)."""
        scores = nonconformity(probs, self.options, self.score_seed_)
        terms = given_score_terms(self.options, probs.shape[1], given)
        if self.threshold_kind in PER_CLASS:  # one threshold per class, broadcast along the rows
            return scores, in_conformal_set(scores, self.threshold_["q"][None, :], terms)
        q = self.thresholds(logits, features)
        return scores, in_conformal_set(scores, q[:, None], terms)  # one threshold per row, broadcast along its classes

    def transform_with_info(self, logits, features=None, probs=None):
        out, category = self.calibrate(*self._prepare(logits, features, log_space=True, probs=probs))
        return out, _count(category)

    def transform_and_sets(self, logits, features=None, probs=None) -> tuple[np.ndarray, np.ndarray]:
        """Calibrated log-probabilities and the set mask from one pass (softmax, scores, sets once)."""
        prepared = self._prepare(logits, features, log_space=True, probs=probs)
        return self.calibrate(*prepared)[0], prepared[-1]

    def transform_probs_with_info(self, logits, features=None, probs=None):
        out, category = self.calibrate_probs(*self._prepare(logits, features, probs=probs))
        return out, _count(category)

    def _prepare(self, logits, features, log_space: bool = False, probs=None):
        """(logits, log-probs or None, probs, scores V, set mask): what :meth:`calibrate` (log_space)
        and :meth:`calibrate_probs` take. The probability path skips the log-probs. Given ``probs``
        (the model's probabilities as the input holds them) are scored instead of softmax(logits),
        so that equal probabilities give equal scores; a copy, since calibrate may overwrite it."""
        logits = np.asarray(logits, dtype=np.float64)
        log_probs = None
        if log_space:
            log_probs, model_probs = log_softmax_and_softmax(logits)
        given = probs is not None
        if given:
            model_probs = np.array(probs, dtype=np.float64)
        elif not log_space:
            model_probs = softmax(logits)
        scores, in_set = self._scores_and_sets(model_probs, logits, features, given)
        return logits, log_probs, model_probs, scores, in_set

    def transform(self, logits, features=None, probs=None):
        return self.transform_with_info(logits, features, probs)[0]

    def onnx_outputs(self, graph, inputs):
        """The sets C(x) = {y : V(x, y) <= q + slack(q)} of a constant or per-class threshold and
        :meth:`onnx_calibrate`'s probabilities, in an ONNX graph (:mod:`calib.onnx_export`)."""
        if self.threshold_kind not in ("constant", *PER_CLASS):
            raise ExportError(
                f"method {self.name!r} cannot be exported to ONNX: its {self.threshold_kind} threshold is a "
                f"neural network of the {self.conditioning_}, which the export does not translate "
                "(a constant, classwise or clustered threshold exports)"
            )
        if self.options.randomize:
            raise ExportError(
                f"method {self.name!r} cannot be exported to ONNX: randomised scores draw each row's u from a "
                "hash of its float64 bits, which ONNX operators cannot compute"
            )
        probs = graph.model_probs(inputs)
        scores = SCORE_REGISTRY[self.options.score].onnx(graph, probs, self.options)
        q = np.asarray(self.threshold_["q"], dtype=np.float64)
        # in_conformal_set's rule for scores of logits, the slack added here once: kept for given
        # probabilities too, since the graph's runtime computes the scores with its own sums
        limit = q + set_rule_slack(q)
        in_set = graph.op("LessOrEqual", scores, graph.const(limit[None, :] if q.ndim else limit))
        return {"probs": self.onnx_calibrate(graph, inputs.logits, probs, scores, in_set), "sets": in_set}

    @abc.abstractmethod
    def onnx_calibrate(self, graph, logits: str, probs: str, scores: str, in_set: str) -> str:
        """:meth:`calibrate_probs` in an ONNX graph: the calibrated probabilities (N, K)."""

    @abc.abstractmethod
    def categories(self, logits, log_probs, probs, scores, in_set) -> np.ndarray:
        """Per-row category (FEASIBLE or a code of conformal.CATEGORY_NAMES), without computing the
        calibrated rows where the method can tell it more cheaply."""

    @abc.abstractmethod
    def calibrate(self, logits, log_probs, probs, scores, in_set) -> tuple[np.ndarray, np.ndarray]:
        """(calibrated log-probs, per-row category: FEASIBLE or a code of conformal.CATEGORY_NAMES).

        ``log_probs`` and ``probs`` belong to the caller's chunk and may be overwritten."""

    @abc.abstractmethod
    def calibrate_probs(self, logits, log_probs, probs, scores, in_set) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`calibrate` in probability space (``log_probs`` is None): (probs, category)."""

    def fit_report(self):
        report = {"alpha": self.options.alpha, **self.options.score_settings(), "threshold": self.threshold_kind}
        if self.joint_ is not None:
            report["coverage"] = f"joint over {self.joint_['labels']} labels"  # every label of a row at once
            report["alpha per pair (in-set mass 1 - alpha)"] = self.joint_["pair_alpha"]
        if self.threshold_kind == "constant":
            report["q"] = float(self.threshold_["q"])
        elif self.threshold_kind in PER_CLASS:
            finite = self.threshold_["q"][np.isfinite(self.threshold_["q"])]
            report["q per class (median)"] = float(np.median(finite)) if len(finite) else float("inf")
            report["classes always in the set (q = inf)"] = int(np.isinf(self.threshold_["q"]).sum())
            if self.threshold_kind == "classwise" and int(self.threshold_["pooled"]):
                report["classes pooled into the marginal quantile"] = int(self.threshold_["pooled"])
            if self.threshold_kind == "clustered":
                report["clusters"] = int(self.threshold_["clusters"])
                report["classes in the null cluster (marginal quantile)"] = int((self.threshold_["cluster"] < 0).sum())
                report["rows per class that embed it"] = int(self.threshold_["rows_per_class"])
        else:
            report["q (transformed scale)"] = float(self.threshold_["q"])
            report["conditioned on"] = conditioned_on(self)
            report["model fitted on"] = self.trained_on_
        unit = "cal rows" if self.joint_ is None else "cal (row, label) pairs"  # a joint fit counts a multi-label input's pairs
        report.update({f"infeasible {k.replace('_', ' ')} ({unit})": v for k, v in self.fit_counts_.items() if v})
        return report

    def warnings(self):
        models = {"adaptive": ("flow", "flow"), "qr": ("qr", "quantile regression")}
        if self.threshold_kind not in models:
            return []
        return mlp.training_warnings(self.threshold_, *models[self.threshold_kind])

    def to_state(self):
        params = conditioning_params(self)
        if self.joint_ is not None:
            params["joint"] = dict(self.joint_)
        return State(params=params, arrays={f"threshold_{k}": v for k, v in self.threshold_.items()})

    @classmethod
    def from_state(cls, options, state):
        calibrator = restore_conditioning(cls(options), state.params)
        if "joint" in state.params:
            joint = state.params["joint"]
            calibrator.joint_ = {"labels": int(joint["labels"]), "pair_alpha": float(joint["pair_alpha"])}
        calibrator.threshold_ = {k[len("threshold_") :]: v for k, v in state.arrays.items() if k.startswith("threshold_")}
        if "q" not in calibrator.threshold_:
            raise KeyError("threshold_q")
        return calibrator


def start_fit(calibrator, logits, labels, *, seed, features, probs, train) -> tuple:
    """The start of every conformal fit: records what the calibrator conditions on, the seed of its
    randomised scores and where its own model (if any) is fitted; returns (float64 logits, the
    calibration scores V(x_i, y_i), the training rows' (scores, conditioning) or None)."""
    logits = np.asarray(logits, dtype=np.float64)
    calibrator.score_seed_ = seed  # randomised scores draw u from it, at fit and apply alike
    option = getattr(calibrator.options, "conditioning", "auto") if calibrator.trains_a_model() else "logits"
    calibrator.conditioning_, calibrator.n_conditioning_ = chosen(option, logits.shape[1], features)
    calibrator.scores_given_ = "probs" if probs is not None else "logits"
    calibrator.trained_on_ = None
    if calibrator.trains_a_model():
        calibrator.trained_on_ = TRAINED_ON_HALVES if train is None else f"{len(train.labels)} training rows"
    scores = label_scores(logits, labels, calibrator.options, probs=probs, seed=seed)
    if train is not None:
        if np.shape(train.logits)[1] != logits.shape[1]:
            raise InputError(
                f"the training rows have {np.shape(train.logits)[1]} classes; the calibration rows have {logits.shape[1]}"
            )
        train_scores, train_logits, train_features = training_part(train, calibrator.options, seed, features is not None)
        inputs = conditioning_inputs(
            calibrator.conditioning_, calibrator.n_conditioning_, train_logits, train_features, "the training rows' model"
        )
        train = (train_scores, inputs)
    return logits, scores, train


def conditioned_on(calibrator) -> str:
    """What the calibrator's model conditions on, as its fit report says it: "logits", or for a
    probabilities input "log-probabilities (log p of the probabilities given)"; "ranked", "features"."""
    if calibrator.conditioning_ == "logits" and calibrator.scores_given_ == "probs":
        return "log-probabilities (log p of the probabilities given)"
    return calibrator.conditioning_


def conditioning_params(calibrator) -> dict:
    """What a fitted conformal calibrator conditions on, its calibration-row counts and the seed of
    its randomised scores, as JSON."""
    return {
        "conditioning": calibrator.conditioning_,
        "n_conditioning": calibrator.n_conditioning_,
        "fit_counts": calibrator.fit_counts_,
        "score_seed": calibrator.score_seed_,
        "trained_on": calibrator.trained_on_,
        "scores_given": calibrator.scores_given_,
    }


def restore_conditioning(calibrator, params: dict):
    calibrator.conditioning_ = params["conditioning"]
    calibrator.n_conditioning_ = int(params["n_conditioning"])
    calibrator.fit_counts_ = dict(params["fit_counts"])
    calibrator.score_seed_ = int(params.get("score_seed", 0))  # bundles from before randomised scores: 0
    calibrator.trained_on_ = params.get("trained_on", TRAINED_ON_HALVES if calibrator.trains_a_model() else None)
    calibrator.scores_given_ = params.get("scores_given", "logits")  # bundles from before: logits
    return calibrator


def _count(category: np.ndarray) -> dict:
    counts = np.bincount(category, minlength=len(CATEGORY_NAMES) + 1)
    return {name: int(counts[code]) for code, name in CATEGORY_NAMES.items()}
