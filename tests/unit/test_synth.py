"""Synthetic data with known truth (issue: calib synth) and the metrics that use the truth."""

import json

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from calib.core.numerics import log_softmax
from calib.evaluation import compute_metrics
from calib.io import Predictions
from calib.metrics import MetricConfig
from calib.metrics.accumulators import CPSME_ALPHAS
from calib.synth import (
    class_groups,
    contaminate,
    contamination_temperatures,
    grid_centres,
    known_ce_data,
    sample_points,
    true_calibration_errors,
    true_posterior,
)


def test_grid_layouts():
    assert np.allclose(grid_centres(9, "grid"), [[x, y] for y in (-1, 0, 1) for x in (-1, 0, 1)])
    circle = grid_centres(5)  # K < 10 -> circle of radius 2.25
    assert np.allclose(np.linalg.norm(circle, axis=1), 2.25)
    centres = grid_centres(10_000)
    assert centres.shape == (10_000, 2) and np.allclose(centres.mean(0), 0) and centres.max() == 49.5


@pytest.mark.parametrize("k,sigma", [(4, 0.35), (10, 0.75), (30, 0.35)])
def test_posterior_matches_a_direct_density_computation(k, sigma):
    rng = np.random.default_rng(k)
    centres = grid_centres(k)
    points, _ = sample_points(centres, sigma, 200, rng)
    posterior = true_posterior(points, centres, sigma)
    assert np.allclose(posterior.sum(1), 1.0, atol=1e-12)
    density = np.stack([multivariate_normal(mean=c, cov=sigma**2 * np.eye(2)).pdf(points) for c in centres], axis=1)
    assert np.allclose(posterior, density / density.sum(1, keepdims=True), atol=1e-10)


def test_trained_classifier_is_well_above_chance():
    pytest.importorskip("torch")
    from calib.synth.gaussian_grid import make_gaussian_grid

    data = make_gaussian_grid(16, 500, 2000, n_train=6000, epochs=4, seed=0)
    meta = data["meta"]
    assert meta["test_accuracy"] > 0.6 > 1 / 16  # Bayes accuracy here is about 0.8
    assert meta["test_accuracy"] <= meta["test_bayes_accuracy"] + 0.03
    test = data["test"]
    assert test["logits"].dtype == np.float32 and test["logits"].shape == (2000, 16)
    assert np.allclose(test["true_probs"].sum(1), 1, atol=1e-5)


def test_contamination_groups_temperatures_and_argmax():
    assert class_groups(7).tolist() == [0, 0, 0, 1, 1, 2, 2]
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 9, 3000)
    temperatures = contamination_temperatures(labels, 9, rng)
    group = class_groups(9)[labels]
    assert set(temperatures[group == 0]) == {2.0, 3.0, 5.0}
    assert set(temperatures[group == 1]) == {1.0}
    assert set(temperatures[group == 2]) == {0.25, 0.5, 0.75}
    logits = rng.normal(size=(3000, 9)) * 3
    out = contaminate(logits, temperatures)
    assert np.array_equal(out.argmax(1), logits.argmax(1))
    # p~ = softmax(log p / T), checked for one row by hand
    p = np.exp(log_softmax(logits[:1]))[0]
    want = p ** (1 / temperatures[0])
    assert np.allclose(np.exp(out[0]), want / want.sum())


def test_known_ce_truths_are_exact_and_match_monte_carlo():
    rng = np.random.default_rng(0)
    probs, labels, truth = known_ce_data(200_000, 4, 0.5, rng)
    # f determines C: C = softmax(T log f) recovers the stored truth
    assert np.allclose(np.exp(log_softmax(0.5 * np.log(probs))), truth, atol=1e-9)
    errors = true_calibration_errors(probs, truth)
    assert errors["over"] + errors["under"] == pytest.approx(errors["top_l1"])
    assert errors["over"] > 0 and errors["under"] == 0  # T < 1 only sharpens the top class
    # Monte Carlo from the labels: the top-class signed gap mean(F - 1{y = j*}) estimates over - under
    top = probs.argmax(1)
    signed = np.mean(probs[np.arange(len(top)), top] - (labels == top))
    assert signed == pytest.approx(errors["over"] - errors["under"], abs=4 / np.sqrt(len(top)))
    # labels are drawn from C: class frequencies match the mean of C
    assert np.allclose(np.bincount(labels, minlength=4) / len(labels), truth.mean(0), atol=0.005)
    # by hand on one row: f = (0.5, 0.5), C = (0.9, 0.1) -> l1 = 0.8, sq = 0.32, binary l1 = 0.4
    one = true_calibration_errors(np.array([[0.5, 0.5, 0.0]]), np.array([[0.9, 0.1, 0.0]]))
    assert one["l1"] == pytest.approx(0.8) and one["sq"] == pytest.approx(0.32) and one["over"] == pytest.approx(0.0)
    binary = true_calibration_errors(np.array([[0.5, 0.5]]), np.array([[0.9, 0.1]]))
    assert binary["l1"] == pytest.approx(0.4) and binary["under"] == pytest.approx(0.4)


def _truth_metrics(probs, labels, truth, keys):
    preds = Predictions("t", probs, "probs", "t", labels, "0", true_probs=truth)
    values, _ = compute_metrics(preds, keys, MetricConfig())
    return {k: v["value"] for k, v in values.items()}


def test_cpsme_by_hand():
    # truth (0.6, 0.3, 0.1): C*_0.05 = all three classes, C*_0.1 = {0, 1}, C*_0.5 = {0}
    truth = np.array([[0.6, 0.3, 0.1]])
    probs = np.array([[0.5, 0.2, 0.3]])
    got = _truth_metrics(
        probs, np.array([0]), truth, ["cpsme_0.05", "cpsme_0.1", "cpsme_0.4", "cpsme_0.5", "nll_true", "brier_true"]
    )
    # alpha 0.05: mass must reach 0.95 -> all classes -> |1 - 1| = 0
    assert got["cpsme_0.05"] == pytest.approx(0.0, abs=1e-15)
    # alpha 0.1: 0.6 + 0.3 = 0.8999999999999999 in floats, within the edge tolerance (1e-12) of
    # 0.9, so it reaches the level -> {0, 1} -> |0.9 - 0.7| = 0.2 (a strict rule gave all classes, 0)
    assert got["cpsme_0.1"] == pytest.approx(0.2, abs=1e-15)
    # alpha 0.4: first k with mass >= 0.6 is k = 1 -> |0.6 - 0.5| = 0.1
    assert got["cpsme_0.4"] == pytest.approx(0.1)
    assert got["cpsme_0.5"] == pytest.approx(0.1)
    assert got["nll_true"] == pytest.approx(-(0.6 * np.log(0.5) + 0.3 * np.log(0.2) + 0.1 * np.log(0.3)))
    assert got["brier_true"] == pytest.approx(0.01 + 0.01 + 0.04)


def test_cpsme_matches_a_literal_formulation():
    rng = np.random.default_rng(1)
    truth = rng.dirichlet(np.ones(6), 300)
    probs = rng.dirichlet(np.ones(6), 300)
    labels = rng.integers(0, 6, 300)
    got = _truth_metrics(probs, labels, truth, [f"cpsme_{a:g}" for a in CPSME_ALPHAS] + ["cpsme_avg"])
    values = []
    for alpha in CPSME_ALPHAS:
        errors = []
        for p, q in zip(truth, probs):
            order = sorted(range(6), key=lambda j: (-p[j], j))
            mass, chosen = 0.0, []
            for j in order:
                chosen.append(j)
                mass += p[j]
                if mass >= 1 - alpha:
                    break
            errors.append(abs(sum(p[j] - q[j] for j in chosen)))
        values.append(np.mean(errors))
        assert got[f"cpsme_{alpha:g}"] == pytest.approx(values[-1], abs=1e-12)
    assert got["cpsme_avg"] == pytest.approx(np.mean(values), abs=1e-12)


def test_synth_commands_end_to_end(tmp_path, run):
    pytest.importorskip("torch")
    out = tmp_path / "grid"
    small_grid = ["synth", "gaussian-grid", "--classes", "9", "--n-cal", "300", "--n-test", "400", "--n-train", "3000"]
    small_grid += ["--epochs", "2", "--seed", "1"]
    code, _, err = run(*small_grid, "--out", out)
    assert code == 0, err
    meta = json.loads((out / "meta.json").read_text())
    assert meta["classes"] == 9 and meta["layout"] == "auto"
    again = tmp_path / "again"
    run(*small_grid, "--out", again)
    assert (out / "test.npz").read_bytes() == (again / "test.npz").read_bytes()  # same seed, same bytes
    code, stdout, err = run("evaluate", "--no-vece", out / "test.npz", "--true-probs", out / "test.npz", "--json", "-")
    assert code == 0, err
    metrics = json.loads(stdout)["metrics"]
    assert {"nll_true", "brier_true", "cpsme_avg", "cpsme_0.05", "cpsme_0.5"} <= set(metrics)
    code, _, err = run("synth", "contaminate", out / "test.npz", "--seed", "0", "--out", tmp_path / "c.npz")
    assert code == 0, err
    contaminated = np.load(tmp_path / "c.npz")
    original = np.load(out / "test.npz")
    assert np.array_equal(contaminated["logits"].argmax(1), original["logits"].argmax(1))
    assert np.array_equal(contaminated["true_probs"], original["true_probs"])  # other arrays carried over
    code, _, err = run("synth", "known-ce", "--classes", "3", "--temperature", "2", "--n", "500", "--out", tmp_path / "k.npz")
    assert code == 0, err
    truth = json.loads((tmp_path / "k.truth.json").read_text())["true_errors"]
    assert truth["under"] > 0 and truth["over"] == 0  # T > 1 only flattens the top class


def test_truth_metrics_need_true_probs(run):
    from conftest import SAMPLE

    code, _, err = run("evaluate", "--no-vece", SAMPLE / "cifar10_test.npz", "--metrics", "cpsme_avg")
    assert code == 2 and "--true-probs" in err
    code, _, err = run("evaluate", "--no-vece", SAMPLE / "cifar10_test.npz", "--true-probs", SAMPLE / "cifar10_test.npz")
    assert code == 2 and "true_probs" in err


def test_large_k_data_is_imagenet_shaped_and_its_truth_exact(run, tmp_path):
    """`calib synth large-k`: the written logits z and true probabilities C satisfy C = softmax(T z)
    (to float32 rounding), so temperature scaling at 1 / T recovers the truth; the labels are drawn
    from C (mean top-1 accuracy = mean C of the predicted class, within the sampling error); the
    truth file's errors equal a direct computation on the file's arrays; the same seed gives the
    same bytes."""
    import calib
    from calib.core.numerics import softmax
    from calib.synth import large_k_data, large_k_errors, true_calibration_errors

    z, labels, truth = large_k_data(4000, 200, 0.8, np.random.default_rng(3))
    assert z.dtype == truth.dtype == np.float32 and z.shape == truth.shape == (4000, 200)
    exact = softmax(0.8 * z.astype(np.float64))
    assert np.abs(truth - exact).max() < 1e-6
    top = z.argmax(axis=1)
    accuracy, expected = np.mean(top == labels), exact[np.arange(4000), top].mean()
    assert abs(accuracy - expected) < 4 * np.sqrt(expected * (1 - expected) / 4000)
    renormalised = truth.astype(np.float64) / truth.astype(np.float64).sum(axis=1, keepdims=True)
    direct = true_calibration_errors(softmax(z.astype(np.float64)), renormalised)
    chunked = large_k_errors(z, truth)
    assert all(abs(chunked[key] - direct[key]) < 1e-12 for key in direct)
    assert direct["over"] > 0 and direct["under"] == 0  # T < 1: over-confident only
    again = large_k_data(4000, 200, 0.8, np.random.default_rng(3))
    assert all(np.array_equal(a, b) for a, b in zip((z, labels, truth), again))

    out = tmp_path / "big.npz"
    code, _, err = run("synth", "large-k", "--classes", "100", "--n", "3000", "--temperature", "0.7", "--out", out)
    assert code == 0, err
    written = np.load(out)
    report = json.loads((tmp_path / "big.truth.json").read_text())
    assert report["true_errors"] == pytest.approx(large_k_errors(written["logits"], written["true_probs"]), abs=1e-12)
    fitted = calib.calibrator("ts").fit(written["logits"], written["labels"])
    assert abs(fitted.fitted.temperature_ - 1 / 0.7) < 0.1  # the truth's temperature, within noise
    code, _, err = run("synth", "large-k", "--temperature", "0", "--out", tmp_path / "x.npz")
    assert code == 2 and "the temperature must be > 0; got 0.0 (--temperature)" in err
