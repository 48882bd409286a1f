"""The penalised linear maps (dirichlet, svs, sms): converged means a zero gradient, checked against
an independent formulation of the objective and a plain scipy L-BFGS run to its limit."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_softmax

import calib
from calib.calibrators import matrix_scaling


def digits_naive_bayes():
    """scikit-learn's digits, GaussianNB, the usual 40/30/30 stratified split: probabilities with
    many entries far below 1e-12, an ill-conditioned Dirichlet objective."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.naive_bayes import GaussianNB

    x, y = load_digits(return_X_y=True)
    x_train, x_rest, y_train, y_rest = train_test_split(x, y, test_size=0.6, random_state=0, stratify=y)
    x_cal, x_test, y_cal, y_test = train_test_split(x_rest, y_rest, test_size=0.5, random_state=0, stratify=y_rest)
    model = GaussianNB().fit(x_train, y_train)
    return model.predict_proba(x_cal), y_cal, model.predict_proba(x_test)


def odir_objective(log_p, labels, lam, mu):
    """Kull et al.'s ODIR objective written out: mean NLL of softmax(W log p + b) + lambda / (K (K - 1))
    sum_{i != j} W_ij^2 + mu / K sum_j b_j^2, over theta = (W - I, b)."""
    n, k = log_p.shape
    off = ~np.eye(k, dtype=bool)

    def value_and_gradient(theta):
        w, b = np.eye(k) + theta[: k * k].reshape(k, k), theta[k * k :]
        log_q = log_softmax(log_p @ w.T + b, axis=1)
        residual = np.exp(log_q)
        residual[np.arange(n), labels] -= 1.0
        residual /= n
        value = -log_q[np.arange(n), labels].mean() + lam / (k * (k - 1)) * (w[off] ** 2).sum() + mu / k * (b**2).sum()
        grad_w = residual.T @ log_p + 2 * lam / (k * (k - 1)) * np.where(off, w, 0.0)
        return value, np.concatenate([grad_w.ravel(), residual.sum(axis=0) + 2 * mu / k * b])

    return value_and_gradient


def test_dirichlet_reaches_the_optimum_on_naive_bayes_digits():
    """ODIR lambda = mu = 1: the fit's objective is at or below a plain scipy L-BFGS run with no loss
    test (ftol 0, gtol 1e-12) and its gradient is zero to 1e-9; L-BFGS with calib's former stopping
    rule stopped 2.55e-9 above the optimum, gradient entries of 1e-6 and test probabilities 4e-3
    away, and called itself converged."""
    p_cal, y_cal, p_test = digits_naive_bayes()
    fitted = calib.calibrator("dirichlet", odir_lambda=1.0, odir_mu=1.0).fit(p_cal, y_cal, kind="probs")
    report = fitted.fit_report()
    assert report["converged"] is True and report["largest gradient entry"] <= 1e-9
    assert report["loss above the minimum (Newton decrement)"] <= 1e-12 * report["loss"]
    log_p = log_softmax(np.log(np.maximum(p_cal, 1e-12)), axis=1)
    objective = odir_objective(log_p, y_cal, 1.0, 1.0)
    k = log_p.shape[1]
    reference = minimize(
        objective, np.zeros(k * k + k), jac=True, method="L-BFGS-B", options={"ftol": 0.0, "gtol": 1e-12, "maxiter": 100_000}
    )
    theta = np.concatenate([fitted.fitted.delta_.ravel(), fitted.fitted.bias_])
    value, gradient = objective(theta)
    assert value <= reference.fun + 1e-13
    assert np.abs(gradient).max() <= 1e-9
    assert value == pytest.approx(report["loss"], abs=1e-14)


def test_lbfgs_stays_selectable_and_is_judged_by_the_gradient():
    """solver=lbfgs is the former fit; it stops by its loss test short of the optimum here, and now
    says so: not converged, the loss 1.8e-9 above its minimum by the Newton decrement (the gap
    measured against the optimum is 3.6e-9), where the Newton-CG fit's decrement is 1.5e-15."""
    p_cal, y_cal, _ = digits_naive_bayes()
    fitted = calib.calibrator("dirichlet", odir_lambda=1.0, odir_mu=1.0, solver="lbfgs").fit(p_cal, y_cal, kind="probs")
    report = fitted.fit_report()
    assert report["solver"] == "lbfgs" and report["converged"] is False and report["largest gradient entry"] > 1e-9
    assert report["loss above the minimum (Newton decrement)"] > 1e-12 * report["loss"]
    assert "L-BFGS fit stopped" in fitted.fitted.warnings()[0] and "Newton decrement" in fitted.fitted.warnings()[0]


def test_the_hessian_products_are_the_gradient_s_derivative():
    """H v from the Hessian-vector product equals the central difference of the gradient along v,
    for the full and the diagonal structure, at a point away from the identity."""
    rng = np.random.default_rng(0)
    x = log_softmax(rng.normal(size=(200, 5)) * 3, axis=1)
    labels = rng.integers(0, 5, 200)
    penalties = matrix_scaling.Penalties(0.1, 0.2, 0.3)
    captured = {}

    def spy(fun, start, jac, method, options, hessp=None, callback=None):
        captured.update(fun=fun, hessp=hessp)
        return minimize(fun, start, jac=jac, method=method, options=options, hessp=hessp, callback=callback)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("scipy.optimize.minimize", spy)
        for full, size in ((True, 30), (False, 10)):
            matrix_scaling.fit_linear_map(x, labels, penalties, full=full)
            theta, v = rng.normal(size=size) * 0.3, rng.normal(size=size)
            step = 1e-6
            numeric = (captured["fun"](theta + step * v)[1] - captured["fun"](theta - step * v)[1]) / (2 * step)
            np.testing.assert_allclose(captured["hessp"](theta, v), numeric, rtol=1e-6, atol=1e-9)


def test_an_unknown_solver_is_refused():
    with pytest.raises(ValueError, match="'solver' must be one of trust-ncg, lbfgs"):
        calib.calibrator("sms", solver="newton")


def test_more_weights_than_rows_warns_and_the_vector_structure_does_not():
    """K = 12 on 100 rows: Dirichlet's 12^2 + 12 = 156 weights exceed the rows (a warning naming
    both counts); SVS fits 2 K = 24 and says nothing; K^2 + K = rows exactly is not "more"."""
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(100, 12)) * 2, rng.integers(0, 12, 100)
    dirichlet = calib.calibrator("dirichlet").fit(logits, labels)
    assert "156 weights fitted on 100 rows" in dirichlet.fitted.warnings()[0]
    assert calib.calibrator("svs").fit(logits, labels).fitted.warnings() == []
    at_edge = calib.calibrator("dirichlet").fit(rng.normal(size=(156, 12)), rng.integers(0, 12, 156))
    assert not any("weights fitted on" in w for w in at_edge.fitted.warnings())


def _cifar100_look_alike(rows: int = 2000, classes: int = 97, scale: float = 300.0):
    """A public 97-class language-ID model's halves, built from CIFAR-100: 2,000 rows of the first 97
    classes' logits scaled x 300 (log-probabilities down to about -900, as extreme as its -12,164
    logits made them): nearly separable, so the ridge barely holds the weights."""
    from conftest import DATA

    data = np.load(DATA / "cifar100_resnet110_val.npz")
    keep = data["labels"] < classes
    return data["logits"][keep][:rows, :classes].astype(np.float64) * scale, data["labels"][keep][:rows]


def test_dirichlet_starts_from_temperature_scaling_and_never_ends_above_it():
    """The fit starts from W = I / T (TS on log p, a diagonal ODIR does not weigh), so its objective
    ends at or below TS's; on CIFAR-100's validation logits it is the optimum the identity's start
    reached before (0.921752941754828, docs/calibrators.md)."""
    from conftest import DATA

    from calib.calibrators.temperature import fit_inverse_temperature

    data = np.load(DATA / "cifar100_resnet110_val.npz")
    fitted = calib.calibrator("dirichlet").fit(data["logits"], data["labels"])
    report = fitted.fit_report()
    log_p = log_softmax(data["logits"].astype(np.float64), axis=1)
    beta = fit_inverse_temperature(log_p, data["labels"])
    k = log_p.shape[1]
    at_ts = odir_objective(log_p, data["labels"], 100.0, 100.0)(
        np.concatenate([((beta - 1.0) * np.eye(k)).ravel(), np.zeros(k)])
    )[0]
    assert report["converged"] and report["loss"] <= at_ts
    assert report["loss"] == pytest.approx(0.921752941754828, abs=1e-12)


@pytest.mark.parametrize(
    "options, says",
    [
        ({"max_iter": 2}, "Maximum number of iterations"),
        ({"max_seconds": 1e-9}, "its time budget of 1e-09 s ran out"),
    ],
)
def test_a_capped_fit_stops_unconverged_and_says_why(options, says):
    x, y = _cifar100_look_alike(rows=600, classes=20, scale=30.0)
    fitted = calib.calibrator("dirichlet", **options).fit(x, y)
    report = fitted.fit_report()
    assert report["converged"] is False and says in report["stopped because"]
    assert any("without converging" in warning for warning in fitted.fitted.warnings())


def test_the_hessian_product_budget_stops_at_the_last_accepted_step_and_progress_is_reported():
    """A budget of 40 Hessian-vector products stops the Newton-CG fit at its last accepted step,
    whose loss is below the start's; each accepted step reaches the progress callback."""
    from calib.core.progress import reporting

    x, y = _cifar100_look_alike(rows=600, classes=20, scale=30.0)
    log_p = log_softmax(x, axis=1)
    penalties = matrix_scaling.Penalties(100.0 / 20, 0.0, 100.0 / (20 * 19))
    seen = []
    with reporting(seen.append):
        delta, bias, report = matrix_scaling.fit_linear_map(
            log_p, y, penalties, full=True, budget=matrix_scaling.Budget(1000, products=40)
        )
    assert report["stopped because"] == "its budget of 40 Hessian-vector products ran out" and not report["converged"]
    assert len(seen) == report["iterations"] >= 1 and seen[0].startswith("Newton step, loss")
    start = odir_objective(log_p, y, 100.0, 100.0)(np.zeros(20 * 20 + 20))[0]
    assert report["loss"] < start


def test_a_fit_budget_is_refused_below_0():
    with pytest.raises(ValueError, match="'max_iter' and 'max_seconds' must be >= 0"):
        calib.calibrator("dirichlet", max_iter=-1)


@pytest.mark.slow
def test_dirichlet_on_nearly_separable_halves_ends_within_a_minute_and_says_so():
    """The 97-class look-alike ran 10 minutes silent; now Newton-CG stops at its Hessian-product
    budget (about 50 s on 2 cores) with a warning, and 5,000 x 100 peaked probabilities converge
    (16 Newton steps, where the identity's start took 126)."""
    import time

    x, y = _cifar100_look_alike()
    started = time.perf_counter()
    fitted = calib.calibrator("dirichlet").fit(x, y)
    assert time.perf_counter() - started <= 60.0
    report = fitted.fit_report()
    assert not report["converged"] and "Hessian-vector products ran out" in report["stopped because"]
    from conftest import DATA

    data = np.load(DATA / "cifar100_resnet110_val.npz")
    peaked = np.exp(log_softmax(3.0 * data["logits"].astype(np.float64), axis=1))
    started = time.perf_counter()
    fitted = calib.calibrator("dirichlet").fit(peaked, data["labels"], kind="probs")
    assert time.perf_counter() - started <= 60.0 and fitted.fit_report()["converged"]
