"""The calibrator protocol every method implements (STYLE.md: constructor stores options,
fitted values end in ``_``).

A calibrator is fitted on calibration logits and labels and then maps any (N, K) logits to
calibrated log-probabilities, row by row, so ``apply`` can stream. "Logits" means any log-space
scores whose softmax is the model's probabilities: raw logits, log-probabilities, or
log(max(p, 1e-12)) of probabilities (see :meth:`calib.io.Predictions.logits`).
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from typing import ClassVar

import numpy as np

from ..bundle import State
from ..errors import ExportError, InputError, NotFittedError, UsageError


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """A method without options."""


@dataclasses.dataclass(frozen=True)
class TrainingRows:
    """Labelled rows kept apart from the calibration rows, on which a method fits its own model (the
    quantile regression of an adaptive quantile, a flow, a multi-head quantile regression), as the
    ATS-CP paper does; every calibration row then conformalises that model. Without them the
    calibration rows are split in seeded halves. ``logits`` (M, K) like the calibration logits,
    ``features`` (M, d) when the method conditions on features, ``probs`` the probabilities as
    given for a method that scores them."""

    logits: np.ndarray
    labels: np.ndarray
    features: np.ndarray | None = None
    probs: np.ndarray | None = None


def absent_classes(labels: np.ndarray, n_classes: int) -> tuple[int, ...]:
    """The classes in [0, n_classes) that no label names."""
    return tuple(int(c) for c in np.flatnonzero(np.bincount(np.asarray(labels, dtype=np.int64), minlength=n_classes) == 0))


def warning_entries(warnings: list[str]) -> dict:
    """Fit-report entries for a calibrator's warnings (none when there are none)."""
    return {"warning": warnings[0]} if len(warnings) == 1 else {f"warning {i + 1}": w for i, w in enumerate(warnings)}


def absent_classes_sentence(classes, effect: str) -> str:
    """One sentence naming the classes with no calibration row (the first 10) and what the method does with them."""
    shown = ", ".join(str(int(c)) for c in classes[:10]) + (f" and {len(classes) - 10} more" if len(classes) > 10 else "")
    return f"{len(classes)} classes have no calibration row ({shown}): {effect}"


def absent_class_rows(calibrator: "Calibrator", preds) -> str | None:
    """A sentence when rows of classes that had no calibration row arrive: rows whose label is one of
    them (with labels), else rows whose top score is; None when there are none. ``preds`` is a
    :class:`calib.io.Predictions`."""
    absent = np.asarray(calibrator.absent_classes_, dtype=np.int64)
    if not len(absent):
        return None
    if preds.labels is not None:
        count, what = int(np.isin(preds.labels, absent).sum()), "are labelled with"
    else:
        count, what = (
            sum(int(np.isin(preds.logits(rows).argmax(axis=1), absent).sum()) for rows in preds.chunks()),
            "have as top class",
        )
    if not count:
        return None
    return f"{count} of {preds.n} rows {what} a class that had no calibration row ({calibrator.absent_class_effect})"


def add_counts(total: dict, more: dict) -> None:
    """Sum per-chunk row counts (e.g. infeasible rows) of :meth:`Calibrator.transform_with_info`."""
    for key, value in more.items():
        total[key] = total.get(key, 0) + value


@dataclasses.dataclass(frozen=True)
class CalibrationInputs:
    """What a calibrator reads for some rows: the log-space scores (the logits, or the log of the
    probabilities given), the probabilities as given (probability inputs only: methods built on
    conformal scores score those, so equal probabilities give equal scores), per-row features
    (what adaptive thresholds condition on) and, for a fit, the labelled rows the method's own
    model trains on."""

    logits: np.ndarray
    probs: np.ndarray | None = None
    features: np.ndarray | None = None
    train: TrainingRows | None = None
    #: A multi-label input's rows are (row, label) pairs: the label of each (what a calibrator per
    #: label picks its map by); None for other inputs.
    pair_labels: np.ndarray | None = None

    @classmethod
    def of(cls, preds, rows=slice(None), features: np.ndarray | None = None, train: TrainingRows | None = None):
        """The inputs of ``rows`` of ``preds`` (a :class:`calib.io.Predictions`), ``features`` of
        every row sliced alike."""
        logits, given = preds.logits_and_given(rows)
        pair_labels = preds.output_layout.pair_labels(rows)
        return cls(logits, given, None if features is None else features[rows], train, pair_labels)


class Calibrator(abc.ABC):
    #: The ``--method`` name.
    name: ClassVar[str]
    #: One line for ``calib methods``.
    summary: ClassVar[str]
    #: A frozen dataclass of the method's options with their defaults.
    Options: ClassVar[type] = NoOptions
    #: The method is built on conformal scores V(x, y) of the model's probabilities: its ``fit`` and
    #: transforms take ``probs=``, the probabilities as the input gives them, and score those
    #: instead of softmax(logits), so that equal probabilities give equal scores (logits of
    #: probabilities are log(max(p, 1e-12)), whose softmax moves ties by an ulp). See
    #: :class:`CalibrationInputs`.
    scores_given_probs: ClassVar[bool] = False
    #: Optional packages the method's fit needs (an extra of calib-cli, e.g. ``("torch",)``);
    #: applying a fitted bundle never needs them.
    requires: ClassVar[tuple[str, ...]] = ()

    def __init__(self, options=None):
        self.options = options if options is not None else self.Options()

    #: Methods that need a fitted calibrator: before ``fit`` (or ``from_state``) they raise
    #: :class:`~calib.errors.NotFittedError`, whichever subclass defines them.
    NEEDS_FIT: ClassVar[tuple[str, ...]] = (
        "transform",
        "transform_with_info",
        "transform_probs_with_info",
        "sets",
        "transform_and_sets",
        "to_state",
        "onnx_outputs",
    )

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for method in cls.NEEDS_FIT:
            if method in cls.__dict__:
                setattr(cls, method, _needs_fit(cls.__dict__[method]))

    def is_fitted(self) -> bool:
        """Whether the calibrator holds a fitted value: an attribute of its own ending in ``_``, set
        by :meth:`fit` or :meth:`from_state` (scikit-learn's convention)."""
        return any(key.endswith("_") and not key.startswith("__") for key in vars(self))

    def trains_a_model(self) -> bool:
        """Whether the method (with its options) fits a model of its own besides the calibration
        map, which :class:`TrainingRows` can train (``fit(..., train=...)``)."""
        return False

    def softmax_only(self) -> bool:
        """Whether the fitted map reads the logits only through their softmax p (a constant added
        to a row's logits changes nothing): then it applies to probabilities through log p, and to
        log-probabilities or logits alike, whatever kind it was fitted on. False for maps of the raw
        logits (Platt's sigma(A z_k + B), a network of the logits)."""
        return False

    @abc.abstractmethod
    def fit(self, logits: np.ndarray, labels: np.ndarray, *, seed: int = 0, features: np.ndarray | None = None) -> "Calibrator":
        """Fit on calibration ``logits`` (N, K) float64 and integer ``labels`` (N,).

        ``features`` (N, d) are optional inputs that methods with an x-dependent part condition on
        instead of the logits; methods without one ignore them.
        """

    @abc.abstractmethod
    def transform(self, logits: np.ndarray, features: np.ndarray | None = None) -> np.ndarray:
        """Calibrated log-probabilities (N, K) for ``logits`` (N, K); rows are independent."""

    #: What :meth:`apply` gives: calibrated log-probabilities or probabilities (N, K), the
    #: conformal-set mask (N, K) of a :class:`SetBuilder`, or log-probabilities and the mask at once.
    OUTPUTS: ClassVar[tuple[str, ...]] = ("log-probs", "probs", "sets", "log-probs and sets")

    def fit_inputs(self, inputs: CalibrationInputs, labels: np.ndarray, *, seed: int = 0) -> "Calibrator":
        """:meth:`fit` on an inputs record: the probabilities as given for a method that scores
        them, the training rows for a method that trains a model of its own."""
        if len(labels) == 0:
            raise InputError(f"method {self.name!r} has no calibration rows to fit on")
        extra = {"probs": inputs.probs} if self.scores_given_probs and inputs.probs is not None else {}
        if inputs.train is not None:
            extra["train"] = inputs.train
        return self.fit(inputs.logits, labels, seed=seed, features=inputs.features, **extra)

    def apply(self, inputs: CalibrationInputs, output: str = "log-probs", *, counts: bool = True):
        """The one way to apply a fitted calibrator: (``output`` of ``inputs``, row counts worth
        reporting); ``output`` one of :data:`OUTPUTS`. ``counts=False`` skips counting (an empty
        dict), for callers that report none."""
        given = {"probs": inputs.probs} if self.scores_given_probs and inputs.probs is not None else {}
        if output in ("sets", "log-probs and sets"):
            if not builds_sets(self):
                raise UsageError(f"method {self.name!r} builds no conformal sets; only conformal methods do")
            if output == "sets":
                return self.sets(inputs.logits, inputs.features, **given), {}
            return self.transform_and_sets(inputs.logits, inputs.features, **given), {}
        if output == "probs":
            return self.transform_probs_with_info(inputs.logits, inputs.features, **given)
        if output != "log-probs":
            raise UsageError(f"a calibrator gives one of {', '.join(self.OUTPUTS)}; got {output!r}")
        if counts:
            return self.transform_with_info(inputs.logits, inputs.features, **given)
        return self.transform(inputs.logits, inputs.features, **given), {}

    def transform_with_info(self, logits: np.ndarray, features: np.ndarray | None = None, **given) -> tuple[np.ndarray, dict]:
        """:meth:`transform` plus counts of rows worth reporting (e.g. infeasible rows); ``given``:
        the probabilities as read, for a method that takes them (``scores_given_probs``)."""
        return self.transform(logits, features, **given), {}

    def transform_probs_with_info(self, logits: np.ndarray, features: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
        """Calibrated probabilities and row counts; methods that can skip the log override this."""
        log_probs, info = self.transform_with_info(logits, features)
        return np.exp(log_probs, out=log_probs), info

    def predict_proba(self, logits: np.ndarray, features: np.ndarray | None = None) -> np.ndarray:
        return self.transform_probs_with_info(logits, features)[0]

    def warnings(self) -> list[str]:
        """Sentences about a fit that needs a second look (e.g. an optimum on the end of its search
        interval); also in :meth:`fit_report`, and among diagnose's findings."""
        return []

    #: Classes with no calibration row (set by :func:`calib.pipeline.fit_calibrator`, kept in the bundle).
    absent_classes_: tuple[int, ...] = ()
    #: What the method does with a class that has no calibration row, for the fit's warning.
    absent_class_effect: ClassVar[str] = (
        "the method fits their probabilities without a single row of them, so they can be far from the model's"
    )

    def fit_warnings(self) -> list[str]:
        """:meth:`warnings`, preceded by one on the classes absent from the calibration rows."""
        if not self.absent_classes_:
            return self.warnings()
        return [absent_classes_sentence(self.absent_classes_, self.absent_class_effect), *self.warnings()]

    def fit_report(self) -> dict:
        """Fitted parameters and counts worth printing after ``fit`` (plain JSON values)."""
        return {}

    #: Why the method has no ONNX graph (:mod:`calib.onnx_export`), for methods that do not build one.
    not_exportable: ClassVar[str] = "its map is not a closed form of ONNX operators"

    def onnx_outputs(self, graph, inputs) -> dict:
        """This calibrator's part of an ONNX graph (:func:`calib.onnx_export.onnx_model`): from
        ``inputs`` (a :class:`calib.onnx_export.GraphInputs` of float64 tensors) to {"probs": the
        calibrated probabilities (N, K)} plus "sets" (N, K) bool for a method that builds sets,
        with ``graph``'s operations (a :class:`calib.onnx_export.OnnxGraph`). Methods without a
        closed form raise :class:`~calib.errors.ExportError` saying why."""
        raise ExportError(f"method {self.name!r} cannot be exported to ONNX: {self.not_exportable}")

    @abc.abstractmethod
    def to_state(self) -> State:
        """Everything fitted, as JSON parameters and numeric arrays."""

    @classmethod
    @abc.abstractmethod
    def from_state(cls, options, state: State) -> "Calibrator":
        """Rebuild a fitted calibrator from its options and saved state."""

    @classmethod
    def parse_options(cls, given: dict) -> object:
        """Build ``Options`` from strings or values; unknown names and bad values are usage errors."""
        fields = {f.name: f for f in dataclasses.fields(cls.Options)}
        values = {}
        for key, raw in given.items():
            attr = key.replace("-", "_")
            if attr not in fields:
                import difflib

                valid = ", ".join(fields) or "none"
                close = difflib.get_close_matches(attr, list(fields), n=1)
                guess = f"; did you mean {close[0]!r}?" if close else ""
                raise UsageError(f"method {cls.name!r} takes no option {attr!r} (its options: {valid}){guess}")
            values[attr] = _coerce(raw, type(fields[attr].default), key)
        try:
            options = cls.Options(**values)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"method {cls.name!r}: {exc}") from None
        return options


def _needs_fit(method):
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        if not self.is_fitted():
            raise NotFittedError(
                f"calibrator {self.name!r} is not fitted yet: fit it (or load a bundle) before {method.__name__}"
            )
        return method(self, *args, **kwargs)

    return guarded


def _coerce(raw, kind: type, key: str):
    if not isinstance(raw, str) or kind is str:
        return raw
    try:
        if kind is bool:
            if raw.lower() in ("1", "true", "yes"):
                return True
            if raw.lower() in ("0", "false", "no"):
                return False
            raise ValueError(raw)
        return kind(raw)
    except ValueError:
        raise UsageError(f"option --{key.replace('_', '-')} must be {kind.__name__}; got {raw!r}") from None


class SetBuilder(Calibrator):
    """A calibrator that builds conformal sets of its own: :meth:`sets` gives the (N, K) mask C(x)
    and :meth:`transform_and_sets` the calibrated log-probabilities with it, from one pass."""

    makes_sets = True

    @abc.abstractmethod
    def sets(self, logits: np.ndarray, features: np.ndarray | None = None, **given) -> np.ndarray:
        """The (N, K) boolean mask of the conformal sets of ``logits``."""

    @abc.abstractmethod
    def transform_and_sets(self, logits: np.ndarray, features: np.ndarray | None = None, **given):
        """(calibrated log-probabilities (N, K), the (N, K) set mask)."""


def builds_sets(calibrator) -> bool:
    """Whether ``calibrator`` builds conformal sets: a :class:`SetBuilder`, or a calibrator per
    label of one (``makes_sets``)."""
    return bool(getattr(calibrator, "makes_sets", False))
