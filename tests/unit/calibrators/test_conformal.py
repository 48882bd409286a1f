"""Conformal calibrators: the guarantees of papers 000 and 002, checked against independent code."""

import json

import numpy as np
import pytest
from conftest import method_param, short_flow_training
from scipy.optimize import minimize

from calib import calibrator_class
from calib.calibrators import thresholds as thresholds_module
from calib.calibrators.conformal import (
    EMPTY,
    FEASIBLE,
    FULL,
    TOO_LARGE,
    UNREACHABLE,
    conformal_quantile,
    label_scores,
    min_calibration_size,
    nonconformity,
)
from calib.calibrators.select_tau import select_temperature
from calib.calibrators.temperature import CMCE_GRID, cmce_at_temperatures
from calib.core.numerics import log_softmax, softmax
from calib.errors import UsageError
from calib.pipeline import load_calibrator


def fit(method, logits, labels, **options):
    cls = calibrator_class(method)
    return cls(cls.parse_options(options)).fit(np.asarray(logits, dtype=np.float64), labels, seed=0)


def in_set_mass(log_probs, in_set):
    return np.sum(np.exp(log_probs), axis=1, where=in_set)


# ---------------------------------------------------------------- scores, quantile, sets


def test_aps_scores_equal_the_stable_sort_on_rows_with_and_without_ties():
    rng = np.random.default_rng(3)
    probs = softmax(rng.normal(size=(400, 50)) * 2)
    probs[::3] = np.round(probs[::3], 2)  # many ties (and zeros) in every third row
    probs[1::3, :10] = probs[1::3, [0]]  # ten equal classes
    order = np.argsort(-probs, axis=1, kind="stable")
    expected = np.empty_like(probs)
    np.put_along_axis(expected, order, np.cumsum(np.take_along_axis(probs, order, axis=1), axis=1), axis=1)
    assert np.array_equal(nonconformity(probs, "aps"), expected)


def test_aps_label_scores_match_the_sorted_definition_with_ties():
    probs = np.array([[0.4, 0.4, 0.2], [0.1, 0.6, 0.3]])
    logits = np.log(probs)
    v = nonconformity(probs, "aps")
    # row 0: order 0, 1 (tie, lower index first), 2 -> V = .4, .8, 1.0
    assert np.allclose(v[0], [0.4, 0.8, 1.0]) and np.allclose(v[1], [1.0, 0.6, 0.9])
    assert np.allclose(label_scores(logits, np.array([1, 2]), "aps"), [0.8, 0.9])
    assert np.allclose(label_scores(logits, np.array([1, 2]), "msp"), [0.6, 0.7])


def test_conformal_quantile_index_and_small_n():
    scores = np.arange(1.0, 10.0)  # n = 9, alpha = 0.1: k = ceil(10 * 0.9) = 9 -> the largest
    assert conformal_quantile(scores, 0.1) == 9.0
    assert conformal_quantile(np.arange(1.0, 20.0), 0.1) == 18.0  # n = 19: k = ceil(18) = 18
    assert min_calibration_size(0.1) == 9 and min_calibration_size(0.01) == 99
    with pytest.raises(UsageError, match="at least 99"):
        conformal_quantile(np.ones(50), 0.01)
    assert conformal_quantile(np.ones(50), 0.01, allow_full_set=True) == np.inf


@pytest.mark.parametrize("score", ["msp", "aps"])
def test_coverage_guarantee_over_100_random_splits(cifar100, score):
    logits = np.concatenate([cifar100["val_logits"], cifar100["test_logits"]]).astype(np.float64)
    labels = np.concatenate([cifar100["val_labels"], cifar100["test_labels"]])
    v = nonconformity(softmax(logits), score)
    own = v[np.arange(len(labels)), labels]
    alpha, n_cal = 0.1, 3000
    n_test = len(labels) - n_cal
    rng = np.random.default_rng(0)
    coverages = []
    for _ in range(100):
        order = rng.permutation(len(labels))
        cal, test = order[:n_cal], order[n_cal:]
        q = conformal_quantile(own[cal], alpha)
        coverages.append(np.mean(own[test] <= q))  # y in C(x)  <=>  V(x, y) <= q
    coverages = np.array(coverages)
    spread = np.sqrt(alpha * (1 - alpha) * (1 / n_test + 1 / n_cal))
    assert coverages.mean() >= 1 - alpha - 3 * spread / np.sqrt(100)
    assert np.all(np.abs(coverages - (1 - alpha)) <= 4.5 * spread)


@pytest.mark.parametrize("kind,flow", [("adaptive", "er"), ("adaptive", "gauss"), ("qr", "gauss")])
def test_adaptive_thresholds_keep_coverage(monkeypatch, kind, flow):
    """Given the trained transform (fitted once on its own rows), conformalising on fresh rows keeps
    P(y in C(x)) >= 1 - alpha: checked over 100 random conformalise/test splits."""
    pytest.importorskip("torch")
    from conftest import SAMPLE

    short_flow_training(monkeypatch, 100)  # the guarantee holds for any transform
    monkeypatch.setitem(thresholds_module.QR_TRAINING, "steps", 300)
    data = np.load(SAMPLE / "cifar10_test.npz")
    logits, labels = data["logits"].astype(np.float64), data["labels"]
    alpha = 0.1
    own = label_scores(logits, labels, "msp")
    train = np.arange(2000)
    arrays = thresholds_module.fit_threshold(kind, own[train], logits[train], alpha, flow=flow, seed=0)
    rest = np.arange(2000, len(labels))
    if kind == "adaptive":
        transformed = thresholds_module.flow_transform(own[rest], thresholds_module.flow_scale(arrays, logits[rest]), flow)
    else:
        from calib.calibrators import mlp

        transformed = own[rest] - mlp.forward(arrays, "qr", logits[rest])[:, 0]
    rng = np.random.default_rng(1)
    coverages = []
    for _ in range(100):
        order = rng.permutation(len(rest))
        cal, test = order[:3000], order[3000:]
        q = conformal_quantile(transformed[cal], alpha)
        coverages.append(np.mean(transformed[test] <= q))
    spread = np.sqrt(alpha * (1 - alpha) * (1 / 5000 + 1 / 3000))
    assert np.mean(coverages) >= 1 - alpha - 3 * spread / 10
    # and the thresholds really vary with x
    values = thresholds_module.threshold_values(kind, arrays, logits[:500], 500, flow=flow)
    assert values.std() > 0


# ---------------------------------------------------------------- SelectTau


def _top_sets(scores, sizes):
    order = np.argsort(-scores, axis=1, kind="stable")
    in_set = np.zeros(scores.shape, dtype=bool)
    np.put_along_axis(in_set, order, np.arange(scores.shape[1])[None, :] < sizes[:, None], axis=1)
    return in_set


@pytest.mark.parametrize("scale", [0.3, 3.0, 30.0])
def test_newton_matches_bisection_and_hits_the_mass(scale):
    rng = np.random.default_rng(int(scale * 10))
    scores = rng.normal(size=(3000, 40)) * scale
    in_set = _top_sets(scores, rng.integers(1, 6, 3000))
    tau_newton, cat_newton = select_temperature(scores, in_set, 0.9)
    tau_bisection, cat_bisection = select_temperature(scores, in_set, 0.9, method="bisection")
    assert np.array_equal(cat_newton, cat_bisection)
    assert np.max(np.abs(tau_newton / tau_bisection - 1)) < 1e-8
    ok = cat_newton == FEASIBLE
    mass = in_set_mass(log_softmax(scores / tau_newton[:, None]), in_set)
    assert np.all(mass[ok] >= 0.9) and np.all(mass[ok] - 0.9 <= 1e-9)


@pytest.mark.parametrize("n_classes", [2, 3, 5, 7, 1001])
@pytest.mark.parametrize("scale", [0.05, 3.0, 300.0])
def test_compiled_search_against_the_reference_on_every_row_shape(n_classes, scale):
    """Row lengths that are and are not whole vectors of the compiled code, flat to underflowing
    rows, per-row targets, and sets that do not hold the row maximum (only bisection's exact
    bracket-end masses decide those categories)."""
    from calib.calibrators.select_tau import tempered_distribution

    rng = np.random.default_rng(n_classes)
    n = 600
    scores = rng.normal(size=(n, n_classes)) * scale
    in_set = _top_sets(scores, rng.integers(0, n_classes + 1, n))
    in_set[::7] = rng.random((len(in_set[::7]), n_classes)) < 0.5  # arbitrary sets
    target = rng.uniform(0.05, 0.99, n)
    tau, category = select_temperature(scores, in_set, target)
    tau_ref, category_ref = select_temperature(scores, in_set, target, method="bisection")
    assert np.array_equal(category, category_ref)
    # both end in the accepted band (below); on flat rows the band spans more than 1e-8 in tau
    assert np.max(np.abs(tau / tau_ref - 1)) < 1e-6
    probs, tau_d, category_d = tempered_distribution(scores, in_set, target)
    log_probs, _, _ = tempered_distribution(scores, in_set, target, log_space=True)
    assert np.array_equal(tau_d, tau) and np.array_equal(category_d, category)
    assert np.max(np.abs(probs - softmax(scores / tau[:, None]))) < 1e-14
    assert np.max(np.abs(log_probs - log_softmax(scores / tau[:, None]))) < 1e-9 * max(1.0, scale)
    assert np.isfinite(log_probs).all()
    ok = category == FEASIBLE
    for found in (tau, tau_ref):
        mass = np.sum(softmax(scores / found[:, None]), axis=1, where=in_set)
        assert np.all(mass[ok] >= target[ok] - 1e-15) and np.all(mass[ok] - target[ok] <= 1e-9 + 1e-15)


def test_infeasible_rows_follow_the_rule():
    scores = np.array(
        [
            [3.0, 1.0, 0.0, -1.0],  # set {0}: feasible
            [3.0, 1.0, 0.0, -1.0],  # empty set
            [3.0, 1.0, 0.0, -1.0],  # full set
            [3.0, 2.9, 2.8, -1.0],  # |C| = 3 of 4 > 0.5 of K... with target 0.5 -> too large
            [2.0, 2.0, 0.0, -1.0],  # set {0} but class 1 ties the top: at most 1/2 mass -> unreachable
        ]
    )
    in_set = np.array(
        [
            [1, 0, 0, 0],
            [0, 0, 0, 0],
            [1, 1, 1, 1],
            [1, 1, 1, 0],
            [1, 0, 0, 0],
        ],
        dtype=bool,
    )
    tau, category = select_temperature(scores, in_set, 0.6)
    assert category.tolist() == [FEASIBLE, EMPTY, FULL, TOO_LARGE, UNREACHABLE]
    assert tau[1] == tau[2] == 1.0 and tau[3] == pytest.approx(1e6) and tau[4] == pytest.approx(1e-4)


# ---------------------------------------------------------------- the calibrators


@pytest.mark.parametrize(
    "method,options",
    [
        ("mr", {}),
        ("mr", {"score": "aps"}),
        ("conformal-ts", {}),
        ("ats-gq", {"variant": "score"}),
        ("ats-gq", {"score": "aps", "alpha": 0.05}),
    ],
)
def test_in_set_mass_is_exactly_one_minus_alpha(cifar100, method, options):
    calibrator = fit(method, cifar100["val_logits"], cifar100["val_labels"], **options)
    logits = cifar100["test_logits"][:3000].astype(np.float64)
    out, info = calibrator.transform_with_info(logits)
    in_set = calibrator.sets(logits)
    sizes = in_set.sum(1)
    feasible = (sizes > 0) & (sizes < in_set.shape[1])
    alpha = calibrator.options.alpha
    mass = in_set_mass(out, in_set)
    if method == "mr":
        assert np.allclose(mass[feasible], 1 - alpha, atol=1e-12, rtol=0)
    else:
        # rows the rule sends to a bracket end sit above (too large) or below (unreachable) the band
        above = feasible & (mass - (1 - alpha) > 1e-9)
        below = feasible & (mass < 1 - alpha)
        assert above.sum() <= info["set_too_large"] and below.sum() <= info["target_unreachable"]
        assert info["set_too_large"] + info["target_unreachable"] < 0.05 * feasible.sum()
    # infeasible rows are left unchanged
    assert np.allclose(out[~feasible], log_softmax(logits[~feasible]))
    assert np.allclose(np.exp(out).sum(1), 1.0, atol=1e-12)


@pytest.mark.parametrize("method", [method_param(m) for m in ["conformal-ts", "ats-gq", "cmce-ts", "ts", "adaptive-ts"]])
def test_temperature_methods_keep_the_argmax(cifar100, method):
    calibrator = fit(method, cifar100["val_logits"], cifar100["val_labels"])
    logits = cifar100["test_logits"].astype(np.float64)
    out = calibrator.transform(logits)
    same = out.argmax(1) == logits.argmax(1)
    assert same.mean() == 1.0


def test_mr_is_the_kl_projection():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(200, 5)) * 2
    labels = rng.integers(0, 5, 200)
    calibrator = fit("mr", logits, labels, alpha=0.2)
    test = rng.normal(size=(6, 5)) * 2
    out = np.exp(calibrator.transform(test))
    in_set = calibrator.sets(test)
    p = softmax(test)
    for row in range(len(test)):
        if not 0 < in_set[row].sum() < 5:
            continue
        constraint = {"type": "eq", "fun": lambda pi, m=in_set[row]: pi[m].sum() - 0.8}
        simplex = {"type": "eq", "fun": lambda pi: pi.sum() - 1.0}
        kl = lambda pi, q=p[row]: np.sum(pi * np.log(np.maximum(pi, 1e-300) / q))  # noqa: E731
        best = minimize(
            kl,
            np.full(5, 0.2),
            constraints=[constraint, simplex],
            bounds=[(1e-12, 1)] * 5,
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 500},
        )
        assert np.allclose(out[row], best.x, atol=1e-5)


def test_cmce_ts_minimises_cmce_on_its_grid(cifar100):
    logits, labels = cifar100["val_logits"][:1500].astype(np.float64), cifar100["val_labels"][:1500]
    calibrator = fit("cmce-ts", logits, labels)
    assert 1.0 in CMCE_GRID and len(CMCE_GRID) == 301
    # independent: the metric's own CMCE of softmax(z / T) at a few grid points is never lower
    from calib.evaluation import compute_metrics
    from calib.io import Predictions
    from calib.metrics import MetricConfig

    def cmce_of(t):
        preds = Predictions("t", logits / t, "logits", "t", labels, "0")
        return compute_metrics(preds, ["cmce"], MetricConfig(cmce_bins=25))[0]["cmce"]["value"]

    best = cmce_of(calibrator.temperature_)
    assert best == pytest.approx(calibrator.cmce_, abs=1e-12)
    for t in CMCE_GRID[::25]:
        assert cmce_of(t) >= best - 1e-12
    # Where no probability underflows to 0 the two formulations agree exactly. Below that (T = 0.01
    # here) the metric ranks float probabilities, whose underflowed zeros tie (lower index first),
    # while cmce-ts keeps the logit order, as docs/calibrators.md asks.
    grid = [t for t in CMCE_GRID[::25] if softmax(logits / t).min() > 0]
    assert len(grid) >= 8
    assert np.allclose(cmce_at_temperatures(logits, labels, np.array(grid)), [cmce_of(t) for t in grid], atol=1e-12)


def test_adaptive_bundles_reload_bit_identically(tmp_path, run, monkeypatch):
    pytest.importorskip("torch")
    from conftest import SAMPLE

    short_flow_training(monkeypatch, 100)
    monkeypatch.setitem(thresholds_module.QR_TRAINING, "steps", 200)
    val = SAMPLE / "cifar10_val.npz"
    for name, args in (
        ("flow", ["--method", "mr", "--threshold", "adaptive", "--flow", "er"]),
        ("qr", ["--method", "ats-aq", "--alpha", "0.05"]),
    ):
        code, _, err = run("fit", val, *args, "--out", tmp_path / name)
        assert code == 0, err
        calibrator, _ = load_calibrator(str(tmp_path / name))
        data = np.load(val)
        logits = data["logits"].astype(np.float64)
        refit = calibrator_class(calibrator.name)
        again = refit(calibrator.options).fit(logits, data["labels"], seed=0)
        assert np.array_equal(calibrator.transform(logits), again.transform(logits))
        assert np.array_equal(calibrator.thresholds(logits), again.thresholds(logits))
        code, _, err = run("fit", val, *args, "--out", tmp_path / f"{name}2")
        for file in (tmp_path / name).iterdir():
            assert file.read_bytes() == (tmp_path / f"{name}2" / file.name).read_bytes()


def test_features_condition_the_threshold(tmp_path, run, monkeypatch):
    pytest.importorskip("torch")
    short_flow_training(monkeypatch, 100)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(600, 4)).astype(np.float32)
    labels = rng.integers(0, 4, 600)
    np.savez(tmp_path / "d.npz", logits=logits, labels=labels, points=rng.normal(size=(600, 2)))
    code, _, err = run(
        "fit",
        tmp_path / "d.npz",
        "--method",
        "mr",
        "--threshold",
        "adaptive",
        "--features",
        tmp_path / "d.npz",
        "--out",
        tmp_path / "b",
    )
    assert code == 0, err
    code, _, err = run("apply", tmp_path / "b", tmp_path / "d.npz", "--out", tmp_path / "o.npy")
    assert code == 2 and "--features" in err
    code, _, err = run("apply", tmp_path / "b", tmp_path / "d.npz", "--features", tmp_path / "d.npz", "--out", tmp_path / "o.npy")
    assert code == 0, err


def test_cli_conformal_end_to_end(tmp_path, run):
    from conftest import SAMPLE

    val, test = SAMPLE / "cifar10_val.npz", SAMPLE / "cifar10_test.npz"
    code, out, err = run("fit", val, "--method", "ats-gq", "--alpha", "0.05", "--score", "aps", "--out", tmp_path / "b")
    assert code == 0, err
    assert "alpha" in out and "0.05" in out  # the fit summary shows the fitted alpha
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["options"]["alpha"] == 0.05 and manifest["method"] == "ats-gq"
    code, out, err = run("evaluate", "--no-vece", test, "--bundle", tmp_path / "b", "--json", "-")
    assert code == 0, err
    metrics = json.loads(out)["metrics"]
    assert metrics["set_coverage"]["value"] >= 0.95 - 0.01
    assert {"set_size", "set_empty", "set_full"} <= set(metrics)
    for suffix in ("npz", "parquet"):
        code, _, err = run("apply", tmp_path / "b", test, "--what", "sets", "--out", tmp_path / f"sets.{suffix}")
        assert code == 0, err
    mask = np.load(tmp_path / "sets.npz")["sets"]
    import pyarrow.parquet as pq

    lists = pq.read_table(tmp_path / "sets.parquet").column("set").to_pylist()
    assert [np.flatnonzero(row).tolist() for row in mask[:50]] == lists[:50]
    assert mask[np.arange(len(mask)), np.load(test)["labels"]].mean() == pytest.approx(metrics["set_coverage"]["value"])
    code, _, err = run("fit", val, "--method", "ts", "--out", tmp_path / "ts")
    code, _, err = run("apply", tmp_path / "ts", test, "--what", "sets", "--out", tmp_path / "x.npz")
    assert code == 2 and "conformal" in err
    code, _, err = run("fit", val, "--method", "mr", "--alpha", "0.0001", "--out", tmp_path / "small")
    assert code == 2 and "at least 9999" in err


@pytest.mark.parametrize("log_space", [False, True])
def test_tempered_distribution_is_the_softmax_at_the_selected_temperature(log_space):
    """The distribution taken from the verifying Newton pass equals softmax(scores / tau) on every
    row, including when empty and full sets leave gaps between the solved rows."""
    from calib.calibrators.select_tau import tempered_distribution
    from calib.core.numerics import softmax

    rng = np.random.default_rng(0)
    z = 3 * rng.normal(size=(500, 20))
    p = softmax(z)
    in_set = p >= np.sort(p, axis=1)[:, [-3]]
    in_set[:50] = False
    in_set[50:60] = True
    out, tau, _ = tempered_distribution(z, in_set, 0.9, log_space=log_space)
    got = np.exp(out) if log_space else out
    assert np.max(np.abs(got - softmax(z / tau[:, None]))) < 1e-14


@pytest.mark.parametrize(
    "training, flow, expected",
    [
        ("full-batch", "gauss", (300, 1, 2e-3)),
        ("full-batch", "er", (300, 1, 3e-3)),
        ("paper", "gauss", (3000, 5, 1e-4)),
        ("paper", "er", (3000, 5, 1e-2)),
    ],
)
def test_flow_trainings_by_name(monkeypatch, training, flow, expected):
    """The flow's MLP trains as its training's name says: the default's full batches (all 257
    fitting rows each step) or the CMCE paper's minibatches of n // 5 rows (51)."""
    pytest.importorskip("torch")  # the flow's loss is a torch function
    seen = {}

    def spy(inputs, targets, layers, loss, **settings):
        seen.update(settings, rows=len(inputs))
        raise RuntimeError("stop")

    monkeypatch.setattr(thresholds_module.mlp, "train", spy)
    scores = np.random.default_rng(0).random(515)
    with pytest.raises(RuntimeError, match="stop"):
        thresholds_module.fit_flow(scores, np.ones((515, 3)), flow, seed=0, training=training)
    steps, divisor, lr = expected
    assert (seen["steps"], seen["batch_size"], seen["lr"], seen["rows"]) == (steps, 257 // divisor, lr, 257)
