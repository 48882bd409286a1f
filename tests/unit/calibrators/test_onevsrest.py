"""One-vs-rest baselines against scikit-learn, and the contract every registered calibrator keeps."""

import numpy as np
import pytest
from conftest import data_file, method_param, needs

from calib import CALIBRATORS, calibrator_class
from calib.calibrators import thresholds as thresholds_module
from calib.calibrators.onevsrest import renormalise
from calib.core.numerics import softmax
from calib.pipeline import load_calibrator


@pytest.fixture
def cifar10():
    from conftest import SAMPLE

    val, test = np.load(SAMPLE / "cifar10_val.npz"), np.load(SAMPLE / "cifar10_test.npz")
    return val["logits"].astype(np.float64), val["labels"], test["logits"][:2000].astype(np.float64)


def test_platt_matches_sklearn_logistic_regression(cifar10):
    from sklearn.linear_model import LogisticRegression

    logits, labels, test = cifar10
    platt = calibrator_class("platt")().fit(logits, labels)
    for k in range(10):
        reference = LogisticRegression(C=1e6, tol=1e-12, max_iter=10000).fit(logits[:, k : k + 1], labels == k)
        assert platt.weights_[k, 0] == pytest.approx(reference.coef_[0, 0], rel=2e-3)
        assert platt.weights_[k, 1] == pytest.approx(reference.intercept_[0], rel=2e-3)


@pytest.mark.parametrize("method", ["quadratic", "beta"])
def test_feature_logistic_maps_match_sklearn(cifar10, method):
    from sklearn.linear_model import LogisticRegression

    logits, labels, test = cifar10
    fitted = calibrator_class(method)().fit(logits, labels)
    phi = fitted.features(logits, softmax(logits), False)
    for k in (0, 5):
        reference = LogisticRegression(C=1e6, tol=1e-12, max_iter=100000).fit(phi[:, k, :-1], labels == k)
        ours = fitted.class_maps(test, softmax(test), given=False)[:, k]
        theirs = reference.predict_proba(fitted.features(test, softmax(test), False)[:, k, :-1])[:, 1]
        assert np.allclose(ours, theirs, atol=2e-3)


def test_isotonic_matches_sklearn(cifar10):
    from sklearn.isotonic import IsotonicRegression

    logits, labels, test = cifar10
    isotonic = calibrator_class("isotonic")().fit(logits, labels)
    maps = isotonic.class_maps(test, softmax(test), given=False)
    p, q = softmax(logits), softmax(test)
    for k in (0, 4, 9):
        reference = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(p[:, k], labels == k)
        assert np.allclose(maps[:, k], reference.predict(q[:, k]), atol=1e-9)


def test_hist_by_hand_and_absent_classes():
    # 3 classes; class 2 never appears. Class 0 probabilities .9 (y=0), .9 (y=1), .1 (y=1)
    probs = np.array([[0.9, 0.05, 0.05], [0.9, 0.05, 0.05], [0.1, 0.85, 0.05]])
    labels = np.array([0, 1, 1])
    hist = calibrator_class("hist")().fit(np.log(probs), labels)
    # class 0, bin 13 (0.9 * 15 = 13.5): 1 hit of 2 -> 0.5; bin 1 (0.1): 0 of 1; empty bins: base rate 1/3
    assert hist.values_[0, 13] == 0.5 and hist.values_[0, 1] == 0.0 and hist.values_[0, 5] == pytest.approx(1 / 3)
    assert np.all(hist.values_[2] == 0.0)  # absent class: base rate 0 everywhere in the fitted table
    for method in ("hist", "platt", "isotonic", "beta", "venn-abers"):
        cls = calibrator_class(method)
        # absent=base-rate: the constant map at the base rate, 0
        zero = cls(cls.parse_options({"absent": "base-rate"})).fit(np.log(probs), labels)
        out = zero.predict_proba(np.log(probs))
        assert np.allclose(out.sum(1), 1) and np.all(out[:, 2] == 0.0), method
        # the default keeps the model's probability of the absent class before renormalising:
        # p~_2 = p_2 / (g_0 + g_1 + p_2), so p~_2 / (1 - p~_2) = p_2 / (g_0 + g_1)
        kept = cls(cls.parse_options({})).fit(np.log(probs), labels)
        assert kept.absent_classes_ == (2,)
        maps = kept.class_maps(np.log(probs), probs, given=True)
        out = kept.predict_proba(np.log(probs))
        np.testing.assert_allclose(out[:, 2], 0.05 / (maps[:, 0] + maps[:, 1] + 0.05), rtol=1e-12, err_msg=method)


def test_all_zero_rows_become_uniform():
    assert np.allclose(renormalise(np.array([[0.0, 0.0, 0.0], [1.0, 3.0, 0.0]])), [[1 / 3] * 3, [0.25, 0.75, 0.0]])


@pytest.mark.parametrize("method", [method_param(m) for m in sorted(CALIBRATORS)])
def test_every_calibrator_keeps_the_contract(method, tmp_path, monkeypatch):
    """Normalised rows, shape kept when classes are missing from the fit, bit-identical bundles."""
    monkeypatch.setitem(thresholds_module.QR_TRAINING, "steps", 50)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(400, 6)) * 2
    labels = rng.integers(0, 5, 400)  # class 5 never appears
    cls = calibrator_class(method)
    calibrator = cls(cls.parse_options({})).fit(logits, labels, seed=0)
    test = rng.normal(size=(50, 6)) * 2
    out = calibrator.transform(test)
    probs, _ = calibrator.transform_probs_with_info(test)
    assert out.shape == (50, 6) and np.all(np.isfinite(out))
    assert np.allclose(np.exp(out).sum(1), 1.0, atol=1e-9) and np.allclose(probs.sum(1), 1.0, atol=1e-9)
    from calib.pipeline import save_calibrator

    save_calibrator(calibrator, str(tmp_path / "b"), n_classes=6, input_kind="logits", fitted_on={"n": 300, "sha256": "0"})
    reloaded, _ = load_calibrator(str(tmp_path / "b"))
    assert np.array_equal(reloaded.transform(test), out)


def test_dirichlet_contains_temperature_scaling_and_recovers_a_known_map():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4000, 4)) * 2
    log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    true_w = np.array([[1.5, 0.3, 0.0, 0.0], [0.0, 0.8, 0.0, 0.2], [0.1, 0.0, 1.2, 0.0], [0.0, 0.0, 0.0, 1.0]])
    true_b = np.array([0.2, -0.1, 0.0, 0.3])
    truth = softmax(log_p @ true_w.T + true_b)
    labels = (truth.cumsum(1) > rng.random((4000, 1))).argmax(1)
    fitted = calibrator_class("dirichlet")(calibrator_class("dirichlet").Options(odir_lambda=1e-4, odir_mu=1e-4)).fit(
        logits, labels
    )
    ts = calibrator_class("ts")().fit(logits, labels)
    nll = lambda log_q: -np.mean(log_q[np.arange(len(labels)), labels])  # noqa: E731
    assert nll(fitted.transform(logits)) <= nll(ts.transform(logits)) + 1e-9
    assert np.abs(softmax(fitted.transform(logits)) - truth).mean() < 0.02


def _penalised_nll(delta, bias, x, labels):
    """The SVS/SMS objective written out independently: mean NLL + k/n (|b|^2 + |diag|^2) + k(k-1)/n |offdiag|^2."""
    n, k = x.shape
    full = delta.ndim == 2
    scores = x + (x @ delta.T if full else x * delta) + bias
    scores = scores - scores.max(1, keepdims=True)
    nll = -np.mean(scores[np.arange(n), labels] - np.log(np.exp(scores).sum(1)))
    diagonal = np.diag(delta) if full else delta
    off = (delta**2).sum() - diagonal @ diagonal if full else 0.0
    return nll + k / n * (bias @ bias + diagonal @ diagonal) + k * (k - 1) / n * off


@pytest.mark.parametrize("method", ["svs", "sms"])
def test_structured_scaling_matches_probmetrics(cifar10, method):
    """probmetrics (Berta et al.'s own code) fits the same objective with torchmin BFGS: our optimum
    is at least as low and the calibrated probabilities agree."""
    torch = needs("torch")
    needs("probmetrics")
    from probmetrics.calibrators.logistic import SMSCalibrator, SVSCalibrator

    logits, labels, test = cifar10
    ours = calibrator_class(method)().fit(logits, labels)
    x = ours.inputs(logits)
    n, k = x.shape
    assert ours.temperature_ == pytest.approx(calibrator_class("ts")().fit(logits, labels).temperature_)
    args = dict(num_classes=k, reg_intercept=k / n, reg_diagonal=k / n)
    if method == "svs":
        scale, bias = SVSCalibrator(print_init_info=False)._fit_bfgs(torch.tensor(x), torch.as_tensor(labels), **args)
        delta = scale - 1.0
    else:
        matrix = SMSCalibrator(print_init_info=False)._fit_bfgs(
            torch.tensor(x), torch.as_tensor(labels), reg_off_diagonal=k * (k - 1) / n, **args
        )
        delta, bias = matrix[:, :k] - np.eye(k), matrix[:, k]
    ours_loss, reference_loss = _penalised_nll(ours.delta_, ours.bias_, x, labels), _penalised_nll(delta, bias, x, labels)
    assert ours_loss == pytest.approx(ours.report_["loss"], rel=1e-10)
    assert ours_loss <= reference_loss + 1e-9
    x_test = ours.inputs(test)
    reference_probs = softmax(x_test + (x_test @ delta.T if method == "sms" else x_test * delta) + bias)
    assert np.abs(np.exp(ours.transform(test)) - reference_probs).max() < 2e-3


def test_venn_abers_equals_isotonic_refits_with_the_test_point():
    """(p0, p1) from the one-sweep tables equal the definition: scikit-learn's isotonic regression
    refitted with the test point added as label 0 and as label 1, evaluated there."""
    from sklearn.isotonic import IsotonicRegression

    from calib.calibrators.venn_abers import venn_abers_runs

    rng = np.random.default_rng(1)
    for _ in range(25):
        n = int(rng.integers(1, 60))
        scores = np.round(rng.random(n), int(rng.integers(1, 3)))  # many ties
        targets = (rng.random(n) < scores).astype(float)
        boundaries, p0, p1, _ = venn_abers_runs(scores, targets)
        tests = np.concatenate([scores, rng.random(8), [-1.0, 0.0, 1.0, 2.0]])
        run = np.searchsorted(boundaries, tests, side="right") - 1
        for s, r in zip(tests, run):
            refit = [IsotonicRegression().fit(np.append(scores, s), np.append(targets, t)).predict([s])[0] for t in (0, 1)]
            assert p0[r] == pytest.approx(refit[0], abs=1e-12) and p1[r] == pytest.approx(refit[1], abs=1e-12)
        assert np.all(p0 <= p1 + 1e-15) and np.all(np.diff(p0) >= -1e-15) and np.all(np.diff(p1) >= -1e-15)


def test_venn_abers_on_cifar10_improves_nll_and_handles_absent_classes(cifar10):
    logits, labels, test = cifar10
    calibrator = calibrator_class("venn-abers")().fit(logits, labels)
    p0, p1 = calibrator.interval(softmax(test))
    assert np.all((0 <= p0) & (p0 <= p1) & (p1 <= 1))
    assert calibrator.report_["walk steps per row"] < 100  # linear sweep, not a walk per query
    probs = calibrator.predict_proba(test)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    from conftest import SAMPLE

    test_labels = np.load(SAMPLE / "cifar10_test.npz")["labels"][:2000]
    nll = lambda p: -np.mean(np.log(p[np.arange(len(p)), test_labels]))  # noqa: E731
    assert nll(probs) < nll(softmax(test)) - 0.005
    absent = calibrator_class("venn-abers")().fit(logits[labels != 3], labels[labels != 3])
    probs = absent.predict_proba(test)
    assert np.all(np.isfinite(probs)) and absent.absent_classes_ == (3,)
    # class 3 keeps the model's probability: its share against class 0's follows the model's where
    # class 0 is calibrated too, so rows the model gives to class 3 still go to class 3
    model_top3 = softmax(test).argmax(axis=1) == 3
    assert np.mean(probs[model_top3].argmax(axis=1) == 3) > 0.9


def test_pointwise_maps_on_few_rows_per_class_warn_at_fit():
    """CIFAR-100 validation rows: 1,000 rows (a median of 10 a class) warn for venn-abers, isotonic
    and hist, whose per-class maps then raise the ECE; 5,000 rows (50 a class) and beta (three
    weights a class) do not; a binary model never does (one map)."""
    import calib

    val = np.load(data_file("cifar100_resnet110_val.npz"))
    for method in ("venn-abers", "isotonic", "hist"):
        few = calib.calibrator(method).fit(val["logits"][:1000], val["labels"][:1000]).fitted.warnings()
        assert len(few) == 1 and "median of 10 calibration rows a class" in few[0], method
        assert calib.calibrator(method).fit(val["logits"], val["labels"]).fitted.warnings() == [], method
    assert calib.calibrator("beta").fit(val["logits"][:1000], val["labels"][:1000]).fitted.warnings() == []
    rng = np.random.default_rng(0)
    assert calib.calibrator("isotonic").fit(rng.normal(size=(20, 2)), rng.integers(0, 2, 20)).fitted.warnings() == []


@pytest.mark.parametrize("method", ["isotonic", "hist", "beta", "venn-abers", "platt", "quadratic"])
def test_log_probs_of_probabilities_as_given_apply(tmp_path, run, method):
    """`calib apply --what log-probs` of a method that reads probabilities as given (one map per
    class): once a crash (the probabilities reached a method that did not take them); now the log
    of what --what probs writes, the log floored at 1e-12."""
    assert calibrator_class(method).scores_given_probs
    data = np.load(data_file("cifar10_resnet110_val.npz"))
    path = tmp_path / "p.npz"
    np.savez(path, probs=softmax(data["logits"][:2000].astype(np.float64)), labels=data["labels"][:2000])
    assert run("fit", path, "--method", method, "--out", tmp_path / "b")[0] == 0
    for what in ("probs", "log-probs"):
        code, _, err = run("apply", tmp_path / "b", path, "--what", what, "--out", tmp_path / f"{what}.npz")
        assert code == 0, err
    probs = np.load(tmp_path / "probs.npz")["probs"]
    log_probs = np.load(tmp_path / "log-probs.npz")["log_probs"]
    np.testing.assert_allclose(np.exp(log_probs), np.maximum(probs, 1e-12), rtol=1e-12, atol=0)
