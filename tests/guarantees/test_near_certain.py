"""Near-certain scores: probabilities of 1e-300 .. 1e-3 and 1 minus those, as naive Bayes, boosted
trees and large networks export them. Every edge rule is relative to the numbers it compares (or
exact for the input's own probabilities), so distinct scores stay distinct: checked against plain
definitions that pool only exactly equal values, written here without calib's code, on both kernel
paths (docs/metrics.md, "Edges")."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import needs, peaked_logits, torchcp_modules
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import calib
from calib.core import kernels
from calib.io import predictions_from_arrays

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def on_both_kernel_paths(compute):
    """``compute()`` on the compiled kernels (where built) and on the pure NumPy path."""
    first = compute()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernels, "_compiled", None)
        patch.setattr(kernels, "_COMPILED_LOG", False)
        second = compute()
    return first, second


# plain definitions ----------------------------------------------------------------------------------


def pava(values, targets):
    """Isotonic regression of 0/1 ``targets`` on ``values`` by pool-adjacent-violators, in plain
    Python: rows with exactly equal values are one block first (weight = their count), nothing else
    is merged. A block keeps its integer count of ones, so blocks are compared exactly (t1 w2 > t2
    w1) and a level is one correctly rounded division (5/6, not a mean of means a rounding away).
    Returns (distinct values, fitted level of each)."""
    blocks = {}
    for v, t in zip(values.tolist(), targets.tolist()):
        weight, total = blocks.get(v, (0, 0))
        blocks[v] = (weight + 1, total + int(t))
    xs = sorted(blocks)
    stack = []  # [weight, ones, number of distinct values]
    for x in xs:
        weight, total = blocks[x]
        stack.append([weight, total, 1])
        while len(stack) > 1 and stack[-2][1] * stack[-1][0] > stack[-1][1] * stack[-2][0]:
            w2, t2, c2 = stack.pop()
            w1, t1, c1 = stack.pop()
            stack.append([w1 + w2, t1 + t2, c1 + c2])
    levels = [t / w for w, t, c in stack for _ in range(c)]
    return np.array(xs), np.array(levels)


def ivap(cal_scores, cal_targets, s):
    """The inductive Venn-Abers pair (p0, p1) of test score s (Vovk & Petej 2014): the isotonic fit
    of the calibration points plus (s, 0), resp. (s, 1), read at s."""
    pair = []
    for label in (0.0, 1.0):
        xs, levels = pava(np.append(cal_scores, s), np.append(cal_targets, label))
        pair.append(levels[xs.tolist().index(s)])
    return pair


def histogram_map(cal_scores, cal_targets, test_scores, n_bins=15):
    """Histogram binning: bin b holds [b/B, (b+1)/B) (the last closed), found by comparing with the
    edges; a bin's value is its calibration rows' frequency, an empty bin the base rate."""

    def bin_of(v):
        return next(b for b in range(n_bins) if v < (b + 1) / n_bins or b == n_bins - 1)

    counts, hits = np.zeros(n_bins), np.zeros(n_bins)
    for v, t in zip(cal_scores, cal_targets):
        counts[bin_of(v)] += 1
        hits[bin_of(v)] += t
    base = cal_targets.mean()
    return np.array([hits[bin_of(v)] / counts[bin_of(v)] if counts[bin_of(v)] else base for v in test_scores])


def split_conformal_sets(cal_probs, cal_labels, test_probs, alpha):
    """Split conformal with V = 1 - p_y: q the ceil((n + 1)(1 - alpha))-th smallest calibration
    score, C(x) = {y : 1 - p_y <= q} compared exactly."""
    scores = np.sort(1.0 - cal_probs[np.arange(len(cal_labels)), cal_labels])
    q = scores[math.ceil((len(scores) + 1) * (1 - alpha)) - 1]
    return (1.0 - test_probs) <= q


# draws ----------------------------------------------------------------------------------------------


@st.composite
def near_certain_scores(draw, n_min=20, n_max=60):
    """Scores 10^u, u uniform in [-300, -3], half of them taken as 1 minus that (most of which round
    to within a few ulps of 1, or to 1), with some exact repeats; 0/1 targets."""
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(n_min, n_max))
    rng = np.random.default_rng(seed)
    tiny = 10.0 ** rng.uniform(-300, -3, n)
    scores = np.where(rng.random(n) < 0.5, tiny, 1.0 - tiny)
    repeats = rng.random(n) < 0.2
    scores[repeats] = rng.choice(scores, repeats.sum())
    targets = (rng.random(n) < np.clip(scores, 0.05, 0.95)).astype(float)
    if targets.min() == targets.max():
        targets[0] = 1.0 - targets[0]
    test = np.concatenate([10.0 ** rng.uniform(-300, -3, 10), 1.0 - 10.0 ** rng.uniform(-300, -3, 10), scores[:10]])
    return scores, targets, test


def binary(p1):
    return np.column_stack([1.0 - p1, p1])


@PROPERTY
@given(near_certain_scores())
def test_venn_abers_is_the_exact_ivap_on_near_certain_scores(draw):
    scores, targets, test = draw
    fitted = calib.calibrator("venn-abers").fit(binary(scores), targets.astype(int), kind="probs")
    expected = np.array([ivap(scores, targets, s) for s in test])
    for p0, p1 in on_both_kernel_paths(lambda: fitted.fitted.interval(binary(test))):
        np.testing.assert_array_equal(np.column_stack([p0[:, 1], p1[:, 1]]), expected)


@PROPERTY
@given(near_certain_scores())
def test_isotonic_pools_only_equal_scores(draw):
    scores, targets, test = draw
    fitted = calib.calibrator("isotonic").fit(binary(scores), targets.astype(int), kind="probs")
    xs, levels = pava(scores, targets)
    expected = np.interp(test, xs, levels)
    for probs in on_both_kernel_paths(lambda: fitted.predict_proba(binary(test), kind="probs")):
        np.testing.assert_allclose(probs[:, 1], expected, rtol=1e-15, atol=0)


@PROPERTY
@given(near_certain_scores())
def test_histogram_binning_bins_by_the_edges(draw):
    scores, targets, test = draw
    fitted = calib.calibrator("hist").fit(binary(scores), targets.astype(int), kind="probs")
    expected = histogram_map(scores, targets, test)
    for probs in on_both_kernel_paths(lambda: fitted.predict_proba(binary(test), kind="probs")):
        np.testing.assert_array_equal(probs[:, 1], expected)


@PROPERTY
@given(near_certain_scores(n_min=40, n_max=80))
def test_the_conformal_set_rule_compares_the_inputs_own_scores_exactly(draw):
    scores, targets, test = draw
    labels = targets.astype(int)
    fitted = calib.calibrator("mr", alpha=0.1, score="msp").fit(binary(scores), labels, kind="probs")
    expected = split_conformal_sets(binary(scores), labels, binary(test), 0.1)
    for sets in on_both_kernel_paths(lambda: fitted.predict_sets(binary(test), kind="probs")):
        np.testing.assert_array_equal(sets, expected)


def test_a_threshold_of_1e_14_is_not_one_of_1e_13():
    """Scores 1e-14 and 1e-13 of logits (a computed softmax) are on different sides of a threshold
    at 1e-14 only through the relative slack: r max(1, q) = 5.7e-14 keeps 1e-13 out."""
    from calib.calibrators.conformal import in_conformal_set

    assert in_conformal_set(np.array([1e-14, 1e-13]), 1e-14).tolist() == [True, False]
    assert in_conformal_set(np.array([1e-14, 2e-14]), 1e-14, summed_terms=1).tolist() == [True, False]


def breast_cancer_naive_bayes():
    """The reproducer: breast cancer, 40% train / 30% calibration / 30% test (stratified, seeds 0
    and 1), GaussianNB's predict_proba exported as probabilities: scores down to 1e-300."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split
    from sklearn.naive_bayes import GaussianNB

    x, y = load_breast_cancer(return_X_y=True)
    x_train, x_rest, y_train, y_rest = train_test_split(x, y, test_size=0.6, random_state=0, stratify=y)
    x_cal, x_test, y_cal, y_test = train_test_split(x_rest, y_rest, test_size=0.5, random_state=1, stratify=y_rest)
    model = GaussianNB().fit(x_train, y_train)
    return model.predict_proba(x_cal), y_cal, model.predict_proba(x_test)


def test_venn_abers_on_naive_bayes_probabilities_is_the_exact_ivap():
    """Every test row's (p0, p1) equals the exact IVAP (within 1e-12) for both classes; before
    the relative rule, 105 of 171 rows were off by up to 0.17 (scores below 1e-12 merged)."""
    p_cal, y_cal, p_test = breast_cancer_naive_bayes()
    assert (p_cal < 1e-12).sum() > 50 and (p_test < 1e-12).sum() > 40
    fitted = calib.calibrator("venn-abers").fit(p_cal, y_cal, kind="probs")
    for p0, p1 in on_both_kernel_paths(lambda: fitted.fitted.interval(p_test)):
        for k in range(2):
            targets = (y_cal == k).astype(float)
            expected = np.array([ivap(p_cal[:, k], targets, s) for s in p_test[:, k]])
            np.testing.assert_allclose(np.column_stack([p0[:, k], p1[:, k]]), expected, rtol=0, atol=1e-12)


def test_venn_abers_on_naive_bayes_probabilities_equals_the_venn_abers_package():
    venn_abers = needs("venn_abers")
    p_cal, y_cal, p_test = breast_cancer_naive_bayes()
    fitted = calib.calibrator("venn-abers").fit(p_cal, y_cal, kind="probs")
    p0, p1 = fitted.fitted.interval(p_test)
    theirs = venn_abers.VennAbers()
    theirs.fit(p_cal, y_cal)
    _, pair = theirs.predict_proba(p_test)
    np.testing.assert_allclose(np.column_stack([p0[:, 1], p1[:, 1]]), pair, rtol=0, atol=1e-12)


def test_venn_abers_of_logits_keeps_small_scores_apart():
    """The same rows as logits log p (the softmax recomputes p, a few ulps off the given values):
    the runs' slack is relative (r c, r = 2^-44), so every recomputed test score below 1/2 (42 of
    them below 1e-12) gets the exact IVAP of the recomputed calibration scores, scores of 1e-14
    and 1e-13 apart. (Recomputed scores near 1 carry the rounding of 1: their runs meet within
    5.7e-14 of each other; docs/metrics.md, "Edges".)"""
    from calib.core.numerics import softmax

    p_cal, y_cal, p_test = breast_cancer_naive_bayes()
    logits_cal, logits_test = np.log(np.maximum(p_cal, 1e-300)), np.log(np.maximum(p_test, 1e-300))
    fitted = calib.calibrator("venn-abers").fit(logits_cal, y_cal, kind="logits")
    s_cal, s_test = softmax(logits_cal), softmax(logits_test)
    p0, p1 = fitted.fitted.interval(s_test)
    small = s_test < 0.5
    assert (s_test[small] < 1e-12).sum() > 40
    for k in range(2):
        targets = (y_cal == k).astype(float)
        expected = np.array([ivap(s_cal[:, k], targets, s) for s in s_test[small[:, k], k]])
        got = np.column_stack([p0[small[:, k], k], p1[small[:, k], k]])
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_a_binary_log_probability_of_minus_40_stays_minus_40():
    """A binary column of log-probabilities l: the two columns are (log(1 - e^l), l) in the log
    domain, so -40 is not floored at log 1e-12 and the complement of -1e-13 is log 1e-13 (1 - e^l
    would lose it); only an exact 0 (l = 0's complement) is floored."""
    preds = predictions_from_arrays(np.array([-40.0, -1e-13, 0.0, -0.5]), np.array([0, 1, 1, 0]), kind="log-probs")
    logits = preds.logits()
    assert logits[0, 1] == -40.0 and logits[0, 0] == pytest.approx(-math.exp(-40.0), rel=1e-15)
    assert logits[1, 0] == pytest.approx(math.log(1e-13), rel=1e-12) and logits[1, 1] == -1e-13
    assert logits[2].tolist() == [math.log(1e-12), 0.0]
    assert logits[3, 0] == pytest.approx(math.log(1 - math.exp(-0.5)), rel=1e-15)


# peaked models: subnormal probabilities and masses within 1e-12 of 1 ---------------------------------


def test_softmax_keeps_subnormal_probabilities_on_both_paths():
    """Gaps of 700-760 below the row's maximum: exp(-gap) is subnormal from -708.4 to -745.1 and 0
    below; both kernel paths give NumPy's value to an ulp of the subnormal range (the compiled path
    flushed them to 0 before), so no probability is 0 on one path and not on the other."""
    from calib.core.numerics import softmax

    gaps = np.linspace(700, 760, 6001)
    z = np.column_stack([np.zeros_like(gaps), -gaps])
    expected = np.exp(-gaps) / (1.0 + np.exp(-gaps))
    for probs in on_both_kernel_paths(lambda: softmax(z)):
        assert np.array_equal(probs[:, 1] == 0.0, expected == 0.0)
        assert (np.abs(probs[:, 1] - expected) <= np.spacing(np.maximum(expected, 5e-324))).all()
    assert (expected[(gaps > 709) & (gaps < 745)] > 0).all()


def test_rank_based_sets_of_a_peaked_model_are_the_same_on_every_path():
    """RAPS and top-k sets on logits with gaps of 700-760: the probabilities in the subnormal range
    rank the same on both kernel paths and in the exported graph (onnxruntime), which the
    compiled path's flush to 0 broke (tied zeros ordered by class index)."""
    z, labels = peaked_logits(1000, k=20)
    z[:, 1:6] = z[:, :1] - np.linspace(700, 760, 5)[None, :]  # five classes in and past the subnormal range
    for score in ("raps", "topk", "aps"):
        fitted = calib.calibrator("mr", alpha=0.1, score=score).fit(z[:500], labels[:500])
        compiled, numpy_path = on_both_kernel_paths(lambda f=fitted: f.predict_sets(z[500:]))
        assert np.array_equal(compiled, numpy_path), score
        if score == "raps":
            needs("onnx")
            ort = needs("onnxruntime")
            session = ort.InferenceSession(fitted.to_onnx(dtype="float64"), providers=["CPUExecutionProvider"])
            graph_sets = session.run(None, {session.get_inputs()[0].name: z[500:]})[1]
            assert np.array_equal(graph_sets, compiled)


def aps_sets(cal_probs, cal_labels, test_probs, alpha, classwise=False, slack_ulps=0):
    """APS sets by the definition: V(x, y) the sum of p over the classes ranked at or above y (ties to
    the lower index), summed left to right; q the ceil((n + 1)(1 - alpha))-th smallest calibration
    score (per class when ``classwise``); C(x) = {y : V(x, y) <= q + slack_ulps u |q|}, u = 2^-53.
    Returns (sets, test scores, q)."""

    def scores(p):
        order = np.argsort(-p, axis=1, kind="stable")
        out = np.empty_like(p)
        np.put_along_axis(out, order, np.cumsum(np.take_along_axis(p, order, axis=1), axis=1), axis=1)
        return out

    own = scores(cal_probs)[np.arange(len(cal_labels)), cal_labels]

    def quantile(values):
        values = np.sort(values)
        return values[math.ceil((len(values) + 1) * (1 - alpha)) - 1]

    k = cal_probs.shape[1]
    q = np.array([quantile(own[cal_labels == c]) for c in range(k)]) if classwise else quantile(own)
    test_scores = scores(test_probs)
    return test_scores <= q + slack_ulps * 2.0**-53 * np.abs(q), test_scores, q


def test_aps_sets_of_a_peaked_model_are_not_inflated():
    """97 classes, masses within 1e-12 of 1, APS at alpha 0.1. Probabilities as given: the sets are
    the definition's with the slack of the sums' rounding, 2 (K - 1) u |q| (2.1e-14 near 1), constant
    and classwise, on both kernel paths. Logits: the slack r max(1, |q|) = 5.7e-14 near 1. Either way
    a few classes more than the last bits of an exact comparison keep (at most 1% more for the
    constant threshold); with the former absolute 1e-12 every set was all 97 classes."""
    from calib.core.numerics import softmax

    z, labels = peaked_logits(4000)
    cal_z, cal_y, test_z = z[:2000], labels[:2000], z[2000:]
    cal_p, test_p = softmax(cal_z), softmax(test_z)
    for classwise in (False, True):
        threshold = "classwise" if classwise else "constant"
        expected = aps_sets(cal_p, cal_y, test_p, 0.1, classwise, slack_ulps=2 * 96)[0]
        fitted = calib.calibrator("mr", alpha=0.1, score="aps", threshold=threshold).fit(cal_p, cal_y, kind="probs")
        for sets in on_both_kernel_paths(lambda f=fitted: f.predict_sets(test_p, kind="probs")):
            np.testing.assert_array_equal(sets, expected)
    exact = aps_sets(cal_p, cal_y, test_p, 0.1)[0].sum(axis=1).mean()
    given = calib.calibrator("mr", alpha=0.1, score="aps").fit(cal_p, cal_y, kind="probs").predict_sets(test_p, kind="probs")
    from_logits = calib.calibrator("mr", alpha=0.1, score="aps").fit(cal_z, cal_y).predict_sets(test_z)
    assert exact < 30 and given.sum(axis=1).mean() <= 1.01 * exact and from_logits.sum(axis=1).mean() <= 1.01 * exact


def test_aps_sets_of_a_peaked_model_against_torchcp():
    """TorchCP's APS (SplitPredictor, not randomised) compares its float sums exactly: its sets are
    ours but for the classes whose mass lies above q by no more than the sums' rounding bound
    2 (K - 1) u q, which ours keep (docs/calibrators.md)."""

    from calib.core.numerics import softmax

    torch = needs("torch")
    score, predictor = torchcp_modules()
    z, labels = peaked_logits(4000)
    theirs = predictor.SplitPredictor(score.APS(randomized=False), alpha=0.1)
    theirs.calculate_threshold(torch.from_numpy(z[:2000]), torch.from_numpy(labels[:2000]), alpha=0.1)
    their_sets = theirs.predict_with_logits(torch.from_numpy(z[2000:])).numpy().astype(bool)
    cal_p, test_p = softmax(z[:2000]), softmax(z[2000:])
    ours = (
        calib.calibrator("mr", alpha=0.1, score="aps").fit(cal_p, labels[:2000], kind="probs").predict_sets(test_p, kind="probs")
    )
    exact, test_scores, q = aps_sets(cal_p, labels[:2000], test_p, 0.1)
    np.testing.assert_array_equal(their_sets, exact)
    extra = ours & ~their_sets
    assert not (their_sets & ~ours).any() and extra.sum() > 0
    assert (test_scores[extra] > q).all() and (test_scores[extra] <= q + 2 * 96 * 2.0**-53 * q).all()


def test_the_worked_example_of_tied_sums_against_torchcp():
    """docs/calibrators.md: q = 0.3 + 0.2 + 0.2 = 0.7 (a calibration row's APS score), and a test row
    whose third class has mass 0.4 + 0.2 + 0.1 = 0.7000000000000001, one ulp above: in calib's set
    (within 2 (K - 1) u q), out of an exact comparison's."""
    from calib.calibrators.conformal import given_score_terms, in_conformal_set, nonconformity

    calibration_row = np.array([[0.3, 0.2, 0.2, 0.1, 0.1, 0.1]])
    test_row = np.array([[0.4, 0.2, 0.1, 0.1, 0.1, 0.1]])
    q = nonconformity(calibration_row, "aps")[0, 2]
    v = nonconformity(test_row, "aps")[0, 2]
    assert q == 0.7 and v == 0.7000000000000001
    options = calib.calibrator("mr", score="aps").fitted.options
    terms = given_score_terms(options, 6, given=True)
    assert terms == 6 and in_conformal_set(np.array([v]), q, terms)[0] and not in_conformal_set(np.array([v]), q, 1)[0]


def test_log1mexp_on_both_branches_and_at_the_switch():
    """log(1 - e^l): near 0 by log(-expm1(l)) (l = -1e-13: log 1e-13 to 1e-15 relative, where
    log1p(-e^l) would be off by 1e-3), far below by log1p(-e^l) (l = -40: -e^-40), both log 1/2 at
    l = -log 2, and -inf at 0."""
    from calib.core.numerics import log1mexp

    got = log1mexp(np.array([-1e-13, -40.0, -math.log(2.0), 0.0, -1.0]))
    assert got[0] == pytest.approx(math.log(1e-13) - 5e-14, rel=1e-15)
    assert got[1] == pytest.approx(-math.exp(-40.0), rel=1e-15)
    assert got[2] == pytest.approx(math.log(0.5), rel=1e-15) and got[3] == -np.inf
    assert got[4] == pytest.approx(math.log(1.0 - math.exp(-1.0)), rel=1e-15)


def test_a_band_edge_slack_is_relative_to_the_edge_not_to_1():
    """Coverage[0.5, 0.75]: a mass 0.5 (1 - 1.5 r) lies 0.75 r below the edge, beyond its relative
    slack r 0.5 (out of the band), though within r of it in absolute terms."""
    from calib.core.numerics import EDGE_RTOL
    from calib.metrics.accumulators import CumulativeMassRange
    from calib.metrics.batch import Batch

    first = 0.5 * (1.0 - 1.5 * EDGE_RTOL)
    band = CumulativeMassRange(0.5, 0.75)
    band.update(Batch(np.array([0]), probs=np.array([[first, 0.8 - first, 0.2]])))
    assert band.count == 0  # the first mass is below the band, the second (0.8) above it
    inside = 0.5 * (1.0 - 0.5 * EDGE_RTOL)
    band.update(Batch(np.array([0]), probs=np.array([[inside, 0.8 - inside, 0.2]])))
    assert band.count == 1
