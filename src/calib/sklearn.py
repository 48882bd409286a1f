"""calib's calibrators as a scikit-learn estimator: :class:`CalibratedClassifier` wraps a classifier
the way scikit-learn's ``CalibratedClassifierCV`` wraps a prefit (frozen) one, with any calib
method in place of sigmoid and isotonic, and a conformal method's sets from ``predict_sets``.

>>> from sklearn.datasets import make_classification
>>> from sklearn.linear_model import LogisticRegression
>>> from calib.sklearn import CalibratedClassifier
>>> X, y = make_classification(n_samples=600, n_classes=3, n_informative=4, random_state=0)
>>> model = LogisticRegression().fit(X[:300], y[:300])
>>> calibrated = CalibratedClassifier(model, method="ts").fit(X[300:], y[300:])
>>> calibrated.predict_proba(X[:2]).shape
(2, 3)

The classifier's scores reach calib as its ``predict_proba`` (probabilities), else as its
``decision_function`` (logits: one column of a binary model is its class-1 logit). A classifier
that is already fitted is used as it is and never refitted, so the rows given to ``fit`` only
calibrate; an unfitted one is fitted on a seeded half of them (``random_state``) and calibrated on
the other half, as scikit-learn's own estimator checks fit every estimator from scratch.

scikit-learn's method names keep their scikit-learn meaning: ``method="sigmoid"`` and
``method="isotonic"`` are ``CalibratedClassifierCV(FrozenEstimator(est), method=...)``'s
(:class:`ScikitLearnOneVsRest`: its scores, its one-vs-rest maps, its normalisation), every other
name is calib's method; ``"calib:isotonic"`` names calib's own isotonic (docs/llm.md).
"""

from __future__ import annotations

import numpy as np

from .core.extras import require
from .errors import UsageError

require("sklearn")  # a missing scikit-learn is one line naming the extra

from sklearn.base import BaseEstimator, ClassifierMixin, clone, is_classifier  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.utils.validation import check_is_fitted  # noqa: E402

#: scikit-learn's estimator checks CalibratedClassifier does not pass, by the method options that
#: fail them, with the reason (``check_estimator(..., expected_failed_checks=...)``)
EXPECTED_FAILED_CHECKS = {
    "options": {
        "check_no_attributes_set_in_init": "a method's options are keyword arguments (**options), "
        "set as attributes of their own names, which the check does not find in __init__'s signature",
    },
    "conformal": {
        name: "the checks calibrate on 6 to 15 rows, too few for split conformal at alpha = 0.1, which needs 9 "
        "(ceil((1 - alpha)(n + 1)) <= n); refused in one line rather than guaranteeing nothing"
        for name in ("check_estimators_nan_inf", "check_classifier_data_not_an_array", "check_fit2d_1feature")
    },
    "isotonic": {
        "check_methods_subset_invariance": "LogisticRegression's decision_function differs by one unit of rounding "
        "between a batch and a single row (BLAS), and scikit-learn's isotonic maps leave two classes tied at one "
        "probability, so that unit decides which one predict names; CalibratedClassifierCV(FrozenEstimator(model), "
        "method='isotonic') names another class for the same row in the same way",
    },
    "venn-abers": {
        "check_methods_subset_invariance": "LogisticRegression's predict_proba differs by one unit of rounding "
        "between a batch and a single row (BLAS), and Venn-Abers' rule for a score at a calibration score is exact "
        "for probabilities as given, so the calibration rows themselves may move by a step of the fit",
    },
}
#: The listed checks whose outcome depends on the machine (its BLAS's rounding): they may pass
PLATFORM_DEPENDENT_CHECKS = ("check_methods_subset_invariance",)


#: The method names that mean scikit-learn's CalibratedClassifierCV methods, not calib's
SCIKIT_LEARN_METHODS = ("sigmoid", "isotonic")
#: The prefix that names calib's own method where scikit-learn has one of the same name
CALIB_PREFIX = "calib:"


def platt_sigmoid(scores: np.ndarray, positive: np.ndarray) -> tuple[float, float]:
    """(a, b) of P(y = 1 | f) = 1 / (1 + exp(a f + b)) fitted as Platt (1999) fits it and
    scikit-learn's ``_SigmoidCalibration`` does: the log loss summed against smoothed targets
    t = (N+ + 1) / (N+ + 2) for the positive rows and 1 / (N- + 2) for the others, from a = 0,
    b = log((N- + 1) / (N+ + 1)). The loss is convex in (a, b); Newton's method with halving steps
    runs to a gradient below 1e-11 per row, where scikit-learn's L-BFGS stops at 1e-6 on the sum:
    the probabilities agree to about 1e-9."""
    from scipy.special import expit

    f = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    n_pos = float(positive.sum())
    n_neg = len(f) - n_pos
    target = np.where(positive, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    design = np.column_stack([f, np.ones_like(f)])

    def loss(theta):
        z = design @ theta  # p = expit(-z): loss = sum t log(1 + e^z) + (1 - t) log(1 + e^-z)
        return float(np.sum(target * np.logaddexp(0.0, z) + (1.0 - target) * np.logaddexp(0.0, -z)))

    theta = np.array([0.0, np.log((n_neg + 1.0) / (n_pos + 1.0))])
    for _ in range(100):
        p = expit(-(design @ theta))
        gradient = design.T @ (target - p)
        if np.max(np.abs(gradient)) <= 1e-11 * len(f):
            break
        hessian = (design * (p * (1.0 - p))[:, None]).T @ design + 1e-12 * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        current = loss(theta)
        while loss(theta - step) > current and np.max(np.abs(step)) > 1e-15:
            step = step / 2.0
        theta = theta - step
    return float(theta[0]), float(theta[1])


def scikit_learn_isotonic(values: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x, level) of ``IsotonicRegression().fit(values, targets)``, its ties as it finds them: in
    sorted order a value within float64's resolution (1e-15) above the first value of the current
    tie is the same value (so 0.9999999999999998 and 1.0 pool, where calib's isotonic keeps them
    apart); each tie's target the mean, then PAV (calib.core.numerics.isotonic_fit on the pooled
    points)."""
    from .core.numerics import isotonic_fit

    order = np.lexsort((targets, values))
    ordered = values[order]
    first = np.r_[True, np.diff(ordered) >= np.finfo(np.float64).resolution]
    for j in np.flatnonzero(~first & (np.r_[0.0, np.diff(ordered)] > 0.0)):  # rare: values apart by less than 1e-15
        start = np.flatnonzero(first[:j])[-1]
        first[j] = ordered[j] - ordered[start] >= np.finfo(np.float64).resolution
    tie = np.cumsum(first) - 1
    pooled = np.bincount(tie, weights=targets[order]) / np.bincount(tie)
    return isotonic_fit(ordered[first], pooled, np.bincount(tie).astype(np.float64))


class ScikitLearnOneVsRest:
    """scikit-learn's ``CalibratedClassifierCV`` on a frozen classifier, ``method`` "sigmoid" or
    "isotonic": the classifier's ``decision_function`` (else ``predict_proba``; a binary model's
    one column), one map per class of its column against 1{y = k} (a binary model: one, for class
    1), :func:`platt_sigmoid` or the isotonic fit (ties pooled; linear between its points and
    clipped outside them, as ``IsotonicRegression(out_of_bounds="clip")``), and the maps' outputs
    divided by their sum (a binary model: 1 - p_1, p_1; a row whose maps all give 0: uniform)."""

    def __init__(self, method: str):
        self.method = method

    def fit(self, scores: np.ndarray, labels: np.ndarray, n_classes: int) -> "ScikitLearnOneVsRest":
        columns = scores.reshape(len(scores), -1)
        self.n_classes_ = n_classes
        self.maps_ = []
        for k, column in enumerate(columns.T):
            positive = labels == (1 if columns.shape[1] == 1 else k)
            if self.method == "sigmoid":
                self.maps_.append(platt_sigmoid(column, positive))
            else:
                self.maps_.append(scikit_learn_isotonic(column, positive.astype(np.float64)))
        return self

    def _map(self, fitted, column: np.ndarray) -> np.ndarray:
        from scipy.special import expit

        if self.method == "sigmoid":
            a, b = fitted
            return expit(-(a * column + b))
        x, level = fitted
        return np.interp(np.clip(column, x[0], x[-1]), x, level)

    def predict_proba(self, scores: np.ndarray) -> np.ndarray:
        columns = scores.reshape(len(scores), -1)
        mapped = np.column_stack([self._map(fitted, column) for fitted, column in zip(self.maps_, columns.T)])
        if self.n_classes_ == 2:
            return np.column_stack([1.0 - mapped[:, 0], mapped[:, 0]])
        total = mapped.sum(axis=1, keepdims=True)
        uniform = np.full_like(mapped, 1.0 / self.n_classes_)
        return np.divide(mapped, total, out=uniform, where=total != 0)


class CalibratedClassifier(ClassifierMixin, BaseEstimator):
    """A classifier followed by a calib calibrator fitted on held-out rows.

    Parameters
    ----------
    estimator : classifier, optional
        A fitted classifier (used as it is) or an unfitted one (fitted on half of ``fit``'s rows);
        scikit-learn's ``LogisticRegression()`` when None.
    method : str
        A calib method (``calib methods`` lists them): "ts", "mr", "ats-gq", ...; or scikit-learn's
        "sigmoid" or "isotonic", with scikit-learn's meaning (calib's own isotonic is
        "calib:isotonic").
    random_state : int
        Seed of the calibrator's fit and of the halves an unfitted classifier is fitted on.
    **options
        The method's options by name (``alpha=0.1``, ``score="aps"``, ...), checked now.

    Attributes
    ----------
    estimator_ : classifier
        The classifier whose scores are calibrated.
    calibrator_ : calib.api.Calibration or ScikitLearnOneVsRest
        The fitted calibrator (scikit-learn's maps for "sigmoid" and "isotonic").
    classes_ : ndarray
        The class labels, in the order of ``predict_proba``'s columns.
    """

    def __init__(self, estimator=None, method: str = "ts", random_state: int = 0, **options):
        self.estimator = estimator
        self.method = method
        self.random_state = random_state
        for name, value in options.items():
            setattr(self, name, value)

    def get_params(self, deep: bool = True) -> dict:
        """The constructor's parameters: estimator, method, random_state and the method's options
        (with ``deep``, the estimator's as ``estimator__NAME`` too), so ``clone`` rebuilds it."""
        params = {name: value for name, value in vars(self).items() if not name.endswith("_") and not name.startswith("_")}
        if deep and hasattr(self.estimator, "get_params"):
            params.update({f"estimator__{k}": v for k, v in self.estimator.get_params().items()})
        return params

    def set_params(self, **params) -> "CalibratedClassifier":
        """Set parameters, the method's options among them (``alpha=0.05``) and the estimator's by
        ``estimator__NAME``."""
        nested = {k.split("__", 1)[1]: v for k, v in params.items() if k.startswith("estimator__")}
        for name, value in params.items():
            if not name.startswith("estimator__"):
                setattr(self, name, value)
        if nested:
            self.estimator.set_params(**nested)
        return self

    @property
    def _options(self) -> dict:
        return {k: v for k, v in self.get_params(deep=False).items() if k not in ("estimator", "method", "random_state")}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # X reaches only the classifier, which says what it takes
        tags.classifier_tags.poor_score = True  # a classifier fitted on half the rows, as the checks fit it
        return tags

    def fit(self, X, y) -> "CalibratedClassifier":
        """Fit the calibrator on ``X``, ``y`` (and the classifier on a seeded half of them first
        when it is not fitted yet)."""
        from sklearn.utils import _safe_indexing
        from sklearn.utils.validation import check_consistent_length, column_or_1d

        from . import api

        if y is None:
            raise ValueError("CalibratedClassifier requires y to be passed, but the target y is None")
        if self.method in SCIKIT_LEARN_METHODS:
            if self._options:
                raise UsageError(f"scikit-learn's method {self.method!r} takes no options; got {', '.join(self._options)}")
            calibrator = ScikitLearnOneVsRest(self.method)
        else:  # options checked before any fit
            calibrator = api.calibrator(self.method.removeprefix(CALIB_PREFIX), **self._options)
        check_consistent_length(X, y)
        X, y = _rows_of(X), column_or_1d(y, warn=True)
        estimator = self.estimator if self.estimator is not None else _default_estimator()
        if not is_classifier(estimator) and not hasattr(estimator, "classes_"):
            raise UsageError(
                f"{type(estimator).__name__} is not a classifier (no classes_ once fitted): CalibratedClassifier calibrates "
                "a classifier's predict_proba or decision_function"
            )
        if _is_fitted(estimator):
            self.estimator_, rows = estimator, np.arange(len(y))
        else:
            first, rows = _halves(y, self.random_state)
            self.estimator_ = clone(estimator).fit(_safe_indexing(X, first), y[first])
        self.classes_ = np.asarray(self.estimator_.classes_)
        labels = np.searchsorted(self.classes_, y[rows])
        known = labels < len(self.classes_)
        if not known.all() or (self.classes_[labels] != y[rows]).any():
            raise UsageError("y holds a class the classifier was not fitted on")
        if isinstance(calibrator, ScikitLearnOneVsRest):
            self.calibrator_ = calibrator.fit(_response(self.estimator_, _safe_indexing(X, rows)), labels, len(self.classes_))
        else:
            scores, kind = _scores(self.estimator_, _safe_indexing(X, rows))
            self.calibrator_ = calibrator.fit(scores, labels, seed=self.random_state, kind=kind)
        if hasattr(self.estimator_, "n_features_in_"):
            self.n_features_in_ = self.estimator_.n_features_in_
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Calibrated probabilities, (N, n_classes), columns in ``classes_`` order."""
        check_is_fitted(self, "calibrator_")
        if isinstance(self.calibrator_, ScikitLearnOneVsRest):
            return self.calibrator_.predict_proba(_response(self.estimator_, X))
        scores, kind = _scores(self.estimator_, X)
        return self.calibrator_.predict_proba(scores, kind=kind)

    def predict_log_proba(self, X) -> np.ndarray:
        """log of :meth:`predict_proba` (a probability of 0 gives -inf, as scikit-learn's
        classifiers give it; calib's own log-probabilities floor it at log 1e-12)."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X) -> np.ndarray:
        """The class of the largest calibrated probability."""
        probs = self.predict_proba(X)
        return self.classes_[np.argmax(probs, axis=1)]

    def predict_sets(self, X) -> np.ndarray:
        """A conformal method's prediction sets, a boolean (N, n_classes) mask (columns in
        ``classes_`` order); other methods are refused."""
        check_is_fitted(self, "calibrator_")
        if isinstance(self.calibrator_, ScikitLearnOneVsRest):
            raise UsageError(f"method {self.method!r} builds no conformal sets; only conformal methods do")
        scores, kind = _scores(self.estimator_, X)
        return self.calibrator_.predict_sets(scores, kind=kind)


def _rows_of(X):
    """X in a form whose rows can be taken: a data frame as it is, sparse matrices as CSR, the rest
    as an array."""
    import scipy.sparse as sparse

    if sparse.issparse(X):
        return X.tocsr()
    return X if hasattr(X, "iloc") else np.asarray(X)


def _default_estimator():
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression()


def _is_fitted(estimator) -> bool:
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True


def _halves(y: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded halves of the rows, every class in both where it has two rows or more."""
    rng = np.random.default_rng(seed)
    first = []
    for value in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == value))
        first.extend(rows[: max(len(rows) // 2, 1)] if len(rows) > 1 else rows)
    first = np.sort(np.asarray(first, dtype=np.int64))
    rest = np.setdiff1d(np.arange(len(y)), first)
    return first, rest if len(rest) else first


def _response(estimator, X) -> np.ndarray:
    """The scores scikit-learn's CalibratedClassifierCV reads: ``decision_function``, else
    ``predict_proba`` (a binary model's class-1 column)."""
    if hasattr(estimator, "decision_function"):
        return np.asarray(estimator.decision_function(X), dtype=np.float64)
    if hasattr(estimator, "predict_proba"):
        probs = np.asarray(estimator.predict_proba(X), dtype=np.float64)
        return probs[:, 1] if probs.shape[1] == 2 else probs
    raise UsageError(f"{type(estimator).__name__} has neither predict_proba nor decision_function: calib calibrates scores")


def _scores(estimator, X) -> tuple[np.ndarray, str]:
    """(the classifier's scores of ``X``, their kind): ``predict_proba``'s probabilities, else
    ``decision_function``'s logits."""
    if hasattr(estimator, "predict_proba"):
        return np.asarray(estimator.predict_proba(X), dtype=np.float64), "probs"
    if hasattr(estimator, "decision_function"):
        return np.asarray(estimator.decision_function(X), dtype=np.float64), "logits"
    raise UsageError(f"{type(estimator).__name__} has neither predict_proba nor decision_function: calib calibrates scores")
