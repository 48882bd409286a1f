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
"""

from __future__ import annotations

import numpy as np

from .core.extras import require
from .errors import UsageError

require("sklearn")  # a missing scikit-learn is one line naming the extra

from sklearn.base import BaseEstimator, ClassifierMixin, clone  # noqa: E402
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
    "venn-abers": {
        "check_methods_subset_invariance": "LogisticRegression's predict_proba differs by one unit of rounding "
        "between a batch and a single row (BLAS), and Venn-Abers' rule for a score at a calibration score is exact "
        "for probabilities as given, so the calibration rows themselves may move by a step of the fit",
    },
}


class CalibratedClassifier(ClassifierMixin, BaseEstimator):
    """A classifier followed by a calib calibrator fitted on held-out rows.

    Parameters
    ----------
    estimator : classifier, optional
        A fitted classifier (used as it is) or an unfitted one (fitted on half of ``fit``'s rows);
        scikit-learn's ``LogisticRegression()`` when None.
    method : str
        A calib method (``calib methods`` lists them): "ts", "isotonic", "mr", "ats-gq", ...
    random_state : int
        Seed of the calibrator's fit and of the halves an unfitted classifier is fitted on.
    **options
        The method's options by name (``alpha=0.1``, ``score="aps"``, ...), checked now.

    Attributes
    ----------
    estimator_ : classifier
        The classifier whose scores are calibrated.
    calibrator_ : calib.api.Calibration
        The fitted calibrator.
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
        from sklearn.utils.validation import check_consistent_length

        from . import api

        if y is None:
            raise ValueError("CalibratedClassifier requires y to be passed, but the target y is None")
        calibrator = api.calibrator(self.method, **self._options)  # options checked before any fit
        check_consistent_length(X, y)
        X, y = _rows_of(X), np.asarray(y)
        estimator = self.estimator if self.estimator is not None else _default_estimator()
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
        scores, kind = _scores(self.estimator_, _safe_indexing(X, rows))
        self.calibrator_ = calibrator.fit(scores, labels, seed=self.random_state, kind=kind)
        if hasattr(self.estimator_, "n_features_in_"):
            self.n_features_in_ = self.estimator_.n_features_in_
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Calibrated probabilities, (N, n_classes), columns in ``classes_`` order."""
        check_is_fitted(self, "calibrator_")
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


def _scores(estimator, X) -> tuple[np.ndarray, str]:
    """(the classifier's scores of ``X``, their kind): ``predict_proba``'s probabilities, else
    ``decision_function``'s logits."""
    if hasattr(estimator, "predict_proba"):
        return np.asarray(estimator.predict_proba(X), dtype=np.float64), "probs"
    if hasattr(estimator, "decision_function"):
        return np.asarray(estimator.decision_function(X), dtype=np.float64), "logits"
    raise UsageError(f"{type(estimator).__name__} has neither predict_proba nor decision_function: calib calibrates scores")
