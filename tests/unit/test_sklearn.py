"""calib.sklearn.CalibratedClassifier against scikit-learn's own estimator checks, and the
scikit-learn protocol (get_params / set_params / clone) of every calib calibrator."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import SAMPLE, method_param, needs

import calib
from calib.registry import CALIBRATORS

needs("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.utils.estimator_checks import check_estimator  # noqa: E402

from calib.sklearn import EXPECTED_FAILED_CHECKS, CalibratedClassifier  # noqa: E402


@pytest.mark.parametrize(
    "options, expected",
    [
        ({"method": "ts"}, ()),
        ({"method": "isotonic"}, ("isotonic",)),
        ({"method": "sigmoid"}, ()),
        ({"method": "calib:isotonic"}, ()),
        ({"method": "mr", "alpha": 0.1}, ("options", "conformal")),
        ({"method": "venn-abers"}, ("venn-abers",)),
    ],
)
def test_check_estimator(options, expected):
    """Every check passes but those EXPECTED_FAILED_CHECKS lists for these options, each with its
    reason; and each of those really fails (a listed check that passes is a stale list), except
    the ones whose outcome depends on the machine's rounding, which may pass."""
    from calib.sklearn import PLATFORM_DEPENDENT_CHECKS

    listed = {name: reason for key in expected for name, reason in EXPECTED_FAILED_CHECKS[key].items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(CalibratedClassifier(**options), on_fail=None, expected_failed_checks=listed)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert not failed, failed
    expected_failures = {r["check_name"] for r in results if r["status"] == "xfail"}
    assert expected_failures <= set(listed)
    assert set(listed) - set(PLATFORM_DEPENDENT_CHECKS) <= expected_failures
    assert sum(r["status"] == "passed" for r in results) >= 50


@pytest.mark.parametrize("dataset", ["breast_cancer", "digits"])
@pytest.mark.parametrize("classifier", ["LogisticRegression", "GaussianNB"])
@pytest.mark.parametrize("method", ["sigmoid", "isotonic"])
def test_scikit_learns_method_names_give_scikit_learns_probabilities(dataset, classifier, method):
    """CalibratedClassifier(est, method) equals CalibratedClassifierCV(FrozenEstimator(est), method)
    to 1e-6, binary (breast cancer) and multiclass (digits): its decision_function (GaussianNB: its
    predict_proba), Platt's smoothed targets, its ties within 1e-15, its normalisation. calib's
    own platt on log p differed by up to 0.76, and on digits' GaussianNB calib's isotonic gave 6
    of 540 test rows probability 0 on their true class."""
    from sklearn import datasets
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.frozen import FrozenEstimator
    from sklearn.model_selection import train_test_split
    from sklearn.naive_bayes import GaussianNB

    X, y = getattr(datasets, f"load_{dataset}")(return_X_y=True)
    X_train, X_rest, y_train, y_rest = train_test_split(X, y, test_size=0.6, random_state=0)
    X_cal, X_test, y_cal, _ = train_test_split(X_rest, y_rest, test_size=0.5, random_state=0)
    model = (LogisticRegression(max_iter=5000) if classifier == "LogisticRegression" else GaussianNB()).fit(X_train, y_train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = CalibratedClassifierCV(FrozenEstimator(model), method=method).fit(X_cal, y_cal).predict_proba(X_test)
        ours = CalibratedClassifier(model, method=method).fit(X_cal, y_cal).predict_proba(X_test)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)


def test_platt_by_hand_has_a_zero_gradient_at_the_smoothed_targets():
    """Two positive rows at f = 1, 2 and two negative at -1, 0: targets 3/4 and 1/4; at the fit
    sum_i (t_i - p_i) (f_i, 1) = 0, p = 1 / (1 + exp(a f + b))."""
    from calib.sklearn import platt_sigmoid

    f, positive = np.array([1.0, 2.0, -1.0, 0.0]), np.array([True, True, False, False])
    a, b = platt_sigmoid(f, positive)
    p = 1.0 / (1.0 + np.exp(a * f + b))
    residual = np.where(positive, 0.75, 0.25) - p
    assert abs(residual @ f) < 1e-10 and abs(residual.sum()) < 1e-10 and a < 0


def test_a_regressor_is_one_clear_error():
    from sklearn.linear_model import LinearRegression

    X, y = make_classification(n_samples=200, random_state=0)
    with pytest.raises(ValueError, match="LinearRegression is not a classifier"):
        CalibratedClassifier(LinearRegression()).fit(X, y)
    with pytest.raises(ValueError, match="LinearRegression is not a classifier"):
        CalibratedClassifier(LinearRegression().fit(X, y)).fit(X, y)


def test_an_unfitted_classifier_is_fitted_on_rows_the_calibrator_never_sees():
    """The classifier's half and the calibration half are disjoint and cover the rows: the
    calibrator is fitted on exactly the scores of the rows the classifier was not fitted on."""
    from calib.sklearn import _halves

    X, y = make_classification(n_samples=400, n_classes=3, n_informative=4, random_state=1)
    first, rest = _halves(y, 0)
    assert not np.intersect1d(first, rest).size and np.array_equal(np.sort(np.r_[first, rest]), np.arange(400))
    fitted = CalibratedClassifier(LogisticRegression(), method="ts", random_state=0).fit(X, y)
    own = LogisticRegression().fit(X[first], y[first])
    np.testing.assert_allclose(fitted.estimator_.coef_, own.coef_, rtol=0, atol=1e-12)
    direct = calib.calibrator("ts").fit(own.predict_proba(X[rest]), y[rest], kind="probs")
    np.testing.assert_allclose(fitted.calibrator_.fitted.temperature_, direct.fitted.temperature_, rtol=0, atol=1e-12)


def _split():
    X, y = make_classification(n_samples=1200, n_classes=3, n_informative=5, random_state=0)
    return (X[:600], y[:600]), (X[600:900], y[600:900]), (X[900:], y[900:])


def test_a_fitted_classifier_is_used_as_it_is_and_never_refitted():
    (X_train, y_train), (X_cal, y_cal), (X_test, _) = _split()
    model = LogisticRegression().fit(X_train, y_train)
    coef = model.coef_.copy()
    calibrated = CalibratedClassifier(model, method="ts").fit(X_cal, y_cal)
    assert calibrated.estimator_ is model and np.array_equal(model.coef_, coef)
    direct = calib.calibrator("ts").fit(model.predict_proba(X_cal), y_cal, kind="probs")
    np.testing.assert_array_equal(
        calibrated.predict_proba(X_test), direct.predict_proba(model.predict_proba(X_test), kind="probs")
    )


def test_class_labels_of_any_kind_map_to_columns():
    (X_train, y_train), (X_cal, y_cal), (X_test, _) = _split()
    names = np.array(["cat", "dog", "eel"])
    model = LogisticRegression().fit(X_train, names[y_train])
    calibrated = CalibratedClassifier(model, method="ts").fit(X_cal, names[y_cal])
    assert list(calibrated.classes_) == ["cat", "dog", "eel"]
    assert set(calibrated.predict(X_test)) <= set(names)
    with pytest.raises(ValueError, match="a class the classifier was not fitted on"):
        CalibratedClassifier(model).fit(X_cal, np.where(y_cal == 0, "fox", names[y_cal]))


def test_a_conformal_method_adds_predict_sets_with_its_coverage():
    (X_train, y_train), (X_cal, y_cal), (X_test, y_test) = _split()
    model = LogisticRegression().fit(X_train, y_train)
    calibrated = CalibratedClassifier(model, method="mr", alpha=0.1).fit(X_cal, y_cal)
    sets = calibrated.predict_sets(X_test)
    assert sets.shape == (300, 3) and sets.dtype == bool
    assert sets[np.arange(300), y_test].mean() >= 0.85
    with pytest.raises(ValueError, match="builds no conformal sets"):
        CalibratedClassifier(model, method="ts").fit(X_cal, y_cal).predict_sets(X_test)


def test_the_options_are_parameters_that_clone_and_grid_search_see():
    model = CalibratedClassifier(LogisticRegression(C=0.5), method="mr", alpha=0.1, score="aps")
    params = model.get_params()
    assert params["alpha"] == 0.1 and params["score"] == "aps" and params["estimator__C"] == 0.5
    copy = clone(model).set_params(alpha=0.2, estimator__C=2.0)
    assert copy.get_params()["alpha"] == 0.2 and copy.estimator.C == 2.0 and model.get_params()["alpha"] == 0.1
    with pytest.raises(ValueError, match="alpha"):
        CalibratedClassifier(method="mr", alpha=1.5).fit(*_split()[1])


@pytest.mark.parametrize("method", [method_param(name) for name in CALIBRATORS])
def test_every_calibrator_clones(method):
    """sklearn.base.clone of every method, with its options set: an unfitted copy, equal
    parameters; set_params checks options as the constructor does."""
    original = calib.calibrator(method)
    copy = clone(original)
    assert copy is not original and copy.get_params() == original.get_params()
    assert copy.set_params(**original.get_params()).get_params() == original.get_params()
    with pytest.raises(ValueError):
        copy.set_params(no_such_option=1)


def test_a_refit_after_set_params_is_unfitted_first():
    data = np.load(SAMPLE / "cifar10_val.npz")
    fitted = calib.calibrator("mr", alpha=0.1).fit(data["logits"][:1000], data["labels"][:1000])
    fitted.set_params(alpha=0.2)
    with pytest.raises(ValueError, match="not fitted"):
        fitted.predict_sets(data["logits"][:3])
