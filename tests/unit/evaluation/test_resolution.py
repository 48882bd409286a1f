"""The resolution floor of binned errors and the gates on many groups that read it
(calib.evaluation.resolution), the automatic bin count, the per-bin intervals of the reliability
diagrams and the analytic intervals: each edge and rule checked against its definition, and the
gates on perfectly calibrated and on miscalibrated worlds."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import binomtest

import calib
from calib.api import as_predictions
from calib.core.binning import MIN_BIN_ROWS, BinCounter, clopper_pearson
from calib.diagnose import diagnose
from calib.errors import UsageError
from calib.evaluation.gate_parsing import parse_gate
from calib.evaluation.gates import Gate
from calib.evaluation.resolution import gap_distance, gap_level, noise_draws, simultaneous_floors
from calib.metrics import MetricConfig
from calib.metrics.definitions import METRICS, auto_bins, bin_count, debiased_ece_sq_interval
from calib.metrics.metric_set import MetricSet


def true_gaps(scores, p_true, bins=15):
    """(rows, sum of scores, sum of true probabilities) per equal-width bin of the scores."""
    index = np.minimum((scores * bins).astype(int), bins - 1)
    count = np.bincount(index, minlength=bins)
    return count, np.bincount(index, scores, bins), np.bincount(index, p_true, bins)


def label_world(n, labels, rng, bad=None, scale=2.0):
    """A perfectly calibrated multi-label model: z ~ N(0, scale^2), y ~ Bernoulli(sigmoid(z)); with
    ``bad``, that label's logits divided by 2 (under-confident)."""
    z = rng.normal(0.0, scale, (n, labels))
    y = (rng.random((n, labels)) < expit(z)).astype(np.int64)
    if bad is not None:
        z[:, bad] /= 2.0
    return z, y


# --- the automatic bin count ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, bins",
    [(1, 2), (4, 2), (5, 3), (500, 10), (501, 11), (2000, 16), (4000, 20), (4001, 21), (10_000, 28), (10**6, 126)],
)
def test_auto_bins_is_the_smallest_count_whose_cube_reaches_twice_the_rows(n, bins):
    """ceil((2n)^(1/3)) by integers: 4,000 rows give exactly 20 (20^3 = 8,000), one more row 21."""
    assert auto_bins(n) == bins
    assert bins**3 >= 2 * n > (bins - 1) ** 3


def test_a_bin_count_is_a_positive_integer_or_auto():
    assert bin_count("auto", 2000) == 16 and bin_count(7, 10) == 7 and bin_count("12", 10) == 12
    for bad in (0, -3, "x", True, 2.5, "1.5"):
        with pytest.raises(UsageError, match="positive number of bins or 'auto'"):
            bin_count(bad, 100)


def test_bins_auto_in_the_api_and_the_report_settings():
    rng = np.random.default_rng(0)
    z, y = rng.normal(size=(2000, 5)), rng.integers(0, 5, 2000)
    report = calib.evaluate(
        z, y, request=calib.EvaluationRequest.of(metrics=["ece", "cmce"], bins="auto", cmce_bins="auto")
    ).to_dict()
    assert report["metrics"]["ece"]["settings"]["bins"] == 16 == report["metrics"]["cmce"]["settings"]["bins"]
    explicit = calib.evaluate(z, y, request=calib.EvaluationRequest.of(metrics=["ece"], bins=16)).values["ece"]
    assert report["metrics"]["ece"]["value"] == explicit


def test_bins_auto_of_a_multi_label_input_counts_the_rows_per_label():
    z, y = label_world(500, 4, np.random.default_rng(1))
    report = calib.evaluate(z, y, request=calib.EvaluationRequest.of(metrics=["ece_pos"], bins="auto")).to_dict()
    assert report["metrics"]["ece_pos"]["settings"]["bins"] == auto_bins(500) == 10


def test_bins_auto_is_refused_for_a_directory_of_shards(run, tmp_path):
    rng = np.random.default_rng(2)
    np.savez(tmp_path / "a.npz", logits=rng.normal(size=(50, 3)), labels=rng.integers(0, 3, 50))
    code, _, err = run("evaluate", tmp_path, "--bins", "auto")
    assert code == 2 and "give a number of bins" in err


# --- drawing a perfectly calibrated model's bins ------------------------------------------------


def test_drawn_bins_keep_the_counts_and_draw_at_the_rate_nearer_one_half():
    counter = BinCounter(4)
    counter.count[:] = [0, 10, 10, 10]
    counter.sum_pred[:] = [0, 2.0, 6.0, 9.0]  # mean predictions 0.2, 0.6, 0.9
    counter.sum_true[:] = [0, 8.0, 4.0, 9.0]  # rates 0.8, 0.4 (as near 1/2 as 0.6: the prediction), 0.9
    drawn = counter.without_miscalibration(np.random.default_rng(0), 4000)
    assert drawn.sum_true.shape == (4000, 4) and np.array_equal(drawn.count, counter.count)
    # bin 1: 0.2 vs 0.8 equally far from 1/2 -> the prediction 0.2; bin 2: 0.6 vs 0.4 -> 0.6
    assert np.allclose(drawn.sum_pred[0], [0.0, 2.0, 6.0, 9.0])
    assert np.all(drawn.sum_true[:, 0] == 0)
    assert drawn.sum_true[:, 1:].mean(axis=0) == pytest.approx([2.0, 6.0, 9.0], abs=0.1)
    assert drawn.sum_true[:, 2].var() == pytest.approx(10 * 0.6 * 0.4, rel=0.1)
    counter.sum_true[:] = [0, 5.0, 4.0, 9.0]  # bin 1's rate 0.5 is nearer 1/2 than 0.2: drawn at 0.5
    drawn = counter.without_miscalibration(np.random.default_rng(0), 4000)
    assert drawn.sum_pred[0, 1] == 5.0 and drawn.sum_true[:, 1].var() == pytest.approx(2.5, rel=0.1)


def test_the_drawn_errors_are_the_metrics_own_formula_draw_by_draw():
    """Each drawn value is the metric computed on that draw's bins alone (one formula for both)."""
    rng = np.random.default_rng(3)
    probs = rng.dirichlet(np.ones(4), 300)
    labels = rng.integers(0, 4, 300)
    metric_set = MetricSet(["ece", "mce", "ece_l2", "cw_ece", "cmce"], MetricConfig(), 4)
    metric_set.update(calib.metrics.Batch(labels, probs=probs))
    for key in ("ece", "mce", "ece_l2", "cw_ece", "cmce"):
        draws = noise_draws(metric_set, key, [9], 5)
        accumulator = metric_set.accumulators[metric_set.source[key]]
        drawn = accumulator.counter.without_miscalibration(np.random.default_rng([9, 0]), 5)  # block 0
        for i in range(5):
            single = BinCounter(drawn.n_bins, drawn.n_groups)
            single.count, single.sum_pred, single.sum_true = drawn.count, drawn.sum_pred[i], drawn.sum_true[i]
            one = type(accumulator).__new__(type(accumulator))
            one.__dict__.update(accumulator.__dict__, counter=single)
            assert draws[i] == pytest.approx(float(METRICS[key].compute(one, MetricConfig())), abs=1e-15), key


def test_a_single_floor_is_the_upper_quantile_of_the_draws():
    draws = np.random.default_rng(4).gamma(2.0, 0.01, 1000)
    assert simultaneous_floors({"": draws}, 0.95)[""] == pytest.approx(np.percentile(draws, 97.5), abs=1e-14)


def test_simultaneous_floors_exceed_each_groups_own_quantile():
    rng = np.random.default_rng(5)
    draws = {str(g): rng.gamma(2.0, 0.01 * (g + 1), 1000) for g in range(20)}
    floors = simultaneous_floors(draws, 0.95)
    for name, values in draws.items():
        assert floors[name] > np.percentile(values, 97.5)
    # every group below its floor together in about 97.5% of the draws
    together = np.mean(np.all(np.stack([draws[g] <= floors[g] for g in draws]), axis=0))
    assert 0.96 <= together <= 0.985
    assert simultaneous_floors({"a": np.full(1000, 0.25), "b": draws["0"]}, 0.95)["a"] == 0.25  # no spread: the mean


# --- gates on many labels and groups ------------------------------------------------------------


def test_a_perfect_model_passes_the_worst_label_gate_where_the_raw_worst_value_fails():
    """The world of the bug: every label perfectly calibrated, the worst of 20 binned estimates well
    above the threshold (a raw gate fails every draw); with the floor no draw fails."""
    rng = np.random.default_rng(6)
    fails = raw_fails = 0
    for _ in range(12):
        z, y = label_world(1000, 20, rng)
        report = calib.evaluate(
            z, y, request=calib.EvaluationRequest.of(metrics=["ece_pos"], gates=["max_label:ece_pos>0.02"])
        ).to_dict()
        gate = report["gates"][0]
        fails += gate["outcome"] == "fail"
        raw_fails += gate["value"] > 0.02
        assert gate["floor_groups"] == 20 and gate["groups"] == 20
        assert "simultaneous over 20 groups" in gate["noise"] or "simultaneous over 20" in gate["noise"]
    assert raw_fails == 12 and fails == 0


def test_one_bad_label_is_caught_at_half_its_true_error():
    rng = np.random.default_rng(7)
    z = rng.normal(0.0, 2.0, 10**6)
    true_error = np.abs(expit(z / 2.0) - expit(z)).mean()  # 0.103
    for _ in range(4):
        z, y = label_world(5000, 20, rng, bad=0)
        gate = calib.evaluate(
            z, y, request=calib.EvaluationRequest.of(metrics=["ece_pos"], gates=[f"max_label:ece_pos>{true_error / 2:.4f}"])
        ).entries.gates[0]
        assert gate.outcome == "fail" and gate.fields["group"] == "0"


def test_the_lower_end_bounds_a_true_error_above_zero():
    """Over draws of a model whose true binned ECE is known and well above 0, the value less its
    floor stays at or below the truth (the triangle inequality; at least 97.5% by construction)."""
    rng = np.random.default_rng(8)
    counter_truth = []
    below = 0
    for _ in range(40):
        p_true = rng.uniform(0.05, 0.95, 3000)
        scores = np.clip(p_true + 0.06, 0.0, 1.0)  # over-confident by about 0.06
        y = (rng.random(3000) < p_true).astype(np.int64)
        probs = np.stack([1.0 - scores, scores], axis=1)
        entry = (
            calib.evaluate(probs, y, kind="probs", request=calib.EvaluationRequest.of(metrics=["ece_pos"], gates=["ece_pos>0.0"]))
            .entries.gates[0]
            .fields
        )
        _, predicted, true = true_gaps(scores, p_true)
        truth = float(np.abs(predicted - true).sum() / len(scores))
        counter_truth.append(truth)
        below += entry["bounds"][0] <= truth
    assert min(counter_truth) > 0.05 and below >= 39


# --- the mean-gap bound ----------------------------------------------------------------------------


def _exact_interval(k, n, level):
    found = binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="exact")
    return found.low, found.high


@pytest.mark.parametrize("k, n", [(0, 20), (7, 20), (20, 20), (300, 500)])
def test_the_gap_distance_is_zero_inside_the_interval_and_on_its_edges(k, n):
    ends = clopper_pearson(k, n, 0.975)  # equal to scipy's exact interval (test below)
    for inside in (float(ends[0]), float(ends[1]), float(ends[0] + ends[1]) / 2):
        assert gap_distance(k, n, inside, 0.975) == 0.0
    low, high = _exact_interval(k, n, 0.975)
    assert gap_distance(k, n, min(1.0, high + 0.01), 0.975) == pytest.approx(min(1.0, high + 0.01) - high, abs=1e-9)
    assert gap_distance(k, n, max(0.0, low - 0.01), 0.975) == pytest.approx(low - max(0.0, low - 0.01), abs=1e-9)


def test_the_gap_level_splits_the_one_sided_level_over_the_groups():
    assert gap_level(0.95) == pytest.approx(0.975)
    assert gap_level(0.95, 20) == pytest.approx(1 - 0.05 / 40)
    assert gap_level(0.9, 0) == pytest.approx(0.95)


@pytest.mark.parametrize("metric", ["ece", "mce", "ece_l2", "ece_pos"])
def test_errors_with_a_mean_gap_bound_are_at_least_the_mean_gap(metric):
    """The bound rests on value >= |mean outcome - mean score|, computed here from the rows (ties,
    scores on bin edges, a missing class)."""
    rng = np.random.default_rng(21)
    for case in range(30):
        n = int(rng.integers(5, 200))
        scores = rng.choice([0.0, 1 / 15, 0.2, 0.5, 14 / 15, 1.0], n) if case % 2 else rng.uniform(0, 1, n)
        hits = (rng.random(n) < rng.uniform(0, 1)).astype(np.int64)
        probs = np.stack([1.0 - scores, scores], axis=1)
        value = calib.evaluate(
            probs, hits, kind="probs", request=calib.EvaluationRequest.of(metrics=[metric], vece=False)
        ).to_dict()["metrics"][metric]["value"]
        if metric == "ece_pos":
            gap = abs(hits.mean() - scores.mean())
        else:  # top label: the larger probability (class 0 on a tie) against whether it is the label
            top = (scores > 0.5).astype(np.int64)
            gap = abs((top == hits).mean() - probs.max(axis=1).mean())
        assert value >= gap - 1e-12


def test_the_gap_bound_stays_below_the_true_error_of_a_poisson_binomial_count():
    """Rows with true probabilities spread over (0.05, 0.95) and scores 0.05 above them: the bound at
    0.975 exceeds the true mean gap in at most 2.5% of draws (Hoeffding 1956), here of 2,000."""
    rng = np.random.default_rng(22)
    above = 0
    for _ in range(2000):
        truth = rng.uniform(0.05, 0.95, 60)
        hits = (rng.random(60) < truth).sum()
        above += gap_distance(hits, 60, truth.mean() + 0.05, 0.975) > 0.05 + 1e-12
    assert above <= 50


def _slice_world(n, rng, slices=10, bad=None):
    from scipy.special import softmax

    z = rng.normal(0.0, 2.0, (n, 10))
    p = softmax(z, axis=1)
    y = (rng.random((n, 1)) > np.cumsum(p, axis=1)).sum(axis=1).clip(0, 9)
    groups = rng.integers(slices, size=n)
    if bad is not None:
        z[groups == bad] /= 2.0
    return z, y, groups


def test_a_slice_that_errs_one_way_is_caught_by_its_mean_gap(run, tmp_path):
    """One slice of 10 under-confident (its logits halved: true top-label ECE 0.21), 400 rows each: its
    value less the floor does not clear half its true error, the mean-gap bound does."""
    z, y, groups = _slice_world(4000, np.random.default_rng(27), bad=3)
    report = calib.evaluate(
        z, y, groups=groups, request=calib.EvaluationRequest.of(metrics=["ece"], gates=["max_group:ece>0.106"])
    ).to_dict()
    gate = report["gates"][0]
    gaps = report["bootstrap"]["floors"]["by_group"]["ece"]["gaps"]
    assert gate["outcome"] == "fail" and gate["group"] == "3"
    assert gate["value"] - gate["floor"] <= 0.106 < gate["gap_bound"] == gate["bounds"][0] == gaps["3"]
    assert "the bound from the mean gap, the larger (simultaneous over 10 groups)" in gate["noise"]
    np.savez(tmp_path / "s.npz", logits=z, labels=y, group=groups)
    code, out, _ = run("evaluate", tmp_path / "s.npz", "--group-by", "group", "--fail-if", "max_group:ece>0.106")
    assert code == 1 and "its bound from the mean score against the hit rate (simultaneous over 10 groups)" in out


def test_a_perfect_model_fails_the_worst_slice_gate_at_zero_at_most_one_time_in_twenty():
    """At a threshold of 0 the floor and the mean gap may each fail a perfect model 2.5% of the time
    (the mean gap alone failed 0.5% of 3,000 draws of this world); 40 seeded draws, at most 4 fail."""
    rng = np.random.default_rng(24)
    fails = 0
    for _ in range(40):
        z, y, groups = _slice_world(2000, rng)
        gate = calib.evaluate(
            z, y, groups=groups, request=calib.EvaluationRequest.of(metrics=["ece"], gates=["max_group:ece>0"])
        ).entries.gates[0]
        fails += gate.outcome == "fail"
    assert fails <= 4


@pytest.mark.parametrize(
    "expr, any_group",
    [
        ("max_group:ece>0.1", True),
        ("max_group:ece>=0.1", True),
        ("min_group:accuracy<0.5", True),
        ("min_group:accuracy<=0.5", True),
        ("max_group:accuracy<0.5", False),
        ("min_group:ece>0.1", False),
        ("min_group:ece>=0.1", False),
    ],
)
def test_which_aggregates_fail_on_one_group_and_which_on_every_group(expr, any_group):
    assert parse_gate(expr).any_group_decides is any_group


def _grouped_report(values: dict[str, float]):
    from reports import report

    groups = {name: {"n": 500, "metrics": {"accuracy": value}} for name, value in values.items()}
    return report({"accuracy": {"value": 0.5}}, groups=groups, min_rows=100)


@pytest.mark.parametrize(
    "values, expected",
    [
        ({"a": 0.4, "b": 0.6}, "pass"),  # the largest accuracy 0.6 is not below 0.5
        ({"a": 0.4, "b": 0.45}, "fail"),  # every group below: the largest too
        ({"a": 0.4, "b": 0.5}, "pass"),  # exactly on the edge: 0.5 < 0.5 does not hold
    ],
)
def test_the_largest_value_below_a_threshold_fails_only_when_every_group_is_below(values, expected):
    gate = Gate("max_group:accuracy<0.5", "accuracy", "<", 0.5, "max_group")
    entry = gate.check(_grouped_report(values), ignore_noise=True)
    assert entry["outcome"] == expected and entry["groups"] == 2


def test_the_smallest_value_below_a_threshold_fails_on_one_group():
    gate = Gate("min_group:accuracy<0.5", "accuracy", "<", 0.5, "min_group")
    assert gate.check(_grouped_report({"a": 0.4, "b": 0.9}), ignore_noise=True)["outcome"] == "fail"
    assert gate.check(_grouped_report({"a": 0.5, "b": 0.9}), ignore_noise=True)["outcome"] == "pass"


def test_the_gate_line_states_the_floor_and_how_many_labels(run, tmp_path):
    z, y = label_world(800, 6, np.random.default_rng(10))
    np.savez(tmp_path / "ml.npz", logits=z, labels=y)
    code, out, err = run("evaluate", tmp_path / "ml.npz", "--fail-if", "max_label:ece_pos>0.01", "--json", tmp_path / "r.json")
    report = json.loads((tmp_path / "r.json").read_text())
    gate = report["gates"][0]
    assert gate["outcome"] == "inconclusive" and code == 0
    floor = report["bootstrap"]["floors"]["by_group"]["ece_pos"]["values"][gate["group"]]
    gap = report["bootstrap"]["floors"]["by_group"]["ece_pos"]["gaps"][gate["group"]]
    assert gate["floor"] == floor and gate["gap_bound"] == gap
    assert gate["bounds"][0] == max(gate["value"] - floor, gap)  # below the bootstrap's end here
    assert "(the max label of 6 labels)" in out
    assert gate["noise"].startswith("bootstrap, Bonferroni over 6 labels, ")
    assert f"with 800 rows per label, ece_pos below {calib.reporting.text.format_value(floor)} cannot be told from 0" in out
    assert "(simultaneous over 6 labels)" in out


def test_floors_are_reproducible_from_the_seed():
    z, y = label_world(600, 5, np.random.default_rng(11))
    one = calib.evaluate(
        z, y, request=calib.EvaluationRequest.of(metrics=["ece_pos"], gates=["max_label:ece_pos>0.1"])
    ).to_dict()["bootstrap"]["floors"]
    two = calib.evaluate(
        z, y, request=calib.EvaluationRequest.of(metrics=["ece_pos"], gates=["max_label:ece_pos>0.1"])
    ).to_dict()["bootstrap"]["floors"]
    other = calib.evaluate(
        z, y, request=calib.EvaluationRequest.of(metrics=["ece_pos"], gates=["max_label:ece_pos>0.1"], bootstrap=200, seed=1)
    ).to_dict()
    other = other["bootstrap"]
    assert one == two and one != other["floors"]


def test_metrics_without_bins_keep_the_bootstrap_ends():
    rng = np.random.default_rng(12)
    z, y = rng.normal(size=(400, 3)), rng.integers(0, 3, 400)
    report = calib.evaluate(z, y, request=calib.EvaluationRequest.of(metrics=["nll"], gates=["nll>5"])).to_dict()
    assert "floors" not in report["bootstrap"] and "floor" not in report["gates"][0]
    assert report["gates"][0]["bounds"] == report["metrics"]["nll"]["ci"]


# --- intervals: per bin, and analytic -----------------------------------------------------------


@pytest.mark.parametrize("k, n", [(0, 1), (1, 1), (0, 9), (3, 9), (9, 9), (37, 120), (500, 1000)])
def test_clopper_pearson_matches_scipys_exact_binomial_interval(k, n):
    lower, upper = clopper_pearson(k, n, 0.95)
    reference = binomtest(k, n).proportion_ci(0.95, method="exact")
    assert lower == pytest.approx(reference.low, abs=1e-12) and upper == pytest.approx(reference.high, abs=1e-12)
    if k == 0:
        assert lower == 0.0
    if k == n:
        assert upper == 1.0


def test_reliability_bins_carry_their_interval_and_mark_too_few_rows():
    """Nine rows in a bin are too few to read, ten are not (MIN_BIN_ROWS = 10, on the edge)."""
    scores = np.r_[np.full(9, 0.55), np.full(10, 0.85)]  # two bins of the 15
    labels = np.r_[np.r_[np.ones(5), np.zeros(4)], np.r_[np.ones(7), np.zeros(3)]].astype(int)
    probs = np.stack([1.0 - scores, scores], axis=1)
    result = diagnose(as_predictions(probs, labels, kind="probs"))
    rows = {round(r["confidence"], 2): r for r in result.reliability}
    assert MIN_BIN_ROWS == 10
    assert rows[0.55]["few_rows"] is True and rows[0.85]["few_rows"] is False
    for r in rows.values():
        successes = round(r["observed"] * r["count"])
        reference = binomtest(successes, r["count"]).proportion_ci(0.95, method="exact")
        assert r["interval"] == pytest.approx([reference.low, reference.high], abs=1e-12)


def test_the_analytic_interval_of_the_squared_error_by_hand():
    """Two bins: n = (4, 6), mean predictions (0.3, 0.8), rates (0.25, 0.5); N = 10."""
    state = MetricSet(["debiased_ece_sq"], MetricConfig(bins=2), 2).accumulators[("top", 2)]
    state.n = 10
    state.counter = BinCounter(2)
    state.counter.count[:] = [4, 6]
    state.counter.sum_pred[:] = [1.2, 4.8]
    state.counter.sum_true[:] = [1.0, 3.0]
    terms = [(0.3 - 0.25) ** 2 - 0.25 * 0.75 / 3, (0.8 - 0.5) ** 2 - 0.25 / 5]
    s = [0.25 * 0.75 * 4 / 3, 0.25 * 6 / 5]
    w, n = [0.4, 0.6], [4, 6]
    variance = sum(w[b] ** 2 * (4 * max(terms[b], 0) * s[b] / n[b] + 2 * s[b] ** 2 / n[b] ** 2) for b in range(2))
    estimate = sum(w[b] * terms[b] for b in range(2))
    lower, upper = debiased_ece_sq_interval(state, MetricConfig(bins=2), 0.95)
    assert estimate == pytest.approx(METRICS["debiased_ece_sq"].compute(state, MetricConfig(bins=2)), abs=1e-15)
    assert (lower, upper) == pytest.approx(
        (estimate - 1.959963984540054 * variance**0.5, estimate + 1.959963984540054 * variance**0.5)
    )


def test_analytic_and_bootstrap_intervals_cover_a_known_squared_error():
    """Fixed scores, labels drawn from known true probabilities (over-confident by 0.05): both the
    analytic interval and the bootstrap's cover the true binned squared error in most draws, and
    their widths agree within a factor of 2."""
    rng = np.random.default_rng(13)
    n = 3000
    p_true = rng.uniform(0.5, 0.95, n)
    conf = np.clip(p_true + 0.05, 0, 1)
    probs = np.stack([conf, 1.0 - conf], axis=1)  # class 0 on top: its confidence conf
    count, predicted, true = true_gaps(conf, p_true)
    truth = float(np.sum((predicted - true) ** 2 / np.maximum(count, 1)) / n)
    covered = {"analytic": 0, "bootstrap": 0}
    ratios = []
    draws = 30
    for _ in range(draws):
        labels = (rng.random(n) >= p_true).astype(int)  # class 0 with probability p_true
        entry = calib.evaluate(
            probs, labels, kind="probs", request=calib.EvaluationRequest.of(metrics=["debiased_ece_sq"], bootstrap=200)
        ).to_dict()
        entry = entry["metrics"]["debiased_ece_sq"]
        for name, (lo, hi) in (("analytic", entry["ci_analytic"]), ("bootstrap", entry["ci"])):
            covered[name] += lo <= truth <= hi
        ratios.append((entry["ci_analytic"][1] - entry["ci_analytic"][0]) / (entry["ci"][1] - entry["ci"][0]))
    assert covered["analytic"] >= 0.85 * draws and covered["bootstrap"] >= 0.8 * draws
    assert 0.5 < np.median(ratios) < 2.0


def test_accuracy_and_the_l2_error_get_analytic_intervals_in_the_report(run, tmp_path):
    from conftest import SAMPLE

    data = np.load(SAMPLE / "cifar10_test.npz")
    evaluated = calib.evaluate(
        data["logits"][:2000],
        data["labels"][:2000],
        request=calib.EvaluationRequest.of(metrics=["accuracy", "ece_l2"], bootstrap=50),
    )
    report = evaluated.to_dict()
    accuracy = report["metrics"]["accuracy"]
    reference = binomtest(round(accuracy["value"] * 2000), 2000).proportion_ci(0.95, method="exact")
    assert accuracy["ci_analytic"] == pytest.approx([reference.low, reference.high], abs=1e-12)
    lower, upper = report["metrics"]["ece_l2"]["ci_analytic"]
    assert 0.0 <= lower < upper
    lines = calib.reporting.text.report_lines(evaluated.entries)
    assert f"accuracy: analytic 95% interval [{calib.reporting.text.format_value(reference.low)}, " in "\n".join(lines)


def test_a_change_gate_on_a_binned_error_subtracts_the_change_in_mean_noise(tmp_path):
    """Two perfectly calibrated models of the same rows, one sharper: the change gate compares the
    values less each one's mean noise (the bias of a perfect model's estimate at its bin counts);
    against a baseline without mean noise (an older report) the raw change is read."""
    from calib.evaluation.gate_parsing import parse_change_gates

    rng = np.random.default_rng(14)
    z = rng.normal(0.0, 2.0, (1500, 4))
    y = (rng.random((1500, 4)) < expit(z)).astype(np.int64)
    base = calib.evaluate(z, y, request=calib.EvaluationRequest.of(metrics=["ece_pos"], bootstrap=100)).to_dict()
    (tmp_path / "base.json").write_text(json.dumps(base))
    blunt = z / 1.0001
    report = calib.evaluate(
        blunt,
        y,
        request=calib.EvaluationRequest.of(
            metrics=["ece_pos"], increase_gates=parse_change_gates(["ece_pos=0"], str(tmp_path / "base.json")), bootstrap=100
        ),
    ).to_dict()
    gate = report["gates"][0]
    old_mean = base["bootstrap"]["floors"]["means"]["ece_pos"]
    new_mean = report["bootstrap"]["floors"]["means"]["ece_pos"]
    assert gate["mean_noise"] == [old_mean, new_mean]
    assert gate["worsening_less_noise"] == pytest.approx(gate["worsening"] - (new_mean - old_mean), abs=1e-15)
    per_label = [g for g in report["gates"] if g.get("group") == "2"][0]
    means = report["bootstrap"]["floors"]["by_group"]["ece_pos"]["means"]["2"]
    assert per_label["mean_noise"][1] == means and per_label["unit"] == "label"
    del base["bootstrap"]["floors"]
    (tmp_path / "old.json").write_text(json.dumps(base))
    report = calib.evaluate(
        blunt,
        y,
        request=calib.EvaluationRequest.of(
            metrics=["ece_pos"], increase_gates=parse_change_gates(["ece_pos=0"], str(tmp_path / "old.json")), bootstrap=100
        ),
    ).to_dict()
    assert "worsening_less_noise" not in report["gates"][0]


def test_a_multi_label_inputs_pooled_pairs_get_no_mean_gap_bound_and_its_labels_do():
    """The bound needs one independent pair per row: a multi-label row's pairs are correlated, so the
    pooled ece_pos reads the floor alone, and each label (one pair per row) reads both."""
    z, y = label_world(800, 6, np.random.default_rng(25))
    report = calib.evaluate(
        z, y, request=calib.EvaluationRequest.of(metrics=["ece_pos"], gates=["max_label:ece_pos>0.05", "ece_pos>0.05"])
    ).to_dict()
    floors = report["bootstrap"]["floors"]
    assert "gaps" not in floors and set(floors["by_group"]["ece_pos"]["gaps"]) == {str(label) for label in range(6)}
    assert floors["quantile"] == 0.975 and floors["draws"] == 1000  # (1 + 0.95) / 2
    worst, pooled = report["gates"]
    assert "gap_bound" in worst and "gap_bound" not in pooled and "mean gap" not in pooled["noise"]


def test_the_mean_gap_switch_reads_each_side_as_asked():
    """floors_section's ``gaps`` = (all rows, groups): a side switched off gets no bounds."""
    from calib.evaluation.resolution import floors_section

    z, y, groups = _slice_world(1200, np.random.default_rng(26), slices=3)
    report = calib.evaluate(z, y, groups=groups, request=calib.EvaluationRequest.of(metrics=["ece"], gates=["max_group:ece>0.5"]))
    streamed = report.entries.streamed
    overall, sets = streamed.state, dict(zip(["0", "1", "2"], streamed.group_states))
    both = floors_section(["ece"], overall, sets, 0.95, 0, (True, True))
    assert set(both["gaps"]) == {"ece"} and set(both["by_group"]["ece"]["gaps"]) == {"0", "1", "2"}
    groups_only = floors_section(["ece"], overall, sets, 0.95, 0, (False, True))
    assert "gaps" not in groups_only and groups_only["by_group"]["ece"]["gaps"] == both["by_group"]["ece"]["gaps"]
    rows_only = floors_section(["ece"], overall, sets, 0.95, 0, (True, False))
    assert rows_only["gaps"] == both["gaps"] and "gaps" not in rows_only["by_group"]["ece"]
