"""The metrics' details pinned by hand: the truth-based scores (NLL, Brier, CPSME at every level),
the debiased ECE's bins of one row, quantile bins when every confidence is equal, the ranking and
coverage-band arithmetic, bin counters in groups, and smooth ECE's grid, reflected Gaussian and
fixed point against a direct sum (each test says the formula it checks)."""

from __future__ import annotations

import numpy as np
import pytest

import calib
from calib.core.binning import BinCounter
from calib.metrics import METRICS, MetricConfig
from calib.metrics.accumulators import CPSME_ALPHAS, CumulativeMassRange, ProperScores, TrueProbScores
from calib.metrics.batch import Batch
from calib.metrics.definitions import DEFAULT_METRICS, metric_badness
from calib.metrics.metric_set import GroupedMetricSets
from calib.metrics.smooth import GRID, SIGMA_MIN, Smoother, grid_mass, smooth_ece, smooth_ece_at


def values(probs, labels, keys, **kwargs):
    return calib.evaluate(np.asarray(probs), np.asarray(labels), metrics=list(keys), kind="probs", **kwargs).values


# truth-based scores --------------------------------------------------------------------------------

PROBS = np.array([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25]])
TRUTH = np.array([[0.75, 0.25, 0.0], [0.25, 0.25, 0.5]])


def test_nll_and_brier_against_the_true_probabilities_by_hand():
    """nll_true = mean_i -sum_k p_ik log q_ik; brier_true = mean_i sum_k (q_ik - p_ik)^2 (p true, q model).
    Row 0: -(0.75 log 0.5 + 0.25 log 0.25) = 1.25 log 2; row 1: -(0.25 log .25 + .25 log .5 + .5 log .25)
    = 1.75 log 2; mean 1.5 log 2. Brier: row 0 (1/16 + 0 + 1/16) = 1/8; row 1 (0 + 1/16 + 1/16) = 1/8."""
    got = values(PROBS, [0, 2], ["nll_true", "brier_true"], true_probs=TRUTH)
    assert got["nll_true"] == pytest.approx(1.5 * np.log(2.0), rel=1e-15)
    assert got["brier_true"] == pytest.approx(0.125, rel=1e-15)


def test_cpsme_levels_and_values_by_hand():
    """Levels alpha = 0.05, 0.10, ..., 0.50 (ten of them). C*_alpha is the smallest top-k set of the
    TRUE probabilities with mass >= 1 - alpha; CPSME = mean |sum_{C*} (p - q)|.
    Row 0 (truth .75 .25 0): alpha < .25 needs {0, 1} (mass 1), gap (.75 - .5) + (.25 - .25) = .25;
    alpha >= .25 is met by {0} (mass .75 = 1 - .25 exactly at alpha .25), gap .25.
    Row 1 (truth .25 .25 .5, order 2, 0, 1; masses .5, .75, 1): alpha < .25 needs all three (gap 0);
    .25 <= alpha < .5 takes {2, 0} (mass .75 = 1 - .25 exactly at alpha .25), gap (.5 - .25) +
    (.25 - .25) = .25; alpha = .5 takes {2}, gap .25."""
    assert CPSME_ALPHAS == (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
    keys = [f"cpsme_{a:g}" for a in CPSME_ALPHAS]
    got = values(PROBS, [0, 2], keys + ["cpsme_avg"], true_probs=TRUTH)
    expected = {f"cpsme_{a:g}": (0.25 + (0.25 if a >= 0.25 else 0.0)) / 2 for a in CPSME_ALPHAS}
    for key in keys:
        assert got[key] == pytest.approx(expected[key], abs=1e-15), key
    assert got["cpsme_avg"] == pytest.approx(np.mean(list(expected.values())), abs=1e-15)
    assert METRICS["cpsme_0.1"].summary == "mass error on the true 0.9-set of the true probabilities"


def test_cpsme_with_one_class_uses_the_whole_row():
    """K = 1: every C*_alpha is the one class; the gap is p - q = 0 for probabilities that sum to 1."""
    state = TrueProbScores()
    state.update(Batch(np.array([0]), probs=np.array([[1.0]]), true_probs=np.array([[1.0]])))
    assert state.cpsme_sum.tolist() == [0.0] * len(CPSME_ALPHAS)


# proper scores, bins and bands ---------------------------------------------------------------------


def test_a_fresh_proper_score_state_has_nothing_clipped_and_reports_its_clip_only_when_used():
    """log p comes from clipped probabilities only when the input is probabilities."""
    assert ProperScores().prob_clipped == 0
    state = ProperScores().state()
    assert state["prob_clipped"] == 0 and state["n"] == 0
    logits = np.log(np.array([[0.5, 0.5], [0.25, 0.75]]))
    report = calib.evaluate(logits, np.array([0, 1]), metrics=["nll"], kind="logits")
    assert "prob_clip" not in report.to_dict()["metrics"]["nll"]
    report = calib.evaluate(np.exp(logits), np.array([0, 1]), metrics=["nll"], kind="probs")
    assert report.entries.metrics["nll"].settings["prob_clip"] == 1e-12


def test_batch_counts_rows_not_classes_and_needs_some_probabilities():
    batch = Batch(np.array([0, 1, 1]), probs=np.full((3, 5), 0.2))
    assert batch.n == 3
    with pytest.raises(ValueError, match="log_probs or probs"):
        Batch(np.array([0]))
    assert Batch(np.array([0]), log_probs=np.log([[0.5, 0.5]])).n == 1


def test_cumulative_mass_is_clipped_at_one_and_zero():
    """m_ik = top-k mass clipped to [0, 1]: a row whose float sum exceeds 1 ends at exactly 1; a
    negative rounding residue at 0."""
    probs = np.array([[0.7, 0.2, 0.1 + 2e-16], [1e-17, -1e-17, 1.0]])
    mass = Batch(np.array([0, 2]), probs=probs).cumulative_mass
    assert mass[0, -1] == 1.0 and mass[1].tolist() == [1.0, 1.0, 1.0]
    mass = Batch(np.array([0]), probs=np.array([[-1e-3, -2e-3]])).cumulative_mass
    assert mass.tolist() == [[0.0, 0.0]]


def test_coverage_band_counts_pairs_starting_exactly_at_its_lower_edge():
    """Pairs with lo <= m_ik <= hi: masses .5, .75, 1 with lo = .5 and hi = .75 take the first two;
    the label at rank 1 is covered by the second only."""
    band = CumulativeMassRange(0.5, 0.75)
    band.update(Batch(np.array([1]), probs=np.array([[0.5, 0.25, 0.25]])))
    assert (band.count, band.covered) == (2, 1)


def test_every_band_of_the_default_table_is_the_one_its_name_says():
    """coverage_0.9_0.92 counts masses in [0.9, 0.92], coverage_0.99_0.995 in [0.99, 0.995]: masses
    0.9, 0.92, 0.99, 0.995 each inside exactly one band, and 0.89, 0.93 in none."""
    probs = np.array([[0.9, 0.1, 0, 0], [0.92, 0.08, 0, 0], [0.99, 0.01, 0, 0], [0.995, 0.005, 0, 0]])
    probs = np.vstack([probs, [[0.89, 0.11, 0, 0], [0.93, 0.07, 0, 0]]])
    labels = np.zeros(6, dtype=int)
    report = calib.evaluate(probs, labels, metrics=["coverage_0.9_0.92", "coverage_0.99_0.995"], kind="probs")
    assert report.entries.metrics["coverage_0.9_0.92"].settings["range"] == [0.9, 0.92]
    assert report.entries.metrics["coverage_0.99_0.995"].settings["range"] == [0.99, 0.995]
    for key in ("coverage_0.9_0.92", "coverage_0.99_0.995"):
        state = METRICS[key].accumulator(MetricConfig(), 4)[1]()
        state.update(Batch(labels, probs=probs))
        assert state.count == 2, key


def test_default_table_and_settings_documented_in_the_metrics_reference():
    assert DEFAULT_METRICS == (
        "accuracy", "nll", "brier", "ece", "mce", "cw_ece", "cmce", "coverage_0.9_0.92", "coverage_0.99_0.995",
    )  # fmt: skip
    report = calib.evaluate(np.array([[0.6, 0.4], [0.3, 0.7]]), np.array([0, 0]), kind="probs")
    assert report.entries.metrics["brier"].settings == {"sum_over_classes": True}
    assert report.entries.metrics["ece"].settings["bins"] == 15 and report.entries.metrics["cmce"].settings["bins"] == 25


def test_brier_sums_over_classes_and_nll_and_accuracy_average_over_rows_by_hand():
    """Rows (.6, .4) y=0 and (.3, .7) y=0: NLL = -(log .6 + log .3)/2; Brier summed over classes =
    ((.4^2 + .4^2) + (.7^2 + .7^2)) / 2 = 0.65; accuracy 1/2."""
    got = values([[0.6, 0.4], [0.3, 0.7]], [0, 0], ["nll", "brier", "accuracy"])
    assert got["nll"] == pytest.approx(-(np.log(0.6) + np.log(0.3)) / 2, rel=1e-14)
    assert got["brier"] == pytest.approx(0.65, rel=1e-14)
    assert got["accuracy"] == 0.5


def test_debiased_ece_squared_skips_bins_of_one_row_by_hand():
    """sum over bins with n_b > 1 of (n_b/N) [(f_b - y_b)^2 - y_b (1 - y_b)/(n_b - 1)]; 15 bins.
    Rows: conf .8 (right), .8 (wrong) share bin 12; conf .5 (right) is alone in bin 7 and skipped.
    Bin 12: f = .8, y = .5: (2/3) [.09 - .25/1] = -0.10666..."""
    probs = np.array([[0.8, 0.2], [0.8, 0.2], [0.5, 0.5]])
    got = values(probs, [0, 1, 0], ["debiased_ece_sq"])["debiased_ece_sq"]
    assert got == pytest.approx((2 / 3) * ((0.8 - 0.5) ** 2 - 0.25), abs=1e-15)


def test_quantile_ece_with_every_confidence_equal_has_one_bin():
    """All confidences .75: every quantile edge is .75, merged into one; one bin, |3 - 2.25|/3... :
    two of three right: ECE = |2/3 - .75| = 1/12."""
    got = values([[0.75, 0.25]] * 3, [0, 0, 1], ["ece_quantile"])["ece_quantile"]
    assert got == pytest.approx(1 / 12, abs=1e-15)


def test_coverage_bands_rank_by_distance_to_their_middle():
    """The best value of coverage_0.9_0.92 is its middle 0.91: 0.91 -> 0, 0.93 -> 0.02, 0.89 -> 0.02."""
    assert metric_badness("coverage_0.9_0.92", 0.91) == pytest.approx(0.0, abs=1e-15)
    assert metric_badness("coverage_0.9_0.92", 0.93) == pytest.approx(0.02, abs=1e-15)
    assert metric_badness("coverage_0.9_0.92", 0.89) == pytest.approx(0.02, abs=1e-15)
    assert metric_badness("accuracy", 0.8) == -0.8 and metric_badness("ece", 0.1) == 0.1
    assert metric_badness("ece", None) == np.inf


def test_bin_counter_groups_and_defaults_by_hand():
    """One group by default (add and add_hits default to group 0); with 2 groups of 2 bins, a
    prediction .75 of group 1 lands in flat bin 1 * 2 + 1 = 3; an empty counter's error is undefined
    (NaN: a mean over no row, as a bootstrap replicate that drew none has)."""
    counter = BinCounter(2)
    assert counter.n_groups == 1 and counter.count.shape == (2,)
    counter.add(np.array([[0.25, 0.75]]), np.array([[1, 0]]))
    counter.add_hits(np.array([0.75]))
    assert counter.count.tolist() == [1, 1] and counter.sum_true.tolist() == [1, 1]
    grouped = BinCounter(2, 2)
    grouped.add(np.array([0.75, 0.25]), np.array([1, 0]), group=np.array([1, 0]))
    assert grouped.count.tolist() == [1, 0, 0, 1] and grouped.sum_true.tolist() == [0, 0, 0, 1]
    grouped.add(np.array([[0.75]]), None, group=0)
    assert grouped.count.tolist() == [1, 1, 0, 1]
    assert np.isnan(BinCounter(3).weighted_error()).all()
    merged = counter.merge(counter)
    assert merged.count.tolist() == [2, 2] and merged.sum_pred.tolist() == [0.5, 1.5]


def test_state_of_an_empty_list_metric_is_an_empty_array():
    state = METRICS["ece_quantile"].accumulator(MetricConfig(), 3)[1]().state()
    assert all(value.shape == (0,) for value in state.values())


def test_groups_in_any_order_get_the_rows_of_their_group():
    """Rows of groups 1, 0, 1 (unordered) and 0, 0 (one group, ordered) against a direct split."""
    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.8, 0.2]])
    labels = np.array([0, 0, 0, 1])
    for assignment in ([1, 0, 1, 0], [0, 0, 1, 1], [1, 1, 1, 1], [0, 1, 1, 1]):
        assignment = np.array(assignment)
        report = calib.evaluate(
            probs,
            labels,
            kind="probs",
            groups=assignment,
            request=calib.EvaluationRequest.of(metrics=["accuracy", "nll"], min_group_rows=1),
        )
        for group in np.unique(assignment):
            rows = assignment == group
            direct = values(probs[rows], labels[rows], ["accuracy", "nll"])
            got = report.group_values[str(group)] if str(group) in report.group_values else report.group_values[group]
            assert got["accuracy"] == pytest.approx(direct["accuracy"], abs=1e-15)
            assert got["nll"] == pytest.approx(direct["nll"], abs=1e-15)


def test_grouped_metric_set_skips_an_empty_batch():
    grouped = GroupedMetricSets.__new__(GroupedMetricSets)
    grouped.assignment = np.array([], dtype=int)
    assert list(grouped._parts(Batch(np.array([], dtype=int), probs=np.zeros((0, 2))), np.array([], dtype=int))) == []


# smooth ECE ----------------------------------------------------------------------------------------


def test_grid_mass_on_the_documented_1024_point_grid():
    """G = 1024 points k / 1023: 0.5 lies half way between points 511 and 512; 1 on point 1023; a
    value below 0 counts at 0 and above 1 at 1."""
    assert GRID == 1024
    mass = grid_mass(np.array([0.5, 1.0, 0.0]), np.array([1.0, 2.0, 4.0]))
    assert len(mass) == 1024
    assert mass[511] == 0.5 and mass[512] == 0.5 and mass[1023] == 2.0 and mass[0] == 4.0
    assert mass.sum() == 7.0
    assert grid_mass(np.array([-0.5]), np.array([1.0]))[0] == 1.0
    assert grid_mass(np.array([1.5]), np.array([1.0]))[1023] == 1.0


def reflected_gaussian_by_direct_sum(mass: np.ndarray, sigma: float) -> np.ndarray:
    """sum_j mass_j [K(t_i - t_j) + K(t_i + t_j) + K(2 - t_i - t_j)], K(x) = exp(-x^2 / 2 sigma^2),
    t = k / (G - 1), the point at 0 and at 1 reflected once (not counted twice), the kernel
    sampled at the grid's offsets up to one unit (distances counted in grid steps, d <= G - 1)."""
    grid = len(mass)
    i, j = np.arange(grid)[:, None], np.arange(grid)[None, :]
    kernel = lambda d: np.where(np.abs(d) <= grid - 1, np.exp(-0.5 * (d / (grid - 1) / sigma) ** 2), 0.0)  # noqa: E731
    direct = kernel(i - j) @ mass
    left = kernel(i + j[:, 1:]) @ mass[1:]  # images of t_j > 0 reflected at 0
    right = kernel(2 * (grid - 1) - i - j[:, :-1]) @ mass[:-1]  # images of t_j < 1 reflected at 1
    return direct + left + right


@pytest.mark.parametrize("sigma", [0.01, 0.1, 0.5])
def test_smoothing_is_the_reflected_gaussian_by_a_direct_sum(sigma):
    rng = np.random.default_rng(5)
    mass = grid_mass(rng.random(300), rng.normal(size=300))
    density = grid_mass(rng.random(300), np.ones(300))
    residual, smoothed_density = Smoother(mass, density).smoothed(sigma)
    np.testing.assert_allclose(residual, reflected_gaussian_by_direct_sum(mass, sigma), atol=1e-10)
    np.testing.assert_allclose(smoothed_density, reflected_gaussian_by_direct_sum(density, sigma), atol=1e-10)


def test_smooth_ece_is_its_own_bandwidth_at_the_fixed_point():
    """smECE = smECE_{sigma*} = sigma* (the fixed point), to the bisection's resolution."""
    rng = np.random.default_rng(2)
    confidence = rng.uniform(0.5, 1.0, 3000)
    correct = rng.random(3000) < confidence**2
    value, sigma = smooth_ece(confidence, correct)
    assert value == pytest.approx(sigma, rel=1e-9)
    mass = grid_mass(confidence, correct - confidence)
    density = grid_mass(confidence, np.ones(3000))
    assert smooth_ece_at(mass, density, sigma) == value


def test_smooth_ece_of_a_perfectly_calibrated_grid_stops_at_the_smallest_bandwidth():
    """Residuals that cancel in every grid cell: smECE_sigma = 0 < sigma for every sigma, so the
    fixed point is the smallest bandwidth, 1e-3, exactly."""
    confidence = np.array([0.5, 0.5, 0.75, 0.75, 0.75, 0.75])
    correct = np.array([1, 0, 1, 1, 1, 0], dtype=bool)
    assert smooth_ece(confidence, correct) == (0.0, SIGMA_MIN)


def test_smooth_ece_of_a_model_always_wrong_at_full_confidence_is_near_one():
    """Confidence 1 and never right: the residual -1 sits at 1; smECE_sigma of a point mass = its
    smoothed |residual| / smoothed density = 1 at every sigma, so the fixed point is sigma* = 1
    (above e^-1: a search capped lower could not reach it)."""
    value, sigma = smooth_ece(np.ones(50), np.zeros(50, dtype=bool))
    assert value == pytest.approx(1.0, abs=1e-9) and sigma == pytest.approx(1.0, abs=1e-9)


def test_a_mass_exactly_the_tolerance_below_a_band_counts_in_it():
    """The band [lo, hi] takes masses m >= lo - r lo (r = 2^-44): a first mass of exactly lo - r lo is in."""
    from calib.core.numerics import EDGE_RTOL

    first = 0.5 - EDGE_RTOL * 0.5
    band = CumulativeMassRange(0.5, 0.75)
    band.update(Batch(np.array([0]), probs=np.array([[first, 0.75 - first, 0.25]])))
    assert (band.count, band.covered) == (2, 2)


def test_a_true_mass_exactly_the_tolerance_below_a_level_reaches_it():
    """C*_alpha is the smallest top set of p with mass >= (1 - alpha)(1 - r): at alpha = 0.25 a top
    probability of exactly 0.75 - 0.75 r is enough on its own, so the gap is that class's alone."""
    from calib.core.numerics import EDGE_RTOL

    top = 0.75 - EDGE_RTOL * 0.75
    truth = np.array([[top, 1.0 - top, 0.0]])
    state = TrueProbScores()
    state.update(Batch(np.array([0]), probs=np.array([[0.5, 0.25, 0.25]]), true_probs=truth))
    assert state.cpsme_sum[CPSME_ALPHAS.index(0.25)] == pytest.approx(top - 0.5, abs=1e-15)


def test_a_cumulative_mass_above_one_by_rounding_is_one():
    mass = Batch(np.array([0]), probs=np.array([[0.6, 0.4 + 1e-12]])).cumulative_mass
    assert mass.tolist() == [[0.6, 1.0]]


def test_bin_counter_adds_to_group_zero_by_default_and_averages_one_row_by_itself():
    grouped = BinCounter(2, 2)
    grouped.add(np.array([0.75]), np.array([1]))
    grouped.add_hits(np.array([0.25]))
    assert grouped.count.tolist() == [0, 1, 0, 0] and grouped.sum_true.tolist() == [1, 1, 0, 0]
    one = BinCounter(2)
    one.add(np.array([0.25]), np.array([1]))
    assert one.weighted_error().tolist() == [0.75]


def test_smooth_ece_of_a_perfectly_calibrated_input_is_zero_in_the_report():
    """Each grid cell's residuals cancel: smECE = 0 (its bandwidth, 1e-3, is not the value)."""
    probs = np.array([[0.5, 0.5], [0.5, 0.5], [0.75, 0.25], [0.75, 0.25], [0.75, 0.25], [0.75, 0.25]])
    assert values(probs, [0, 1, 0, 0, 0, 1], ["smece"])["smece"] == 0.0


@pytest.mark.parametrize("assignment", [[0], [0, 1, 1, 2], [2, 0, 1, 0, 2]])
def test_every_group_gets_exactly_its_rows_in_any_layout(assignment):
    """One row; an ordered middle group (rows 1-2 of 4); groups out of order."""
    rng = np.random.default_rng(len(assignment))
    probs = rng.dirichlet(np.ones(3), size=len(assignment))
    labels = rng.integers(0, 3, len(assignment))
    assignment = np.array(assignment)
    report = calib.evaluate(
        probs, labels, kind="probs", groups=assignment, request=calib.EvaluationRequest.of(metrics=["nll"], min_group_rows=1)
    )
    for group in np.unique(assignment):
        rows = assignment == group
        got = report.group_values[str(group)]["nll"]
        assert got == pytest.approx(values(probs[rows], labels[rows], ["nll"])["nll"], abs=1e-15)


def test_a_batch_of_one_group_only_is_that_group():
    """Rows of group code 1 alone (no row of group 0 in the batch) form one part, of group 1."""
    grouped = GroupedMetricSets.__new__(GroupedMetricSets)
    grouped.assignment = np.array([0, 1, 1])
    batch = Batch(np.array([0, 1]), probs=np.array([[0.6, 0.4], [0.3, 0.7]]))
    parts = list(grouped._parts(batch, np.array([1, 2])))
    assert [group for group, _ in parts] == [1] and parts[0][1].n == 2


def test_top_k_accuracy_by_hand_with_a_tie_and_against_scikit_learn():
    """Labels ranked 2, 0, 1 and 1 (row 4's label ties with class 0, which goes first): top-2
    accuracy 3/4, top-3 1; without ties scikit-learn's top_k_accuracy_score, for every k."""
    import numpy as np

    import calib

    probs = np.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5], [0.1, 0.6, 0.3], [0.4, 0.4, 0.2]])
    labels = np.array([2, 2, 2, 1])
    values = calib.evaluate(probs, labels, metrics=["accuracy", "top2_accuracy", "top3_accuracy"], kind="probs").values
    assert (values["accuracy"], values["top2_accuracy"], values["top3_accuracy"]) == (0.25, 0.75, 1.0)
    from conftest import needs

    metrics = needs("sklearn.metrics")
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(12), size=500)
    labels = rng.integers(0, 12, 500)
    for k in (2, 3, 5, 10):
        ours = calib.evaluate(probs, labels, metrics=[f"top{k}_accuracy"], kind="probs").values[f"top{k}_accuracy"]
        assert ours == metrics.top_k_accuracy_score(labels, probs, k=k, labels=np.arange(12))
