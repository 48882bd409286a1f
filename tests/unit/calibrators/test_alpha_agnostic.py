"""Alpha-agnostic ATS-CP (ats-mgq, ats-maq): level masses, aggregation centroids, monotone heads."""

import numpy as np
import pytest
from conftest import NEEDS_TORCH, method_param, short_flow_training

from calib import calibrator_class
from calib.calibrators import thresholds as thresholds_module
from calib.calibrators.alpha_agnostic import AGGREGATES, HEAD_ALPHAS, kl_temperature
from calib.calibrators.conformal import FEASIBLE
from calib.core.numerics import log_softmax, softmax


@pytest.fixture
def cifar10():
    from conftest import SAMPLE

    val, test = np.load(SAMPLE / "cifar10_val.npz"), np.load(SAMPLE / "cifar10_test.npz")
    return val["logits"].astype(np.float64), val["labels"], test["logits"][:1500].astype(np.float64)


@pytest.fixture(autouse=True)
def short_training(monkeypatch):
    monkeypatch.setitem(thresholds_module.QR_TRAINING, "steps", 300)
    short_flow_training(monkeypatch, 100)


def _fit(method, logits, labels, **options):
    cls = calibrator_class(method)
    return cls(cls.parse_options(options)).fit(logits, labels, seed=0)


@pytest.mark.parametrize(
    "method,options",
    [
        method_param("ats-mgq", {}),
        method_param("ats-mgq", {"variant": "score", "score": "aps"}),
        method_param("ats-maq", {"model": "multiqr"}),
        method_param("ats-maq", {"model": "flow"}),
    ],
)
def test_every_level_gets_its_target_mass(cifar10, method, options):
    logits, labels, test = cifar10
    calibrator = _fit(method, logits, labels, **options)
    owner, base, tempered, category, _ = calibrator.tempered_levels(test)
    assert len(owner) > 0 and np.all(np.diff(owner) >= 0)
    values, in_set, target = calibrator.levels(*_values_and_conditioning(calibrator, test))
    feasible = category == FEASIBLE
    mass = np.where(in_set, np.exp(tempered), 0.0).sum(axis=1)
    assert np.all(np.abs(mass[feasible] - target[feasible]) <= 1e-8)
    assert np.all((target >= 1 - calibrator.options.level_max) & (target <= 1 - calibrator.options.level_min))


def _values_and_conditioning(calibrator, logits):
    from calib.calibrators.conformal import nonconformity

    return nonconformity(softmax(logits), calibrator.options.score), logits


@pytest.mark.parametrize("aggregate", AGGREGATES)
def test_every_aggregate_is_a_distribution_and_keeps_rows_without_levels(cifar10, aggregate):
    logits, labels, test = cifar10
    calibrator = _fit("ats-mgq", logits, labels, aggregate=aggregate)
    out, info = calibrator.transform_with_info(test)
    probs = np.exp(out)
    assert np.all(probs >= 0) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-9)
    owner = calibrator.tempered_levels(test)[0]
    alone = np.setdiff1d(np.arange(len(test)), owner)
    assert info["rows without a level"] == len(alone) > 0
    np.testing.assert_allclose(out[alone], log_softmax(test[alone]), atol=1e-12)


def test_mean_and_geometric_mean_are_the_kl_centroids():
    """argmin_q mean_j KL(p_j || q) is the arithmetic mean; argmin_q mean_j KL(q || p_j) the normalised
    geometric mean: checked by minimising over q = softmax(theta) with scipy."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(0)
    members = rng.dirichlet(np.ones(5), 4)
    forward = lambda q: np.mean([np.sum(p * (np.log(p) - np.log(q))) for p in members])  # noqa: E731
    reverse = lambda q: np.mean([np.sum(q * (np.log(q) - np.log(p))) for p in members])  # noqa: E731
    for objective, centroid in ((forward, members.mean(0)), (reverse, softmax(np.log(members).mean(0)[None])[0])):
        best = minimize(
            lambda theta, objective=objective: objective(softmax(theta[None])[0]),
            np.zeros(5),
            method="BFGS",
            options={"gtol": 1e-12},
        )
        np.testing.assert_allclose(softmax(best.x[None])[0], centroid, atol=1e-6)


@pytest.mark.parametrize("direction", ["kl-forward", "kl-reverse"])
def test_kl_temperature_matches_a_bounded_scalar_minimiser(direction):
    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(1)
    base = rng.normal(size=(6, 7)) * 3
    reference = rng.dirichlet(np.ones(7), 6)
    got = kl_temperature(base, np.log(reference), direction)
    for row in range(6):

        def objective(log_tau, row=row):
            log_q = log_softmax(base[row : row + 1] / np.exp(log_tau))[0]
            if direction == "kl-forward":
                return -np.sum(reference[row] * log_q)
            return np.sum(np.exp(log_q) * (log_q - np.log(reference[row])))

        best = minimize_scalar(objective, bounds=(np.log(1e-4), np.log(1e6)), method="bounded", options={"xatol": 1e-10})
        assert objective(got[row]) <= best.fun + 1e-10


@NEEDS_TORCH
def test_quantile_heads_never_cross(cifar10):
    logits, labels, _ = cifar10
    calibrator = _fit("ats-maq", logits, labels, model="multiqr")
    rng = np.random.default_rng(2)
    probe = np.concatenate([logits[:500], rng.normal(size=(500, 10)) * 20])  # also far outside the data
    thresholds = thresholds_module.multi_quantile_values(calibrator.arrays_, probe)
    assert np.all(np.diff(thresholds, axis=1) >= 0)
    raw = thresholds_module.mlp.forward(calibrator.arrays_, "mqr", probe)
    assert np.all(np.diff(thresholds_module.monotone_heads(raw), axis=1) >= 0)
    assert len(calibrator.arrays_["shifts"]) == len(HEAD_ALPHAS)


@pytest.mark.parametrize("direction", ["kl-forward", "kl-reverse"])
def test_kl_temperature_finds_a_narrow_valley_beside_a_plateau(direction):
    """A sharp row (one-hot below tau ~ 1) whose reference is itself the row at tau = e^1.8: the
    objective is flat over decades of small tau, and a plain golden-section search follows the ties
    there (the contaminated CIFAR-100 case that gave NLL 31 instead of 1.43)."""
    base = np.array([[0.0, -28.43, -29.09, -30.03, -30.03, -42.89]])
    reference = log_softmax(base / np.exp(1.8))
    assert kl_temperature(base, reference, direction)[0] == pytest.approx(1.8, abs=1e-6)


def test_aggregate_and_model_are_flags_and_central_is_the_geometric_mean(tmp_path, run):
    """`--aggregate` and `--model` work like `--alpha` (and `-O aggregate=` still does); the ATS-CP
    paper's "central" aggregation is softmax of the mean log-probability, calib's `geometric`."""
    import json

    from conftest import SAMPLE

    import calib

    test = np.load(SAMPLE / "cifar10_test.npz")
    code, _, err = run("fit", SAMPLE / "cifar10_val.npz", "-m", "ats-mgq", "--aggregate", "central", "--out", tmp_path / "a")
    assert code == 0, err
    assert json.loads((tmp_path / "a" / "manifest.json").read_text())["options"]["aggregate"] == "central"
    code, _, _ = run("fit", SAMPLE / "cifar10_val.npz", "-m", "ats-mgq", "-O", "aggregate=geometric", "--out", tmp_path / "b")
    assert code == 0
    central, geometric = calib.load(str(tmp_path / "a")), calib.load(str(tmp_path / "b"))
    assert np.array_equal(central.predict_proba(test["logits"][:500]), geometric.predict_proba(test["logits"][:500]))
    code, _, err = run("fit", SAMPLE / "cifar10_val.npz", "-m", "ats-maq", "--model", "nope", "--out", tmp_path / "c")
    assert code == 2 and "'model' must be one of multiqr, flow" in err
