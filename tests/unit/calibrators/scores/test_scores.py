"""The RAPS, SAPS and top-k scores: hand arithmetic, MAPIE's own sets, coverage over many splits,
and every set method taking every score."""

import warnings

import numpy as np
import pytest
from conftest import SAMPLE, data_file, needs, torchcp_modules

import calib
from calib.calibrators.conformal import SCORES, ScoreOptions, conformal_quantile, label_scores, nonconformity
from calib.calibrators.scores import SCORES as SCORE_CLASSES
from calib.core.numerics import softmax

# p = [0.5, 0.2, 0.2, 0.1]: ranks 1, 2, 3 (tie to the lower index), 4
P = np.array([[0.5, 0.2, 0.2, 0.1]])


def test_scores_by_hand():
    assert np.allclose(nonconformity(P, "msp"), [[0.5, 0.8, 0.8, 0.9]])
    assert np.allclose(nonconformity(P, "aps"), [[0.5, 0.7, 0.9, 1.0]])
    # raps: A + lambda max(0, r - k_reg), lambda 0.1, k_reg 2: ranks 3 and 4 pay 0.1 and 0.2
    raps = ScoreOptions("raps", raps_lambda=0.1, raps_kreg=2)
    assert np.allclose(nonconformity(P, raps), [[0.5, 0.7, 1.0, 1.2]])
    assert np.allclose(nonconformity(P, ScoreOptions("raps", raps_lambda=0.0)), nonconformity(P, "aps"))
    # saps: p_max at rank 1, else p_max + (r - 1) lambda, lambda 0.2
    assert np.allclose(nonconformity(P, ScoreOptions("saps", saps_lambda=0.2)), [[0.5, 0.7, 0.9, 1.1]])
    assert np.array_equal(nonconformity(P, "topk"), [[1.0, 2.0, 3.0, 4.0]])
    # calibration scores are the test rows' own, to the bit
    logits = np.log(P)
    for score in SCORES:
        assert np.array_equal(label_scores(logits, np.array([2]), score), nonconformity(softmax(logits), score)[:, 2])


def test_label_scores_are_the_test_rows_scores_to_the_bit_with_ties():
    """Calibration scores come from a sort of values and the label's rank (no argsort): equal to
    the all-class scores at the label, bit for bit, on rows full of ties (probabilities that are
    multiples of 1/8, some exactly 0), every score, randomised or not, labels on tied classes."""
    rng = np.random.default_rng(3)
    weights = rng.integers(0, 4, size=(500, 6)).astype(np.float64)
    weights[weights.sum(axis=1) == 0, 0] = 1.0
    probs = weights / weights.sum(axis=1, keepdims=True)
    labels = rng.integers(0, 6, size=500)
    logits = np.log(np.maximum(probs, 1e-300))
    for score in SCORES:
        for randomize in (False, True) if SCORE_CLASSES[score].randomizable else (False,):
            options = ScoreOptions(score, randomize=randomize)
            expected = nonconformity(probs, options, seed=7)[np.arange(500), labels]
            assert np.array_equal(label_scores(logits, labels, options, probs=probs, seed=7), expected), (score, randomize)


@pytest.mark.parametrize("backend", ["compiled", "numpy"])
@pytest.mark.parametrize("n_classes", [2, 3, 1024, 1025, 10_000])
def test_scores_equal_a_stable_argsort_to_the_bit(backend, n_classes, monkeypatch):
    """Test rows are ranked by one sort of packed integer keys (the low bits of each value give way
    to its column) and scored in one pass per row; rows the keys cannot rank exactly are ranked
    again. Against a stable argsort and the formulas written out, bit for bit, on both kernel paths:
    values 1 ulp apart, exact zeros, -0.0 beside 0.0, values a hair outside [0, 1], float32-rounded
    rows and rows of equal values."""
    from calib.calibrators.conformal import row_uniforms
    from calib.core import kernels

    if backend == "compiled":
        monkeypatch.setattr(kernels, "_compiled", pytest.importorskip("calib._kernels", reason="the C extension is not built"))
    else:
        monkeypatch.setattr(kernels, "_compiled", None)
    rng = np.random.default_rng(n_classes)
    n = 300 if n_classes < 5000 else 40
    rows = np.arange(n)
    probs = rng.dirichlet(np.full(n_classes, 0.3), size=n)
    column = rng.integers(0, n_classes, size=n)
    probs[rows, (column + 1) % n_classes] = np.nextafter(probs[rows, column], 1.0)  # 1 ulp above a neighbour
    probs[::5, : n_classes // 2] = 0.0
    probs[1::7, 0] = -0.0
    probs[2::9, -1] = -1e-5
    probs[3::11, 0] = 1.0 + 1e-5
    probs[4::13] = probs[4::13].astype(np.float32)
    probs[5::17] = 1.0 / n_classes
    order = np.argsort(-probs, axis=1, kind="stable")
    ranked = np.take_along_axis(probs, order, axis=1)
    rank = np.arange(1.0, n_classes + 1.0)
    u = row_uniforms(probs, 5)[:, None]
    saps_randomised = ranked[:, :1] + (rank - 2.0 + u) * 0.2
    saps_randomised[:, 0] = u[:, 0] * ranked[:, 0]
    written_out = {  # score: (non-randomised, randomised), in rank order
        "aps": (np.cumsum(ranked, axis=1), np.cumsum(ranked, axis=1) - (1.0 - u) * ranked),
        "raps": (
            np.cumsum(ranked, axis=1) + 0.01 * np.maximum(rank - 5, 0.0),
            np.cumsum(ranked, axis=1) + 0.01 * np.maximum(rank - 5, 0.0) - (1.0 - u) * ranked,
        ),
        "saps": (ranked[:, :1] + (rank - 1.0) * 0.2, saps_randomised),
        "topk": (np.broadcast_to(rank, ranked.shape), rank - (1.0 - u)),
    }
    for score, both in written_out.items():
        for randomize, by_rank in zip((False, True), both):
            options = ScoreOptions(score, randomize=randomize)
            expected = np.empty_like(probs)
            np.put_along_axis(expected, order, by_rank, axis=1)
            got = nonconformity(probs, options, seed=5)
            assert np.array_equal(got.view(np.uint64), expected.view(np.uint64)), (score, randomize)


def test_bad_score_parameters_are_refused(run):
    with pytest.raises(ValueError, match="saps_lambda"):
        calib.calibrator("mr", score="saps", saps_lambda=0.0)
    code, _, err = run("fit", SAMPLE / "cifar10_val.npz", "-m", "mr", "--score", "raps", "-O", "raps_kreg=-1", "--out", "x")
    assert code == 2 and "raps_kreg" in err


@pytest.fixture(scope="module")
def cifar100():
    val, test = np.load(data_file("cifar100_resnet110_val.npz")), np.load(data_file("cifar100_resnet110_test.npz"))
    return val["logits"].astype(np.float64), val["labels"], test["logits"].astype(np.float64), test["labels"]


def _mapie_sets(cal_probs, cal_labels, test_probs, score):
    needs("mapie")
    from mapie.classification import SplitConformalClassifier
    from sklearn.base import BaseEstimator, ClassifierMixin

    class Given(ClassifierMixin, BaseEstimator):
        def fit(self, X, y):
            self.classes_ = np.arange(X.shape[1])
            return self

        def predict_proba(self, X):
            return X

        def predict(self, X):
            return X.argmax(1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SplitConformalClassifier(
            Given().fit(cal_probs, cal_labels), confidence_level=0.9, conformity_score=score, prefit=True
        )
        model.conformalize(cal_probs, cal_labels)
        return model.predict_set(test_probs)[1][:, :, 0]


def test_sets_equal_mapies_on_cifar100(cifar100):
    """LAC (our msp) row by row; top-k too, except rows whose probability at the cut-off rank is tied
    within MAPIE's tolerance of 1e-8 with the next one (MAPIE keeps every class that close to the
    q-th; we keep exactly q classes, ties ranked by the lower index, as for every score).
    MAPIE's APS and RAPS always randomise their calibration scores (and RAPS tunes lambda and k_reg
    on a split), so their sets are not ours by construction."""
    needs("mapie")
    cal_logits, cal_labels, test_logits, _ = cifar100
    cal_probs, test_probs = softmax(cal_logits), softmax(test_logits)
    for ours, theirs in (("msp", "lac"), ("topk", "top_k")):
        mine = calib.calibrator("mr", alpha=0.1, score=ours).fit(cal_logits, cal_labels).predict_sets(test_logits)
        other = _mapie_sets(cal_probs, cal_labels, test_probs, theirs)
        differ = np.flatnonzero((mine != other).any(axis=1))
        if ours == "msp":
            assert len(differ) == 0
        else:
            q = int(mine.sum(axis=1).max())
            ranked = -np.sort(-test_probs[differ], axis=1)
            assert len(differ) <= 5 and all(ranked[i, q - 1] - ranked[i, q] <= 1e-8 for i in range(len(differ)))


def test_sets_equal_torchcps_on_cifar100(cifar100):
    """TorchCP's THR (LAC), APS, RAPS, SAPS and TOPK, non-randomised, with its split and its
    class-conditional predictors: the same sets as ours, row by row, on CIFAR-100 (alpha 0.1).
    One difference, explained and pinned: TorchCP's SAPS scores a true label at rank 1 as U * p_max,
    0 when not randomised, while its score of every label gives rank 1 p_max (ours, both times, as
    Huang et al. 2024 define it). A constant threshold never lands on a rank-1 score here, so the
    sets agree; per class it does, and the sets agree once TorchCP's label scores are its own
    all-label scores."""
    torch = needs("torch")
    score, predictor = torchcp_modules()  # skips when TorchCP is missing

    cal_logits, cal_labels, test_logits, _ = cifar100
    cal, labels, test = torch.from_numpy(cal_logits), torch.from_numpy(cal_labels), torch.from_numpy(test_logits)

    def theirs(function, threshold):
        kind = predictor.SplitPredictor if threshold == "constant" else predictor.ClassConditionalPredictor
        model = kind(function, alpha=0.1)
        model.calculate_threshold(cal, labels, alpha=0.1)
        return model.predict_with_logits(test).numpy().astype(bool)

    functions = {
        "msp": score.LAC(),
        "aps": score.APS(randomized=False),
        "raps": score.RAPS(randomized=False, penalty=0.01, kreg=5),
        "saps": score.SAPS(randomized=False, weight=0.2),
        "topk": score.TOPK(randomized=False),
    }
    for threshold in ("constant", "classwise"):
        for ours, function in functions.items():
            mine = calib.calibrator("mr", alpha=0.1, score=ours, threshold=threshold).fit(cal_logits, cal_labels)
            differ = int((mine.predict_sets(test_logits) != theirs(function, threshold)).any(axis=1).sum())
            if ours == "saps" and threshold == "classwise":
                assert differ > 1000  # the rank-1 label scores: the thresholds of many classes differ
            else:
                assert differ == 0, (ours, threshold, differ)
    saps = functions["saps"]
    saps._calculate_single_label = lambda probs, label: saps._calculate_all_label(probs)[torch.arange(len(label)), label]
    mine = calib.calibrator("mr", alpha=0.1, score="saps", threshold="classwise").fit(cal_logits, cal_labels)
    assert np.array_equal(mine.predict_sets(test_logits), theirs(saps, "classwise"))


def test_coverage_over_100_random_splits(cifar100):
    """Split conformal with every score: average coverage >= 1 - alpha over 100 random 50/50 splits
    of CIFAR-100 test (the guarantee is in expectation over the split)."""
    _, _, logits, labels = cifar100
    alpha = 0.1
    rng = np.random.default_rng(0)
    for score in SCORES:
        scores = label_scores(logits, labels, score)
        coverage = []
        for _ in range(100):
            half = rng.permutation(len(labels)) < len(labels) // 2
            q = conformal_quantile(scores[half], alpha)
            coverage.append(np.mean(scores[~half] <= q))
        assert np.mean(coverage) >= 1 - alpha - 1e-3, (score, np.mean(coverage))


@pytest.mark.parametrize("method", ["mr", "conformal-ts", "ats-gq", "ats-mgq"])
@pytest.mark.parametrize("score", ["raps", "saps", "topk"])
def test_every_set_method_takes_every_score(method, score):
    val, test = np.load(SAMPLE / "cifar10_val.npz"), np.load(SAMPLE / "cifar10_test.npz")
    options = {} if method == "ats-mgq" else {"alpha": 0.1}
    fitted = calib.calibrator(method, score=score, **options).fit(val["logits"], val["labels"])
    probs = fitted.predict_proba(test["logits"][:2000])
    assert np.allclose(probs.sum(axis=1), 1.0) and np.isfinite(probs).all()
    assert fitted.fitted.fit_report()["score"] == score
    if method == "mr":  # mass rescaling puts exactly 1 - alpha of the mass on each non-trivial set
        in_set = fitted.predict_sets(test["logits"][:2000])
        sizes = in_set.sum(axis=1)
        keep = (sizes > 0) & (sizes < in_set.shape[1])
        assert np.allclose((probs * in_set).sum(axis=1)[keep], 0.9, atol=1e-9)


def test_set_diagnostics_by_hand():
    """CovGap and SSCV from four rows of K = 3 with alpha = 0.5: classes 0 (2 rows, 1 covered) and
    1 (2 rows, 2 covered); set sizes 1, 1, 2, 3 -> strata 0-1 (2 rows, 1 covered) and 2-3 (2, 2)."""
    from calib.evaluation.streaming import SetStats

    class Fitted:
        def fit_report(self):
            return {"alpha": 0.5, "score": "msp", "threshold": "constant"}

    stats = SetStats(Fitted(), 3)
    in_set = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [1, 1, 1]], dtype=bool)
    stats.update(in_set, np.array([1, 0, 0, 1]))
    values = stats.results()
    # coverage: class 0 rows 1 (no) and 2 (yes) -> 0.5; class 1 rows 0 (no) and 3 (yes) -> 0.5
    assert values["set_coverage"]["value"] == 0.5
    assert values["set_covgap"]["value"] == pytest.approx(0.0)
    assert values["set_sscv"]["value"] == pytest.approx(0.5)  # sizes 1, 1 never cover; 2, 3 always
    assert [c["class"] for c in values["set_covgap"]["worst_classes"]] == [0, 1]


def test_evaluate_reports_covgap_and_worst_classes(tmp_path, run):
    code, _, err = run("fit", SAMPLE / "cifar10_val.npz", "-m", "mr", "--score", "raps", "--out", tmp_path / "b")
    assert code == 0, err
    code, out, _ = run("evaluate", SAMPLE / "cifar10_test.npz", "--no-vece", "--bundle", tmp_path / "b", "--json", "-")
    import json

    metrics = json.loads(out)["metrics"]
    assert 0 <= metrics["set_covgap"]["value"] < 0.1 and 0 <= metrics["set_sscv"]["value"] <= 0.9
    assert len(metrics["set_covgap"]["worst_classes"]) == 5
    code, out, _ = run("evaluate", SAMPLE / "cifar10_test.npz", "--no-vece", "--bundle", tmp_path / "b")
    assert "lowest class coverage of the sets:" in out and "set_covgap" in out


def test_classwise_thresholds_cover_every_class_over_100_splits(cifar100):
    """Mondrian thresholds on CIFAR-100 test (100 rows per class, 50/50 splits): every class's
    coverage, averaged over 100 random splits, is >= 1 - alpha (the per-class guarantee holds in
    expectation), and CovGap is lower than with the constant threshold."""
    from calib.calibrators.thresholds import class_thresholds

    _, _, logits, labels = cifar100
    alpha, k = 0.1, 100
    scores = label_scores(logits, labels, "msp")
    rng = np.random.default_rng(1)
    per_class, gaps = [], {"classwise": [], "constant": []}
    for _ in range(100):
        half = rng.permutation(len(labels)) < len(labels) // 2
        q = class_thresholds(scores[half], labels[half], k, alpha)["q"]
        test_scores, test_labels = scores[~half], labels[~half]
        covered = np.bincount(test_labels, weights=test_scores <= q[test_labels], minlength=k) / np.bincount(
            test_labels, minlength=k
        )
        per_class.append(covered)
        marginal = conformal_quantile(scores[half], alpha)
        constant = np.bincount(test_labels, weights=test_scores <= marginal, minlength=k) / np.bincount(test_labels, minlength=k)
        gaps["classwise"].append(np.mean(np.abs(covered - (1 - alpha))))
        gaps["constant"].append(np.mean(np.abs(constant - (1 - alpha))))
    assert np.mean(per_class, axis=0).min() >= 1 - alpha - 0.01
    assert np.mean(gaps["classwise"]) < np.mean(gaps["constant"])


def test_classwise_rare_classes_and_pooling():
    """A class with too few rows for alpha is always in the set (q = +inf), counted in the fit
    report; min_class_rows pools such classes into the marginal quantile instead."""
    rng = np.random.default_rng(0)
    labels = np.r_[np.zeros(200, int), np.ones(200, int), np.full(5, 2)]  # class 2: 5 rows, too few at alpha 0.1
    logits = rng.normal(size=(len(labels), 3)) + 2.0 * np.eye(3)[labels]
    fitted = calib.calibrator("mr", alpha=0.1, threshold="classwise").fit(logits, labels)
    report = fitted.fitted.fit_report()
    assert report["classes always in the set (q = inf)"] == 1
    assert np.isinf(fitted.fitted.threshold_["q"][2]) and fitted.predict_sets(logits)[:, 2].all()
    pooled = calib.calibrator("mr", alpha=0.1, threshold="classwise", min_class_rows=10).fit(logits, labels)
    assert pooled.fitted.fit_report()["classes pooled into the marginal quantile"] == 1
    assert np.isfinite(pooled.fitted.threshold_["q"]).all()


def test_clustered_thresholds_sit_between_constant_and_classwise(cifar100):
    """Ding et al. 2023 on CIFAR-100 test (50/50 splits, aps): CovGap of the clustered thresholds
    lies between the constant threshold's and the classwise one's, with marginal coverage >= 1 - alpha
    on average."""
    from calib.calibrators.thresholds import class_thresholds, clustered_thresholds

    _, _, logits, labels = cifar100
    alpha, k = 0.1, 100
    scores = label_scores(logits, labels, "aps")
    rng = np.random.default_rng(1)
    gaps, coverage = {"constant": [], "classwise": [], "clustered": []}, []
    for split in range(30):
        half = rng.permutation(len(labels)) < len(labels) // 2
        test_scores, test_labels = scores[~half], labels[~half]
        thresholds = {
            "constant": np.full(k, conformal_quantile(scores[half], alpha)),
            "classwise": class_thresholds(scores[half], labels[half], k, alpha)["q"],
            "clustered": clustered_thresholds(scores[half], labels[half], k, alpha, seed=split)["q"],
        }
        for name, q in thresholds.items():
            hit = test_scores <= q[test_labels]
            per_class = np.bincount(test_labels, weights=hit, minlength=k) / np.bincount(test_labels, minlength=k)
            gaps[name].append(np.mean(np.abs(per_class - (1 - alpha))))
            if name == "clustered":
                coverage.append(hit.mean())
    mean = {name: np.mean(values) for name, values in gaps.items()}
    assert mean["classwise"] < mean["clustered"] < mean["constant"], mean
    assert np.mean(coverage) >= 1 - alpha - 1e-3


def test_clustered_bundle_round_trip(tmp_path):
    val, test = np.load(data_file("cifar100_resnet110_val.npz")), np.load(data_file("cifar100_resnet110_test.npz"))
    fitted = calib.calibrator("ats-gq", alpha=0.1, threshold="clustered", score="raps").fit(val["logits"], val["labels"], seed=3)
    report = fitted.fitted.fit_report()
    per_class = int(np.bincount(val["labels"]).min() * 100 / (75 + 100))  # the paper's heuristic
    assert report["threshold"] == "clustered" and report["clusters"] == per_class // 2
    assert report["rows per class that embed it"] == per_class
    fitted.save(str(tmp_path / "b"))
    again = calib.load(str(tmp_path / "b"))
    assert np.array_equal(again.predict_sets(test["logits"]), fitted.predict_sets(test["logits"]))
    assert np.array_equal(again.predict_proba(test["logits"]), fitted.predict_proba(test["logits"]))


def test_randomised_scores_by_hand():
    """With u per row: aps/raps V - (1 - u) p_y, saps u p_max at rank 1 else p_max + (r - 2 + u) lambda,
    topk r - 1 + u (u from the row's bits and the seed)."""
    from calib.calibrators.conformal import row_uniforms

    u = row_uniforms(P, 7)[0]
    assert 0.0 <= u < 1.0 and row_uniforms(P, 7)[0] == u and row_uniforms(P, 8)[0] != u
    aps = nonconformity(P, ScoreOptions("aps", randomize=True), seed=7)
    assert np.allclose(aps, [[0.5 - (1 - u) * 0.5, 0.7 - (1 - u) * 0.2, 0.9 - (1 - u) * 0.2, 1.0 - (1 - u) * 0.1]])
    saps = nonconformity(P, ScoreOptions("saps", saps_lambda=0.2, randomize=True), seed=7)
    assert np.allclose(saps, [[u * 0.5, 0.5 + u * 0.2, 0.5 + (1 + u) * 0.2, 0.5 + (2 + u) * 0.2]])
    assert np.allclose(nonconformity(P, ScoreOptions("topk", randomize=True), seed=7), [[u, 1 + u, 2 + u, 3 + u]])
    with pytest.raises(ValueError, match="randomise"):
        ScoreOptions("msp", randomize=True)


def test_randomised_sets_cover_exactly_one_minus_alpha(cifar100):
    """Randomised top-k on CIFAR-100 test over 100 random 50/50 splits: coverage 1 - alpha on average
    (the non-randomised sets over-cover, 0.91, because a set holds a whole number of classes)."""
    _, _, logits, labels = cifar100
    alpha = 0.1
    rng = np.random.default_rng(2)
    coverage = {}
    for randomize in (False, True):
        options = ScoreOptions("topk", randomize=randomize)
        scores = label_scores(logits, labels, options, seed=11)
        values = []
        for _ in range(100):
            half = rng.permutation(len(labels)) < len(labels) // 2
            values.append(np.mean(scores[~half] <= conformal_quantile(scores[half], alpha)))
        coverage[randomize] = np.mean(values)
    assert coverage[False] > 0.905 and abs(coverage[True] - (1 - alpha)) < 0.003


def test_randomised_bundle_gives_the_same_sets_after_reload(tmp_path):
    val, test = np.load(SAMPLE / "cifar10_val.npz"), np.load(SAMPLE / "cifar10_test.npz")
    fitted = calib.calibrator("mr", alpha=0.1, score="aps", randomize=True).fit(val["logits"], val["labels"], seed=5)
    assert fitted.fitted.fit_report()["randomize"] is True
    fitted.save(str(tmp_path / "b"))
    again = calib.load(str(tmp_path / "b"))
    assert np.array_equal(again.predict_sets(test["logits"]), fitted.predict_sets(test["logits"]))
    other_seed = calib.calibrator("mr", alpha=0.1, score="aps", randomize=True).fit(val["logits"], val["labels"], seed=6)
    assert not np.array_equal(other_seed.predict_sets(test["logits"]), fitted.predict_sets(test["logits"]))
    # the sets of a row do not depend on the rows around it (u is the row's own)
    part = fitted.predict_sets(test["logits"][5:9])
    assert np.array_equal(part, fitted.predict_sets(test["logits"])[5:9])


def test_class_quantiles_equal_numpys():
    from calib.calibrators.thresholds import class_quantiles

    rng = np.random.default_rng(0)
    scores, labels = rng.uniform(size=500), rng.integers(0, 6, 500)
    labels[labels == 3] = 2  # class 3 empty
    labels[0] = 5
    labels[labels == 5] = 4
    labels[0] = 5  # class 5 a single row
    levels = np.array([0.5, 0.6, 0.7, 0.8, 0.9, 0.95])
    got = class_quantiles(scores, labels, 7, levels)
    for c in range(7):
        rows = labels == c
        if rows.any():
            assert np.array_equal(got[c], np.quantile(scores[rows], levels)), c
        else:
            assert np.isnan(got[c]).all()


@pytest.mark.slow
def test_per_class_thresholds_at_ten_thousand_classes():
    """K = 10,000: one sort of the scores grouped by class, no loop over rows or classes."""
    import time

    rng = np.random.default_rng(0)
    n, k = 12_000, 10_000
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)).astype(np.float32)
    logits[np.arange(n), labels] += 4.0
    for threshold in ("classwise", "clustered"):
        start = time.perf_counter()
        fitted = calib.calibrator("mr", alpha=0.5, score="raps", threshold=threshold).fit(logits[:10_000], labels[:10_000])
        sets = fitted.predict_sets(logits[10_000:])
        assert time.perf_counter() - start < 120 and sets.shape == (2_000, k)
        assert fitted.fitted.threshold_["q"].shape == (k,)


def test_margin_score_is_the_best_other_probability_minus_the_labels():
    """V(x, y) = max_{y' != y} p_y' - p_y (Löfström et al. 2015), TorchCP's docstring rows: for
    labels (2, 1) -0.1 and 0.1; a tie at the top scores 0 for both tied classes; not randomisable."""
    probs = np.array([[0.1, 0.4, 0.5], [0.3, 0.3, 0.4], [0.45, 0.45, 0.1]])
    np.testing.assert_allclose(
        nonconformity(probs, "margin"), [[0.4, 0.1, -0.1], [0.1, 0.1, -0.1], [0.0, 0.0, 0.35]], rtol=0, atol=1e-15
    )
    assert label_scores(np.log(probs[:2]), np.array([2, 1]), "margin", probs=probs[:2]).tolist() == pytest.approx([-0.1, 0.1])
    with pytest.raises(calib.UsageError, match="margin has nothing to randomise"):
        ScoreOptions("margin", randomize=True)
    fitted = calib.calibrator("conformal-ts", alpha=0.1, score="margin").fit(
        np.log(probs.repeat(10, axis=0)), np.tile([2, 1, 0], 10)
    )
    assert fitted.fit_report()["score"] == "margin"
