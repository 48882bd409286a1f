"""V-ECE against TRUE calibration errors computed from known C (never against other estimators)."""

import json

import numpy as np
import pytest

from calib.estimators import variational_calibration_error
from calib.estimators.coarse import coarsen, refine, top_classes
from calib.estimators.variational import per_sample_losses
from calib.synth import known_ce_data, true_calibration_errors

KEYS = ("l1", "l2", "sq", "over", "under")


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_ts_recalibrator_recovers_known_errors_over_seeds(temperature):
    estimates, truths = [], []
    for seed in range(6):
        probs, labels, truth = known_ce_data(3000, 4, temperature, np.random.default_rng(seed))
        estimates.append(variational_calibration_error(probs, labels, "ts", seed=seed).values)
        truths.append(true_calibration_errors(probs, truth))
    for key in KEYS:
        est = np.array([e[key] for e in estimates])
        tru = np.array([t[key] for t in truths])
        assert np.all(np.abs(est - tru) <= 0.1 * tru.max() + 0.01), key
        # lower bound in expectation: the mean estimate is not above the mean truth beyond noise
        assert est.mean() <= tru.mean() + 3 * est.std() / np.sqrt(len(est)) + 1e-3, key
    over, under = np.mean([e["over"] for e in estimates]), np.mean([e["under"] for e in estimates])
    assert (over > under) if temperature < 1 else (under > over)


def binary_demo(n=3000, seed=0):
    """The V-ECE paper's binary demo: p ~ Beta(0.5, 0.5), y ~ Bernoulli(sigmoid(0.4 logit p + 0.3)), with
    the exact errors of p against that true C."""
    rng = np.random.default_rng(seed)
    p1 = np.clip(rng.beta(0.5, 0.5, n), 1e-6, 1 - 1e-6)
    c1 = 1 / (1 + np.exp(-(0.4 * np.log(p1 / (1 - p1)) + 0.3)))
    labels = (rng.random(n) < c1).astype(int)
    probs = np.stack([1 - p1, p1], 1)
    return probs, labels, true_calibration_errors(probs, np.stack([1 - c1, c1], 1))


@pytest.mark.parametrize("recipe", ["compact-es10", "compact", "paper", "quick"])
def test_ws_catboost_on_a_binary_case_with_known_truth(recipe):
    probs, labels, truth = binary_demo()
    estimate = variational_calibration_error(probs, labels, "ws-catboost", seed=0, recipe=recipe)
    assert estimate.values["l1"] == pytest.approx(truth["l1"], abs=0.02)
    assert estimate.values["sq"] == pytest.approx(truth["sq"], abs=0.01)
    assert estimate.values["l1"] <= truth["l1"] + 0.01


@pytest.mark.parametrize("recipe, within", [("quick", 0.03), ("compact-es10", 0.01)])
def test_a_cheaper_recipe_recovers_a_known_error_at_k10_as_compact_does(recipe, within):
    """Known-truth data at K = 10 (3,000 rows): both recipes within 15% of every true error (one
    draw's estimate, not the expectation, which is a lower bound), quick within 3% of compact and
    compact-es10 (the same trees, stopped after 10 rounds without improvement instead of 20) within
    1% (docs/vece.md: their ratios to the truth differ by about 1% and 0.1% over 20 draws)."""
    probs, labels, true_probs = known_ce_data(3000, 10, 0.5, np.random.default_rng(1))
    truth = true_calibration_errors(probs, true_probs)
    compact, cheaper = (
        variational_calibration_error(probs, labels, "ws-catboost", seed=0, recipe=name).values for name in ("compact", recipe)
    )
    for key in ("l1", "l2", "sq", "top_l1"):
        assert 0.85 * truth[key] <= min(compact[key], cheaper[key]) <= max(compact[key], cheaper[key]) <= 1.15 * truth[key], key
        assert cheaper[key] == pytest.approx(compact[key], rel=within), key


def test_over_under_split_is_exact_and_names_the_right_side_at_k100():
    # an over-confident 100-class model whose top probability is usually below 1/2: probmetrics'
    # top-class variant (sign(F - 1/2)) would swap the names here
    probs, labels, truth = known_ce_data(4000, 100, 0.5, np.random.default_rng(0))
    assert np.median(probs.max(1)) < 0.5
    estimate = variational_calibration_error(probs, labels, "ts", seed=0)
    raw = estimate.unclipped
    assert raw["over"] + raw["under"] == pytest.approx(raw["top_l1"], abs=1e-15)
    assert raw["over"] > 10 * abs(raw["under"])
    exact = true_calibration_errors(probs, truth)
    assert raw["over"] == pytest.approx(exact["over"], abs=0.01)


def test_losses_by_hand():
    # f = (.5, .3, .2), g = (.6, .2, .2), y = 0: d = (.1, -.1, 0), f - o = (-.5, .3, .2)
    f = np.array([[0.5, 0.3, 0.2]])
    g = np.array([[0.6, 0.2, 0.2]])
    losses = per_sample_losses(f, g, np.array([0]))
    assert losses["l1"][0] == pytest.approx(-0.5 - 0.3)  # sign(d) . (f - o)
    assert losses["l2"][0] == pytest.approx((0.1 * -0.5 - 0.1 * 0.3) / np.sqrt(0.02))
    assert losses["sq"][0] == pytest.approx((0.16 + 0.04 + 0.04) - (0.25 + 0.09 + 0.04))
    assert losses["kl"][0] == pytest.approx(-np.log(0.6) + np.log(0.5))
    assert losses["over"][0] == 0.0 and losses["under"][0] == pytest.approx(-(1 - 0.5))


def test_clipped_once_and_calibrated_model_near_zero():
    rng = np.random.default_rng(3)
    probs = rng.dirichlet(np.ones(5), 3000)
    labels = (probs.cumsum(1) > rng.random((3000, 1))).argmax(1)
    estimate = variational_calibration_error(probs, labels, "ts", seed=0)
    for key in ("l1", "l2", "sq"):
        assert estimate.values[key] == max(estimate.unclipped[key], 0.0)
        assert estimate.values[key] < 0.03


def test_coarsened_boosting_is_a_function_of_f_and_keeps_mass():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(30), 50)
    order = np.argsort(-probs, axis=1, kind="stable")[:, :9]
    coarse = coarsen(probs, order)
    assert coarse.shape == (50, 10) and np.allclose(coarse.sum(1), 1)
    back = refine(probs, coarse, order)  # the identity recalibration maps back to f itself
    assert np.allclose(back, probs)


class _RowsOnly:
    """Probabilities that can be read only a few rows at a time: the large-K path must never ask for
    more than ``limit`` numbers at once, nor for the whole matrix."""

    def __init__(self, probs, limit):
        self.probs, self.limit, self.n_classes, self.largest = probs, limit, probs.shape[1], 0

    def rows(self, indices):
        self.largest = max(self.largest, len(indices) * self.n_classes)
        assert len(indices) * self.n_classes <= self.limit
        return self.probs[indices]

    def full(self):
        raise AssertionError("the large-K path read every row at once")


def test_large_k_reads_rows_a_chunk_at_a_time_with_the_same_losses(monkeypatch):
    """Above 10 classes WS-CatBoost reads the rows a chunk at a time (here 37 rows of 15 classes) and
    the losses equal those of one chunk holding every row, to the last bit (on an AVX2 machine one
    row of 900 differs by one ulp in l2 and sq: NumPy's loops for arrays of other shapes)."""
    from calib.estimators import variational

    probs, labels, _ = known_ce_data(900, 15, 0.5, np.random.default_rng(4))
    whole = variational.out_of_fold_losses(probs, labels, "ws-catboost", seed=1)
    monkeypatch.setattr(variational.CoarseBoosting, "chunk_elements", 15 * 37)
    source = _RowsOnly(probs, limit=len(probs) * 15)  # the temperature reads the training rows once
    chunked = variational.out_of_fold_losses(source, labels, "ws-catboost", seed=1)
    for key in whole:
        np.testing.assert_allclose(chunked[key], whole[key], rtol=1e-13, atol=1e-15, err_msg=key)


def test_large_k_fits_the_temperature_on_a_bounded_subsample(monkeypatch):
    """Above TS_SAMPLE_ELEMENTS training numbers the temperature is fitted on a seeded subsample of
    TS_SAMPLE_ELEMENTS / K rows: no read is larger, and the estimate stays close to the full fit's."""
    from calib.estimators import variational

    probs, labels, truth = known_ce_data(3000, 40, 0.5, np.random.default_rng(6))
    full = variational_calibration_error(probs, labels, seed=0)
    monkeypatch.setattr(variational, "TS_SAMPLE_ELEMENTS", 40 * 500)
    monkeypatch.setattr(variational.CoarseBoosting, "chunk_elements", 40 * 100)
    source = _RowsOnly(probs, limit=40 * 500)
    bounded = variational_calibration_error(source, labels, seed=0)
    assert source.largest == 40 * 500 and bounded.coarsened
    for key in ("l1", "l2", "sq", "top_l1"):
        assert bounded.values[key] == pytest.approx(full.values[key], rel=0.05), key


def test_large_k_holds_less_than_one_probability_matrix(monkeypatch):
    """The large-K path's peak of traced allocations (NumPy's included) stays under 3/4 of one (N, K)
    float64 matrix: rows are read and dropped a chunk at a time, only the coarse problem is kept
    (keeping each chunk's K-class warm start until the fit took 16.3 MiB here against 15.3 MiB for
    the matrix; now 8 MiB, mostly the losses' temporaries and the coarse problem)."""
    import tracemalloc

    import catboost  # noqa: F401  (imported before tracing: its modules are not the estimator's memory)

    from calib.estimators import variational

    probs, labels, _ = known_ce_data(2000, 1000, 0.5, np.random.default_rng(3))
    monkeypatch.setattr(variational, "TS_SAMPLE_ELEMENTS", 1000 * 200)
    monkeypatch.setattr(variational.CoarseBoosting, "chunk_elements", 1000 * 100)
    source = _RowsOnly(probs, limit=1000 * 200)
    tracemalloc.start()
    try:
        variational.out_of_fold_losses(source, labels, "ws-catboost", seed=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 0.75 * probs.nbytes


def test_coarsen_and_refine_by_hand_with_an_empty_rest():
    """coarsen: the top classes in order and 1 - their sum (0 when they hold every bit of mass);
    refine: the kept classes take g's values, the others share g's rest in proportion to the base,
    and nothing where the base's rest is exactly 0 (no 0/0)."""
    probs = np.array([[0.1, 0.4, 0.2, 0.3], [0.5, 0.5, 0.0, 0.0]])
    order = np.array([[1, 3], [0, 1]])
    assert np.allclose(coarsen(probs, order), [[0.4, 0.3, 0.3], [0.5, 0.5, 0.0]])
    coarse_g = np.array([[0.5, 0.2, 0.3], [0.3, 0.3, 0.4]])
    out = refine(probs, coarse_g, order)
    # row 0: the rest 0.3 of the base (0.1 + 0.2) becomes g's 0.3, so the others keep 0.1 and 0.2
    assert np.allclose(out, [[0.1, 0.5, 0.2, 0.2], [0.3, 0.3, 0.0, 0.0]])
    assert np.isfinite(out).all()
    twice = refine(probs, np.array([[0.5, 0.2, 0.15], [0.3, 0.3, 0.4]]), order)
    assert np.allclose(twice[0], [0.05, 0.5, 0.1, 0.2])  # half the rest: each other class halved


def test_the_coarse_problem_keeps_nine_classes_and_a_rest(monkeypatch):
    """Above 10 classes each row keeps its top max_classes - 1 = 9 classes plus the rest class, so
    the boosting sees 10 columns."""
    from calib.estimators import variational

    counts = []
    real = variational.top_classes
    monkeypatch.setattr(variational, "top_classes", lambda probs, count: counts.append(count) or real(probs, count))
    probs, labels, _ = known_ce_data(300, 15, 0.5, np.random.default_rng(8))
    assert variational_calibration_error(probs, labels, seed=0).coarsened
    assert counts and set(counts) == {9}


def test_each_rows_top_classes_are_found_once_for_all_folds_with_the_same_losses(monkeypatch):
    """Every row is in four outer folds' training rows and one's held-out rows, with the same
    mixture (lam depends on the fold size only): its top classes are found once, and the losses
    equal those of finding them in every fold, ties included (values repeated within rows)."""
    from calib.estimators import variational

    probs, labels, _ = known_ce_data(400, 15, 0.5, np.random.default_rng(9))
    probs = np.round(probs, 2)  # ties within rows
    probs /= probs.sum(axis=1, keepdims=True)
    found = []
    real = variational.top_classes
    monkeypatch.setattr(variational, "top_classes", lambda mixed, count: found.append(len(mixed)) or real(mixed, count))
    shared = variational.out_of_fold_losses(probs, labels, seed=3)
    assert sum(found) == 400

    def every_fold(self, rows, mixed):
        return real(mixed, self.kept)

    monkeypatch.setattr(variational.TopClassCache, "of", every_fold)
    per_fold = variational.out_of_fold_losses(probs, labels, seed=3)
    assert shared.keys() == per_fold.keys()
    assert all(np.array_equal(shared[key], per_fold[key]) for key in shared)


def test_top_l1_is_over_plus_under_row_by_row():
    """Two rows, the first recalibrated down at its top class (over), the second up (under):
    top_l1 is their sum by the definition, F - Y where G < F and Y - F where G > F (negated)."""
    probs = np.array([[0.7, 0.2, 0.1], [0.6, 0.3, 0.1]])
    recalibrated = np.array([[0.5, 0.3, 0.2], [0.8, 0.1, 0.1]])
    labels = np.array([1, 0])
    losses = per_sample_losses(probs, recalibrated, labels)
    assert np.allclose(losses["over"], [-(0.7 - 0.0), 0.0])
    assert np.allclose(losses["under"], [0.0, -(1.0 - 0.6)])
    assert np.allclose(losses["top_l1"], [-0.7, -0.4])


def test_a_zero_estimate_is_plus_zero():
    """A loss that is 0 on every row gives raw -0.0; the reported value is +0.0 (JSON and tables
    print 0, not -0)."""
    import math

    probs, labels, _ = known_ce_data(400, 3, 0.5, np.random.default_rng(2))
    estimate = variational_calibration_error(probs, labels, "ts", seed=0)
    zero = [key for key, value in estimate.unclipped.items() if value == 0.0]
    assert zero, "the overconfident draw has a side with no row"
    for key in zero:
        assert math.copysign(1.0, estimate.values[key]) == 1.0, key


@pytest.mark.parametrize("k,count", [(30, 9), (7, 3), (5, 5), (400, 9)])
def test_top_classes_equal_the_stable_full_sort(k, count):
    """The partition shortcut returns the stable sort's first columns, ties included: rows with
    probabilities rounded to 2 digits (ties at and across the count-th value), rows with underflowed
    zeros, one-hot rows and flat rows, in chunks of rows that split the ties."""
    rng = np.random.default_rng(k)
    probs = rng.dirichlet(np.full(k, 0.3), 3000)
    probs[::3] = np.round(probs[::3], 2)
    probs[1::7] = np.where(probs[1::7] < 0.05, 0.0, probs[1::7])
    probs[2::11] = np.eye(k)[rng.integers(0, k, len(probs[2::11]))]
    probs[5::13] = 1.0 / k
    expected = np.argsort(-probs, axis=1, kind="stable")[:, :count]
    assert np.array_equal(top_classes(probs, count), expected)
    assert np.array_equal(
        top_classes(np.ascontiguousarray(probs[:, ::-1]), count), np.argsort(-probs[:, ::-1], axis=1, kind="stable")[:, :count]
    )


@pytest.mark.slow
def test_large_k_reduction_matches_the_exact_recipe_where_both_run():
    probs, labels, truth = known_ce_data(1500, 15, 0.5, np.random.default_rng(2))
    coarse = variational_calibration_error(probs, labels, "ws-catboost", seed=0)
    exact = variational_calibration_error(probs, labels, "ws-catboost", seed=0, max_classes=1000)
    assert coarse.coarsened and not exact.coarsened
    for key in ("l1", "l2", "sq", "over"):
        assert coarse.values[key] == pytest.approx(exact.values[key], abs=0.02), key


@pytest.mark.parametrize("n_classes", [2, 8])
def test_all_folds_prepared_first_equal_a_fold_by_fold_run(n_classes):
    """The 5 x 4 CatBoost fits run one after another once every fold's warm start is prepared; the
    losses equal, to the bit, a plain loop that fits WS-CatBoost fold by fold with the same
    generator (binary and K = 8)."""
    from calib.estimators.recalibrators import ws_catboost
    from calib.estimators.variational import OUTER_FOLDS, kfold, out_of_fold_losses

    probs, labels, _ = known_ce_data(1200, n_classes, 0.5, np.random.default_rng(5))
    pooled = out_of_fold_losses(probs, labels, "ws-catboost", seed=3)
    rng = np.random.default_rng(3)
    n = len(labels)
    lam = 1.0 / ((n * (OUTER_FOLDS - 1)) // OUTER_FOLDS + 1)
    for held_out in kfold(n, OUTER_FOLDS, rng):
        train = np.setdiff1d(np.arange(n), held_out)
        g = ws_catboost(probs[train] * (1.0 - lam) + lam / n_classes, labels[train], rng)
        part = per_sample_losses(probs[held_out], g(probs[held_out] * (1.0 - lam) + lam / n_classes), labels[held_out])
        for key, values in part.items():
            assert np.array_equal(pooled[key][held_out], values), key


def test_missing_classes_in_a_fold_do_not_crash():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(6), 400)
    labels = rng.integers(0, 5, 400)
    labels[0] = 5  # class 5 appears once: absent from most training folds
    estimate = variational_calibration_error(probs, labels, "ws-catboost", seed=0)
    assert all(np.isfinite(v) for v in estimate.values.values())


@pytest.mark.parametrize("n_classes, absent", [(2, None), (4, None), (4, 3)])
def test_an_inner_fit_equals_catboost_fitted_on_pools_of_its_own_rows(n_classes, absent):
    """Every class present: the inner fits train on rows of one pool of all training rows, which
    must be the model CatBoost fits on pools made of those rows (features P, labels, baseline log
    s(P); binary: P_1 and the warm start's logit). A class absent from the training part: pools of
    the present classes' columns and of the held-out rows with a present label."""
    from catboost import CatBoostClassifier, Pool

    from calib.estimators.recalibrators import WarmStartBoosting

    probs, labels, _ = known_ce_data(400, n_classes, 0.5, np.random.default_rng(3))
    plan = WarmStartBoosting(probs, labels, np.random.default_rng(0), "compact-es10")
    train, held_out, seed = plan.folds[0]
    if absent is not None:
        labels = labels.copy()
        labels[train[labels[train] == absent]] = 0  # the class now appears only in held-out rows
        plan.labels = labels
    model, present = plan.fit_fold((train, held_out, seed))
    assert list(present) == [c for c in range(n_classes) if c != absent]
    features = probs[:, 1:2] if n_classes == 2 else probs
    warm = plan.start
    columns = slice(None) if n_classes == 2 else present
    known = held_out[np.isin(labels[held_out], present)]
    direct = CatBoostClassifier(**model.get_params())
    direct.fit(
        Pool(features[train], labels[train], baseline=warm[train][..., columns]),
        eval_set=Pool(features[known], labels[known], baseline=warm[known][..., columns]),
    )
    assert model.tree_count_ == direct.tree_count_
    new = Pool(features)
    assert np.array_equal(
        model.predict(new, prediction_type="RawFormulaVal"), direct.predict(new, prediction_type="RawFormulaVal")
    )


@pytest.mark.parametrize("n_classes", [2, 4])
def test_ws_catboost_g_is_the_mean_of_its_inner_models_worked_by_hand(n_classes):
    """g(P) = mean_j softmax(log s(P) + h_j(P)) with s(P) = softmax(beta log(P + 1e-12)) (binary:
    the sigmoid of the warm start's logit plus h_j(P_1)), each h_j read from its CatBoost model."""
    from catboost import Pool

    from calib.estimators.recalibrators import WarmStartBoosting, fit_inner_folds

    probs, labels, _ = known_ce_data(400, n_classes, 0.5, np.random.default_rng(4))
    plan = WarmStartBoosting(probs, labels, np.random.default_rng(0), "compact-es10")
    models = fit_inner_folds([plan])
    assert len(models) == 4 and all(model is not None for model, _ in models)
    new = known_ce_data(50, n_classes, 0.5, np.random.default_rng(5))[0]
    z = plan.beta * np.log(new + 1e-12)
    log_warm = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    expected = np.zeros_like(new)
    for model, present in models:
        raw = np.asarray(model.predict(Pool(new[:, 1:2] if n_classes == 2 else new), prediction_type="RawFormulaVal"))
        if n_classes == 2:
            p1 = 1.0 / (1.0 + np.exp(-(log_warm[:, 1] - log_warm[:, 0] + raw.reshape(-1))))
            expected += np.column_stack([1.0 - p1, p1])
        else:
            boosted = log_warm.copy()
            boosted[:, present] += raw.reshape(len(new), len(present))
            expected += np.exp(boosted) / np.exp(boosted).sum(axis=1, keepdims=True)
    expected /= len(models)
    assert np.allclose(plan.recalibrator(models)(new), expected, rtol=0, atol=1e-12)
    assert not np.allclose(expected, np.exp(log_warm), atol=1e-3)  # the boosting moved g off the warm start


def test_an_inner_fold_with_one_class_is_not_boosted_and_keeps_the_warm_start():
    """A binary sample with one positive row: the inner fold holding it out trains on one class, so
    it fits no model (None) and adds no correction; the other folds boost."""
    from calib.estimators.recalibrators import WarmStartBoosting, fit_inner_folds

    rng = np.random.default_rng(6)
    p1 = rng.uniform(0.01, 0.3, 200)
    labels = np.zeros(200, dtype=int)
    labels[17] = 1
    plan = WarmStartBoosting(np.column_stack([1 - p1, p1]), labels, np.random.default_rng(0), "compact-es10")
    models = fit_inner_folds([plan])
    alone = [i for i, (train, _, _) in enumerate(plan.folds) if 17 not in train]
    assert len(alone) == 1
    assert [model is None for model, _ in models] == [i in alone for i in range(len(models))]
    assert list(models[alone[0]][1]) == [0]


def test_evaluate_reports_vece_with_settings_and_unclipped(run, tmp_path):
    from conftest import SAMPLE

    code, out, err = run(
        "evaluate", SAMPLE / "cifar10_test.npz", "--vece-recalibrator", "ts", "--vece-max-rows", "4000", "--json", "-"
    )
    assert code == 0, err
    metrics = json.loads(out)["metrics"]
    entry = metrics["vece_over"]
    assert entry["settings"] == {
        "recalibrator": "ts",
        "folds": 5,
        "seed": 0,
        "rows": 4000,
        "subsampled": True,
        "coarsened_boosting": False,
    }
    assert metrics["vece_top_l1"]["unclipped"] == pytest.approx(entry["unclipped"] + metrics["vece_under"]["unclipped"])
    assert entry["value"] > metrics["vece_under"]["value"]  # this ResNet-110 is over-confident (ECE 2.6%)
    code, out, _ = run("evaluate", "--no-vece", SAMPLE / "cifar10_test.npz", "--json", "-")
    assert not any(key.startswith("vece") for key in json.loads(out)["metrics"])
    code, out, _ = run(
        "evaluate",
        SAMPLE / "cifar10_test.npz",
        "--metrics",
        "ece,vece_l1",
        "--vece-recalibrator",
        "ts",
        "--fail-if",
        "vece_l1>0.5",
        "--json",
        "-",
    )
    assert code == 0 and set(json.loads(out)["metrics"]) == {"ece", "vece_l1"}
    code, out, err = run(
        "evaluate",
        SAMPLE / "cifar10_test.npz",
        "--metrics",
        "vece_is_sq,kde_ece_l1,isotonic_ece",
        "--vece-recalibrator",
        "isotonic",
        "--vece-max-rows",
        "1500",
        "--json",
        "-",
    )
    assert code == 0, err
    metrics = json.loads(out)["metrics"]
    assert metrics["vece_is_sq"]["settings"]["folds"] == 1
    assert metrics["kde_ece_l1"]["settings"]["kernel"] == "dirichlet" and metrics["kde_ece_l1"]["settings"]["rows"] == 1500
    assert metrics["kde_ece_l1"]["value"] > 0 and metrics["isotonic_ece"]["value"] > 0


@pytest.mark.parametrize("recalibrator", ["ts", "hist-uniform", "hist-quantile", "isotonic", "quadratic", "beta", "svs", "sms"])
def test_every_recalibrator_recovers_known_errors(recalibrator):
    probs, labels, truth = binary_demo()
    binary = variational_calibration_error(probs, labels, recalibrator, seed=0).values
    assert binary["l1"] == pytest.approx(truth["l1"], abs=0.015) and binary["l1"] <= truth["l1"] + 0.01
    probs, labels, truth_probs = known_ce_data(3000, 10, 0.5, np.random.default_rng(1))
    truth = true_calibration_errors(probs, truth_probs)
    multi = variational_calibration_error(probs, labels, recalibrator, seed=0).values
    assert multi["top_l1"] == pytest.approx(truth["top_l1"], abs=0.015)
    assert 0.7 * truth["l1"] <= multi["l1"] <= truth["l1"] + 0.03  # top-class maps give a lower bound


def test_kde_ece_equals_a_literal_dirichlet_kernel_computation():
    """The blocked kernel matrix against scipy's Dirichlet log-density, one pair at a time."""
    from scipy.stats import dirichlet

    from calib.estimators import kde
    from calib.estimators.kde import kde_calibration_errors

    rng = np.random.default_rng(3)
    probs = rng.dirichlet(np.ones(3), 25)
    labels = rng.integers(0, 3, 25)
    loglik = []
    for h in kde.BANDWIDTHS:
        log_k = np.array(
            [[dirichlet.logpdf(probs[i], probs[j] / h + 1) if i != j else -np.inf for j in range(25)] for i in range(25)]
        )
        loglik.append(np.sum(np.log(np.exp(log_k).sum(1) / 24)))
    h = kde.BANDWIDTHS[int(np.argmax(loglik))]
    log_k = np.array(
        [[dirichlet.logpdf(probs[i], probs[j] / h + 1) if i != j else -np.inf for j in range(25)] for i in range(25)]
    )
    weights = np.exp(log_k - log_k.max(1, keepdims=True))
    regression = weights @ np.eye(3)[labels] / weights.sum(1, keepdims=True)
    got, bandwidth = kde_calibration_errors(probs, labels)
    assert bandwidth == h
    assert got["l1"] == pytest.approx(np.abs(regression - probs).sum(1).mean(), rel=1e-9)
    assert got["sq"] == pytest.approx(((regression - probs) ** 2).sum(1).mean(), rel=1e-9)


def test_in_sample_isotonic_squared_error_is_corps_miscalibration():
    """With an isotonic g fitted in sample, the squared variational error is the miscalibration
    component of the CORP decomposition: Brier(f) - Brier(isotonic(f)) (scikit-learn's PAVA)."""
    from sklearn.isotonic import IsotonicRegression

    probs, labels, _ = binary_demo(800, seed=4)
    p1, y = probs[:, 1], labels.astype(float)
    refit = IsotonicRegression(y_min=0, y_max=1).fit(p1, y).predict(p1)
    expected = np.mean((p1 - y) ** 2) - np.mean((refit - y) ** 2)
    estimate = variational_calibration_error(probs, labels, "isotonic", folds=1)
    assert estimate.values["sq"] == pytest.approx(expected, abs=1e-10)
    out_of_fold = variational_calibration_error(probs, labels, "isotonic")
    assert estimate.values["sq"] > out_of_fold.values["sq"]  # in sample overfits upwards


# WS-CatBoost's recipes ------------------------------------------------------------------------------


def test_each_recipe_fits_its_number_of_inner_models_per_outer_fold():
    """compact-es10 and compact: 5 outer folds x 4 inner models; paper: 5 x 8; quick: 5 x 2 (the
    count of progress ticks)."""
    from calib.estimators import RECIPES
    from calib.metrics import METRICS
    from calib.metrics.sample import SampleConfig, boosted_fit_count

    def fit_count(keys, recalibrator, recipe="compact-es10"):
        return boosted_fit_count([METRICS[key] for key in keys], SampleConfig(recalibrator, recipe=recipe))

    probs, labels, _ = known_ce_data(300, 3, 0.5, np.random.default_rng(0))
    for recipe, inner in (("compact-es10", 4), ("compact", 4), ("paper", 8), ("quick", 2)):
        assert RECIPES[recipe].inner_folds == inner
        ticks = []
        variational_calibration_error(probs, labels, seed=0, recipe=recipe, progress=lambda ticks=ticks: ticks.append(1))
        assert len(ticks) == 5 * inner == fit_count(["vece_l1"], "ws-catboost", recipe)
    assert [RECIPES[name].depth for name in ("compact-es10", "compact", "paper", "quick")] == [4, 4, 6, 4]
    assert fit_count(["vece_l1", "vece_is_sq"], "ws-catboost") == 5 * 4 + 4
    assert fit_count(["vece_l1"], "ts") == 0


def test_the_default_recipe_is_compact_es10_and_the_report_names_it():
    import calib
    from calib.errors import UsageError

    probs, labels, _ = known_ce_data(300, 3, 0.5, np.random.default_rng(1))
    report = calib.evaluate(probs, labels, kind="probs", request=calib.EvaluationRequest.of(metrics=["vece_l1"], vece=True))
    assert report.entries.metrics["vece_l1"].settings["recipe"] == "compact-es10"
    paper = calib.evaluate(
        probs, labels, kind="probs", request=calib.EvaluationRequest.of(metrics=["vece_l1"], vece=True, vece_recipe="paper")
    )
    assert paper.entries.metrics["vece_l1"].settings["recipe"] == "paper"
    assert "ws-catboost (paper), 5 folds" in paper.table() and "ws-catboost, 5 folds" in report.table()
    assert paper.values["vece_l1"] != report.values["vece_l1"]
    assert calib.metrics.vece(probs, labels, kind="probs")["l1"] == report.values["vece_l1"]
    ts = calib.evaluate(
        probs, labels, kind="probs", request=calib.EvaluationRequest.of(metrics=["vece_l1"], vece=True, vece_recalibrator="ts")
    )
    assert "recipe" not in ts.entries.metrics["vece_l1"].settings
    quick = calib.evaluate(
        probs, labels, kind="probs", request=calib.EvaluationRequest.of(metrics=["vece_l1"], vece=True, vece_recipe="quick")
    )
    assert quick.entries.metrics["vece_l1"].settings["recipe"] == "quick" and "ws-catboost (quick), 5 folds" in quick.table()
    compact = calib.evaluate(
        probs, labels, kind="probs", request=calib.EvaluationRequest.of(metrics=["vece_l1"], vece=True, vece_recipe="compact")
    )
    assert "ws-catboost (compact), 5 folds" in compact.table()
    with pytest.raises(UsageError, match="recipe must be one of compact-es10, compact, paper, quick; got 'fast'") as refused:
        calib.evaluate(
            probs, labels, kind="probs", request=calib.EvaluationRequest.of(metrics=["vece_l1"], vece=True, vece_recipe="fast")
        )
    assert "--" not in str(refused.value)


def test_an_unknown_recipe_is_one_line_and_exit_2(run):
    from conftest import SAMPLE

    code, out, err = run("evaluate", SAMPLE / "cifar10_test.npz", "--vece-recipe", "fast")
    assert (
        code == 2
        and err.strip().count("\n") == 0
        and "recipe must be one of compact-es10, compact, paper, quick; got 'fast' (--vece-recipe NAME)" in err
    )


@pytest.mark.parametrize(
    "recipe, learning_rate, early_stopping",
    [("compact-es10", 0.2, 10), ("compact", 0.2, 20), ("paper", 0.2, 20), ("quick", 0.3, 10)],
)
def test_each_recipe_trains_catboost_with_its_learning_rate_and_early_stopping(recipe, learning_rate, early_stopping):
    """The recipe's settings reach the CatBoost model of every inner fold (docs/vece.md)."""
    from calib.estimators.recalibrators import RECIPES, WarmStartBoosting

    probs, labels, _ = known_ce_data(400, 4, 0.5, np.random.default_rng(2))
    plan = WarmStartBoosting(probs, labels, np.random.default_rng(0), recipe)
    assert len(plan.folds) == RECIPES[recipe].inner_folds
    model, _ = plan.fit_fold(plan.folds[0])
    params = model.get_params()
    assert (params["learning_rate"], params["early_stopping_rounds"], params["depth"]) == (
        learning_rate,
        early_stopping,
        RECIPES[recipe].depth,
    )


def test_the_warm_start_temperature_stops_at_the_documented_bounds():
    """docs/vece.md: log beta in (-10, 10). Separable rows push beta up, mislabelled ones down:
    each stops on its bound, e^10 and e^-10."""
    from calib.estimators.recalibrators import fit_beta

    logits = np.log(np.array([[0.6, 0.4], [0.4, 0.6]] * 10) + 1e-12)
    labels = np.array([0, 1] * 10)
    assert fit_beta(logits, labels) == pytest.approx(np.exp(10.0), rel=1e-6)
    assert fit_beta(logits, 1 - labels) == pytest.approx(np.exp(-10.0), rel=1e-6)


def test_every_inner_fit_uses_the_documented_catboost_settings_and_writes_nothing(tmp_path, monkeypatch, capfd):
    """docs/vece.md: at most 100 iterations, Bernoulli subsample 0.5, 32 borders; a fit leaves no
    catboost_info folder in the working directory and prints nothing (a command's output is its own)."""
    from calib.estimators.recalibrators import WarmStartBoosting

    monkeypatch.chdir(tmp_path)
    probs, labels, _ = known_ce_data(400, 4, 0.5, np.random.default_rng(2))
    plan = WarmStartBoosting(probs, labels, np.random.default_rng(0), "compact")
    model, _ = plan.fit_fold(plan.folds[0])
    params = model.get_params()
    assert (params["iterations"], params["bootstrap_type"], params["subsample"], params["border_count"]) == (
        100,
        "Bernoulli",
        0.5,
        32,
    )
    assert list(tmp_path.iterdir()) == []
    out, err = capfd.readouterr()
    assert out == "" and err == ""


@pytest.mark.slow
def test_the_compact_recipe_gives_the_former_default_to_the_bit():
    """Before the default became ``compact-es10``, V-ECE l1 of the sample CIFAR-10 test logits was
    0.047664720557450656 (the golden record of ``evaluate --bundle``, uncalibrated); ``compact``
    still gives it."""
    import calib

    data = np.load(calib.sample_path("cifar10_test.npz"))
    assert calib.metrics.vece(data["logits"], data["labels"], recipe="compact")["l1"] == 0.047664720557450656


@pytest.mark.slow
def test_the_paper_recipe_gives_the_former_default_to_the_bit():
    """Before the default became ``compact``, V-ECE l1 of CIFAR-10 test was 0.048815302174328376
    (docs/benchmarks.md, the stress run); the paper's recipe still gives it."""
    import calib

    data = np.load(calib.sample_path("cifar10_test.npz"))
    assert calib.metrics.vece(data["logits"], data["labels"], recipe="paper")["l1"] == 0.048815302174328376


def test_the_uniform_histogram_recalibrator_by_hand():
    """Ten bins [b/10, (b+1)/10), the last closed; a bin predicts its rows' mean outcome, an empty
    bin the overall mean (V-ECE paper, section 5.1). Binary: on P_1; K = 3: the top class's
    probability maps to G and the other two share 1 - G in proportion to P."""
    from calib.estimators.recalibrators import RECALIBRATORS

    fit = RECALIBRATORS["hist-uniform"]
    p1 = np.array([0.05, 0.05, 0.15, 0.95, 0.95, 1.0])
    g = fit(np.column_stack([1 - p1, p1]), np.array([1, 0, 1, 1, 1, 0]), np.random.default_rng(0))
    new = np.array([0.05, 0.1, 0.5, 1.0])  # bin 0, on the edge into bin 1, an empty bin, the closed end
    expected = np.array([1 / 2, 1.0, 4 / 6, 2 / 3])
    assert np.allclose(g(np.column_stack([1 - new, new])), np.column_stack([1 - expected, expected]), atol=1e-15)

    probs = np.array([[0.55, 0.25, 0.20], [0.20, 0.58, 0.22], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]])
    g = fit(probs, np.array([0, 2, 2, 2]), np.random.default_rng(0))
    # top probabilities 0.55, 0.58 (bin 5: one of two right), 0.8 (bin 8: right), 0.4 (bin 4: right)
    row = np.array([0.5, 0.3, 0.2])  # top 0.5 in bin 5: G = 1/2
    assert np.allclose(g(row[None]), [[0.5, 0.5 * 0.3 / 0.5, 0.5 * 0.2 / 0.5]], atol=1e-15)
    row = np.array([0.1, 0.2, 0.7])  # bin 7 is empty: G = the overall mean 3/4
    assert np.allclose(g(row[None]), [[0.25 * 0.1 / 0.3, 0.25 * 0.2 / 0.3, 0.75]], atol=1e-15)


def test_the_quantile_histogram_recalibrator_puts_two_of_twenty_scores_in_each_bin():
    """Ten bins between the deciles of the training scores: 20 distinct scores (i + 1/2) / 20 put
    rows 2b and 2b + 1 in bin b (the decile j / 10 lies between scores 1.9 j - 1 and 1.9 j + 1),
    and each bin predicts its two rows' mean outcome."""
    from calib.estimators.recalibrators import RECALIBRATORS

    p1 = (np.arange(20) + 0.5) / 20
    outcome = np.array([1, 1, 1, 0] * 5)  # even bins' pairs both 1, odd bins' one of two
    g = RECALIBRATORS["hist-quantile"](np.column_stack([1 - p1, p1]), outcome, np.random.default_rng(0))
    expected = np.repeat([1.0, 0.5] * 5, 2)
    assert np.allclose(g(np.column_stack([1 - p1, p1]))[:, 1], expected, atol=1e-15)
    # below the lowest score and above the highest: the first and the last bin
    assert np.allclose(g(np.array([[1.0, 0.0], [0.0, 1.0]]))[:, 1], [1.0, 0.5], atol=1e-15)


@pytest.mark.parametrize("n_classes", [2, 4])
def test_the_training_loss_computed_once_a_fit_leaves_every_inner_model_unchanged(n_classes):
    """The inner fits compute CatBoost's training loss once a fit (``metric_period`` = the
    iterations), which nothing reads; the held-out loss that stops the boosting is still computed
    every round, so each model must equal, tree for tree, the one of a fit computing both every round."""
    from catboost import CatBoostClassifier

    from calib.estimators.recalibrators import LEARN_METRIC_PERIOD, WarmStartBoosting

    probs, labels, _ = known_ce_data(600, n_classes, 0.5, np.random.default_rng(5))
    plan = WarmStartBoosting(probs, labels, np.random.default_rng(1), "compact-es10")
    new = probs[:, 1:2] if n_classes == 2 else probs
    stopped_early = 0
    for train, held_out, seed in plan.folds:
        model, _ = plan.fit_fold((train, held_out, seed))
        params = model.get_params()
        assert params["metric_period"] == LEARN_METRIC_PERIOD == 100
        every_round = CatBoostClassifier(**{**params, "metric_period": 1})
        every_round.fit(plan._pool.slice(train), eval_set=plan._pool.slice(held_out))
        assert (model.tree_count_, model.best_iteration_) == (every_round.tree_count_, every_round.best_iteration_)
        assert np.array_equal(
            model.predict(new, prediction_type="RawFormulaVal"), every_round.predict(new, prediction_type="RawFormulaVal")
        )
        stopped_early += model.tree_count_ < 100
    assert stopped_early > 0  # the early stopping took part


def test_catboost_log_lines_but_the_expected_metric_period_warning_reach_standard_error(capfd):
    from calib.estimators.recalibrators import _METRIC_PERIOD_WARNING, _fit_quietly

    class Logging:
        def fit(self, fit_set, eval_set, log_cout, log_cerr):
            log_cerr.write(f"{_METRIC_PERIOD_WARNING} 'metric_period' is ignored for evaluation metric.\n")
            log_cout.write("Warning: a message calib does not expect\n")
            log_cerr.write("Warning: another\n")

    _fit_quietly(Logging(), None, None)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "Warning: a message calib does not expect\nWarning: another\n")


IMPORT_PROBE = (
    "import sys, threading\n"
    "import calib.evaluation.report as report\n"
    "from calib.cli.app import main\n"
    "seen = []\n"
    "streamed = report.stream_metrics\n"
    "def probe(*args, **kwargs):\n"
    "    seen.append('calib-import-catboost' in [t.name for t in threading.enumerate()] or 'catboost' in sys.modules)\n"
    "    return streamed(*args, **kwargs)\n"
    "report.stream_metrics = probe\n"
    "sys.argv = ['calib', 'evaluate', *sys.argv[1:]]\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "print(seen, 'catboost' in sys.modules, file=sys.stderr)\n"
)


@pytest.mark.parametrize(
    "options, importing",
    [([], "[True] True"), (["--no-vece"], "[False] False"), (["--vece-recalibrator", "ts"], "[False] False")],
)
def test_evaluate_imports_catboost_beside_the_streamed_metrics_only_when_it_boosts(tmp_path, options, importing):
    """With WS-CatBoost's V-ECE to compute, CatBoost's import (0.3-0.5 s) starts on a thread of its own
    before the streamed metrics; without a boosted fit (--no-vece, another recalibrator) it never
    happens."""
    import subprocess
    import sys

    probs, labels, _ = known_ce_data(300, 3, 0.5, np.random.default_rng(0))
    np.savez(tmp_path / "p.npz", probs=probs, labels=labels)
    done = subprocess.run([sys.executable, "-c", IMPORT_PROBE, str(tmp_path / "p.npz"), *options], capture_output=True, text=True)
    assert done.stderr.strip().endswith(importing), done.stdout + done.stderr


def test_the_catboost_import_thread_starts_once_a_process():
    import subprocess
    import sys

    code = (
        "import sys, threading\n"
        "from calib.estimators.recalibrators import start_catboost_import\n"
        "start_catboost_import(); start_catboost_import()\n"
        "threads = [t for t in threading.enumerate() if t.name == 'calib-import-catboost']\n"
        "print(len(threads), [t.daemon for t in threads])\n"
        "for t in threads: t.join()\n"
        "print('catboost' in sys.modules)\n"
        "start_catboost_import(); print(threading.active_count())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split("\n")[:3] == ["1 [False]", "True", "1"], done.stdout + done.stderr


def test_the_catboost_import_starts_once_and_only_while_catboost_is_not_imported(monkeypatch):
    import sys
    from types import SimpleNamespace

    from calib.core import extras
    from calib.estimators import recalibrators

    started = []

    class Recorded:
        def __init__(self, target, args, name):
            self.name = name

        def start(self):
            started.append(self.name)

    monkeypatch.setattr(extras, "threading", SimpleNamespace(Thread=Recorded))
    monkeypatch.setattr(extras, "_started", set())
    import catboost  # noqa: F401

    recalibrators.start_catboost_import()
    assert started == []  # imported already: nothing to start
    monkeypatch.delitem(sys.modules, "catboost")
    recalibrators.start_catboost_import()
    recalibrators.start_catboost_import()
    assert started == ["calib-import-catboost"]


@pytest.mark.parametrize("recalibrator, starts", [("ws-catboost", 1), ("ts", 0)])
def test_the_estimator_starts_the_catboost_import_before_its_warm_starts_only_to_boost(monkeypatch, recalibrator, starts):
    from calib.estimators import variational

    calls = []
    monkeypatch.setattr(variational, "start_catboost_import", lambda: calls.append(len(calls)))
    probs, labels, _ = known_ce_data(200, 3, 0.5, np.random.default_rng(0))
    variational.out_of_fold_losses(probs, labels, recalibrator)
    assert len(calls) == starts
