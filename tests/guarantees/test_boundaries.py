"""Every edge rule pinned at its edge, from the definition, not from the code's own rule: bins,
bands, set thresholds, gates, tolerances and the bundle's checks (each test names the rule and
where its edge lies), and property tests of the invariants users rely on."""

from __future__ import annotations

import json

import numpy as np
import pytest
import reference as ref
from conftest import SAMPLE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reports import values

import calib
from calib import CALIBRATORS, BundleError, read_bundle
from calib.calibrators.conformal import in_conformal_set, scores_at_most
from calib.core.numerics import EDGE_RTOL, bin_index, edge_index, softmax
from calib.core.validation import EXACT_SUM_TOLERANCE, repair_probs
from calib.evaluation.gates import ChangeGate, Gate
from calib.io import predictions_from_arrays
from calib.metrics import METRICS, MetricConfig
from calib.metrics.batch import model_batch
from calib.metrics.metric_set import MetricSet

R = EDGE_RTOL  # a value within R |e| of an edge e is on it (docs/metrics.md, "Edges")


def smallest_on(edge: float, rule, slack: float | None = None) -> float:
    """The smallest float v that ``rule(v)`` puts on ``edge`` (the rule holds from it upward), found
    by stepping one float at a time from edge - slack: ``slack`` (R |e| unless given) below the edge,
    to the rounding."""
    slack = R * abs(edge) if slack is None else slack
    v = edge - slack
    while not rule(v):
        v = np.nextafter(v, np.inf)
    while rule(np.nextafter(v, -np.inf)):
        v = np.nextafter(v, -np.inf)
    assert abs((edge - v) - slack) <= 4 * np.spacing(edge), (edge, v)
    return float(v)


def test_quantile_bins_put_a_value_tolerance_below_an_edge_on_it():
    """Bins [e_b, e_{b+1}): a value on e_2 is in bin 2, and so is the value R e_2 below it (on it by
    the tolerance); the float below that one is in bin 1."""
    edges = np.array([0.0, 0.25, 0.5, 1.0])
    on = smallest_on(0.5, lambda v: edge_index(np.array([v]), edges)[0] == 2)
    values = np.array([0.5, on, np.nextafter(on, 0.0), 0.25, 1.0, 0.0])
    assert edge_index(values, edges).tolist() == [2, 2, 1, 1, 2, 0]


def test_ece_quantile_by_hand_with_values_on_the_edges():
    """Four rows, 2 bins: confidences 0.5 0.5 0.75 0.75 give quantile edges 0.5, 0.625, 0.75; the
    0.75 rows sit on the last edge (the last bin is closed): bin 0 = {0.5, 0.5} (1 correct), bin 1
    = {0.75, 0.75} (2 correct). ECE = (|1 - 1.0| + |2 - 1.5|) / 4 = 0.125."""
    probs = np.array([[0.5, 0.5], [0.5, 0.5], [0.75, 0.25], [0.75, 0.25]])
    labels = np.array([0, 1, 0, 0])
    got = calib.evaluate(probs, labels, kind="probs", request=calib.EvaluationRequest.of(metrics="ece_quantile", bins=2)).values[
        "ece_quantile"
    ]
    assert got == pytest.approx(0.125, abs=1e-15)


def test_equal_width_bins_at_and_just_below_every_edge():
    """b = min(floor(v B (1 + R)), B - 1): a value on k/B is in bin k, one R k/B / 2 below it too, one
    2 R k/B below it in bin k - 1 (for every edge of 10, 15 and 25 bins); the smallest value on an
    edge lies R k/B below it (to the rounding of one product), and the float below that one is in
    bin k - 1. The tolerance is relative: 1e-13 (far more than R e below an edge of 10 bins) is in
    bin 0, not bin 1 of 1e13 bins' worth."""
    for n_bins in (10, 15, 25):
        for k in range(1, n_bins):
            edge = k / n_bins
            got = bin_index(np.array([edge, edge - R * edge / 2, edge - 2 * R * edge]), n_bins).tolist()
            assert got == [ref.edge_bin(edge, n_bins), k, k - 1], (n_bins, k)
    for n_bins in (2, 8, 32, 15):
        for k in range(1, n_bins):
            on = smallest_on(k / n_bins, lambda v, b=n_bins, k=k: bin_index(np.array([v]), b)[0] == k)
            assert bin_index(np.array([on, np.nextafter(on, 0.0)]), n_bins).tolist() == [k, k - 1], (n_bins, k)


@pytest.mark.parametrize("edge_value, inside", [(0.92, True), ("within", True), ("beyond", False), (0.9, True)])
def test_coverage_band_edges(edge_value, inside):
    """Coverage[0.9, 0.92] of one row [a, 1 - a], label 0: the top-1 pair (mass a) is in the band
    iff 0.9 (1 - R) <= a <= 0.92 (1 + R); the top-2 pair (mass 1) never is. Inside: coverage 1 (the
    pair covers the label); outside: no pair in the band, the value is undefined (None)."""
    top = 0.92 + R * 0.92  # the largest mass in the band, as the band computes it
    a = {"within": top, "beyond": np.nextafter(top, 1.0)}.get(edge_value, edge_value)
    probs = np.array([[a, 1.0 - a]])
    value = calib.evaluate(probs, np.array([0]), metrics="coverage_0.9_0.92", kind="probs").values["coverage_0.9_0.92"]
    assert value == (1.0 if inside else None)
    assert ref.coverage(probs, [0], 0.9, 0.92) == value or (value is None and ref.coverage(probs, [0], 0.9, 0.92) is None)


# conformal set rule and levels --------------------------------------------------------------------------


def test_the_set_rule_at_its_edge():
    """C(x) = {y : V <= q + R max(1, |q|)}: V = q in, V = q + R max(1, q) in (on the edge), the next
    float out, for q = 0.7, 3 (a RAPS score with penalties) and 1e-14 (a near-certain model's score
    1 - p_y, whose rounding is that of p_y near 1: four slacks above is out). Scores of the input's
    own probabilities, one operation (msp): V = q in, the next float above q out; a sum of n = 4
    probabilities: within 2 (n - 1) u q above q in, the next float out."""
    for q in (0.7, 3.0, 1e-14):
        edge = q + R * max(1.0, abs(q))
        scores = np.array([q, edge, np.nextafter(edge, np.inf), np.nextafter(q, 0.0), q + 4 * (edge - q)])
        assert in_conformal_set(scores, q).tolist() == [True, True, False, True, False], q
        exact = np.array([q, np.nextafter(q, np.inf), np.nextafter(q, 0.0)])
        assert in_conformal_set(exact, q, summed_terms=1).tolist() == [True, False, True], q
        summed_edge = q + 6 * 2.0**-53 * q
        summed = np.array([q, summed_edge, np.nextafter(summed_edge, np.inf)])
        assert in_conformal_set(summed, q, summed_terms=4).tolist() == [True, True, False], q


def test_empirical_level_counts_a_calibration_score_equal_to_the_value():
    """#{V_i <= v}: v equal to a calibration score counts it; v about R max(1, v) below it too (on
    it); the float below that one does not. Exact (scores of the input's own probabilities): only
    v >= V_i."""
    calibration = np.array([0.1, 0.5, 0.5, 0.9])
    on = smallest_on(0.5, lambda v: scores_at_most(calibration, np.array([v]))[0] == 3, slack=R)
    assert scores_at_most(calibration, np.array([0.5, on, np.nextafter(on, 0.0), 0.95])).tolist() == [3, 3, 1, 4]
    below = np.nextafter(0.5, 0.0)
    assert scores_at_most(calibration, np.array([0.5, below]), summed_terms=1).tolist() == [3, 1]


def test_classwise_sets_keep_a_test_row_equal_to_a_calibration_row():
    """Per-class thresholds: the rows that set a class's q are in their own sets when applied to
    themselves (V = q exactly), for every class with enough rows."""
    data = np.load(SAMPLE / "cifar10_val.npz")
    logits, labels = data["logits"][:3000], data["labels"][:3000]
    fitted = calib.calibrator("mr", alpha=0.1, threshold="classwise").fit(logits, labels)
    sets = fitted.predict_sets(logits)
    q = fitted.fitted.threshold_["q"]
    scores = 1.0 - softmax(logits.astype(np.float64))[np.arange(len(labels)), labels]
    at_threshold = scores == q[labels]
    assert at_threshold.sum() >= 10 and sets[np.flatnonzero(at_threshold), labels[at_threshold]].all()


# Venn-Abers merge, temperature stopping rule, the exactness tolerance ---------------------------------


def test_venn_abers_merges_p0_and_p1_as_p1_over_one_minus_p0_plus_p1():
    """Rows [0.5, 0.5, 0], [0.5, 0.25, 0.25], [0.2, 0.2, 0.6] labelled 1, 0, 2: at p_0 = 0.2 the
    interval is (0, 1/2), so g_0 = (1/2) / (1 - 0 + 1/2) = 1/3 (the other merge, p1 / (1 + p0 - p1),
    would give 1)."""
    probs = np.array([[0.5, 0.5, 0.0], [0.5, 0.25, 0.25], [0.2, 0.2, 0.6]])
    fitted = calib.calibrator("venn-abers").fit(probs, np.array([1, 0, 2]), kind="probs").fitted
    maps = fitted.class_maps(np.log(np.maximum(probs, 1e-12)), probs, given=True)
    assert maps[2, 0] == pytest.approx(1.0 / 3.0, abs=1e-15)
    p0, p1 = fitted.interval(probs)
    np.testing.assert_allclose(maps, p1 / (1.0 - p0 + p1), rtol=0, atol=1e-15)


def test_temperature_is_the_root_of_the_nll_gradient_to_machine_precision():
    """beta = 1/T solves mean_i (E_beta[z_i] - z_{i,y_i}) = 0; a bracketing root finder on the
    gradient written here (scipy's softmax, brentq to 1e-15) gives the same beta within 1e-11."""
    from scipy.optimize import brentq
    from scipy.special import softmax as scipy_softmax

    data = np.load(SAMPLE / "cifar10_val.npz")
    logits, labels = data["logits"].astype(np.float64), data["labels"]

    def gradient(beta):
        p = scipy_softmax(beta * logits, axis=1)
        return float(np.mean((p * logits).sum(axis=1) - logits[np.arange(len(labels)), labels]))

    expected = brentq(gradient, 0.05, 20.0, xtol=1e-300, rtol=1e-15, maxiter=500)
    fitted = calib.calibrator("ts").fit(logits, labels).fitted
    assert 1.0 / fitted.temperature_ == pytest.approx(expected, rel=1e-11)


def test_probabilities_within_the_exactness_tolerance_are_kept_and_the_others_renormalised():
    """Rows in [0, 1] whose sum is within 1e-9 of 1 are used exactly as given; a row off by 1e-8
    (beyond it, within the kind tolerance) is divided by its sum."""
    assert EXACT_SUM_TOLERANCE == 1e-9
    kept = np.array([[0.5, 0.5 + 5e-10]])
    fixed = np.array([[0.5, 0.5 + 1e-8]])
    assert repair_probs(kept).tobytes() == kept.tobytes()
    repaired = repair_probs(fixed)
    assert repaired.tobytes() != fixed.tobytes() and repaired.sum() == pytest.approx(1.0, abs=1e-15)
    np.testing.assert_allclose(repaired, fixed / fixed.sum(), rtol=1e-15)


# bundles: every file verified ------------------------------------------------------------------------------


def test_a_modified_array_file_is_refused_on_load(tmp_path):
    data = np.load(SAMPLE / "cifar10_val.npz")
    calib.calibrator("isotonic").fit(data["logits"][:500], data["labels"][:500]).save(str(tmp_path / "b"))
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    arrays = [name for name in manifest["files"] if name.endswith(".npy")]
    assert arrays
    target = tmp_path / "b" / arrays[0]
    values = np.load(target)
    values.flat[0] += 0.5
    np.save(target, values)
    with pytest.raises(BundleError, match=arrays[0]):
        read_bundle(str(tmp_path / "b"), CALIBRATORS)


# gates --------------------------------------------------------------------------------------------------


def test_an_increase_exactly_at_the_allowance_passes_and_the_next_float_fails():
    """new - old <= allowed passes: 0.375 - 0.25 = 0.125 (exact in binary) with allowed 0.125."""
    gate = ChangeGate("cmce", 0.125, values(cmce=0.25))
    assert bool(gate.check(values(cmce=0.375))["passed"]) is True
    assert bool(gate.check(values(cmce=float(np.nextafter(0.375, 1.0))))["passed"]) is False


def test_an_undefined_value_fails_every_gate():
    """A metric without a value (a coverage band with no pair) cannot show that a gate holds."""
    undefined = values(**{"coverage_0.9_0.92": None})
    assert Gate("coverage_0.9_0.92<0.5", "coverage_0.9_0.92", "<", 0.5).check(undefined)["passed"] is False
    increase = ChangeGate("coverage_0.9_0.92", 1.0, values(**{"coverage_0.9_0.92": 0.9}))
    assert increase.check(undefined)["passed"] is False
    assert ChangeGate("cmce", 1.0, values(cmce=None)).check(values(cmce=0.1))["passed"] is False


def test_a_threshold_gate_at_its_edge():
    """--fail-if "cmce>0.25" fails when cmce > 0.25: 0.25 itself passes, the next float fails."""
    gate = Gate("cmce>0.25", "cmce", ">", 0.25)
    assert bool(gate.check(values(cmce=0.25))["passed"]) is True
    assert bool(gate.check(values(cmce=float(np.nextafter(0.25, 1.0))))["passed"]) is False


def test_the_cli_increase_gate_passes_exactly_at_its_allowance(run, tmp_path):
    """A baseline report whose cmce is half of this run's, allowance the other half (both exact):
    the increase equals the allowance, the gate passes; an allowance one float smaller fails."""
    test = SAMPLE / "cifar10_test.npz"
    code, out, _ = run("evaluate", "--no-vece", test, "--json", "-", "--metrics", "cmce")
    report = json.loads(out)
    value = report["metrics"]["cmce"]["value"]
    report["metrics"]["cmce"]["value"] = value / 2
    (tmp_path / "base.json").write_text(json.dumps(report))
    allowed = value - value / 2
    assert allowed == value / 2
    for allowance, expected in ((allowed, 0), (float(np.nextafter(allowed, 0.0)), 1)):
        code, _, _ = run(
            "evaluate",
            "--no-vece",
            test,
            "--metrics",
            "cmce",
            "--baseline",
            tmp_path / "base.json",
            "--max-increase",
            f"cmce={allowance!r}",
            "--ignore-noise",
        )
        assert code == expected, allowance


# properties -------------------------------------------------------------------------------------------------


def _streamed_keys():
    return [key for key in sorted(METRICS) if METRICS[key].streamed and not METRICS[key].needs_truth]


def _values(probs, labels, keys, chunks=None):
    preds = predictions_from_arrays(probs, labels, kind="probs")
    metric_set = MetricSet(keys, MetricConfig(), preds.k)
    for rows in chunks or [slice(0, preds.n)]:
        metric_set.update(model_batch(preds, rows))
    return {key: entry["value"] for key, entry in metric_set.results().items()}


@st.composite
def probability_rows(draw):
    """Small probability matrices on a coarse grid (ties, zeros, values on bin edges) with labels."""
    n = draw(st.integers(3, 40))
    k = draw(st.integers(2, 5))
    weights = np.array(draw(st.lists(st.lists(st.integers(0, 6), min_size=k, max_size=k), min_size=n, max_size=n)), dtype=float)
    weights[weights.sum(axis=1) == 0, 0] = 1.0
    labels = np.array(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    return weights / weights.sum(axis=1, keepdims=True), labels


PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


#: Metrics summed in float32 in row order, as the tool they reproduce sums them (torchmetrics'
#: multiclass ECE): another order or more rows moves their last float32 bits
FLOAT32_SUMS = ("ece_extra_bin",)


def _same(first: dict, second: dict):
    for key, value in first.items():
        if value is None or second[key] is None:
            assert value == second[key], key
        else:
            relative = 1e-6 if key in FLOAT32_SUMS else 1e-10
            assert second[key] == pytest.approx(value, rel=relative, abs=1e-12), key


@PROPERTY
@given(probability_rows(), st.randoms(use_true_random=False))
def test_every_streamed_metric_ignores_row_order(data, random):
    """HELM's selective numbers aside: they take tied rows in the order NumPy's sort leaves them, as
    HELM's code does (calib's own selective metrics average over that order)."""
    probs, labels = data
    order = np.array(random.sample(range(len(labels)), len(labels)))
    keys = [key for key in _streamed_keys() if key not in ("helm_selective_acc_10", "helm_selective_area")]
    _same(_values(probs, labels, keys), _values(probs[order], labels[order], keys))


@PROPERTY
@given(probability_rows(), st.data())
def test_chunked_equals_one_shot_equals_merged_states(data, draw):
    probs, labels = data
    keys = _streamed_keys()
    cut = draw.draw(st.integers(1, len(labels) - 1))
    whole = _values(probs, labels, keys)
    _same(whole, _values(probs, labels, keys, [slice(0, cut), slice(cut, len(labels))]))
    preds = predictions_from_arrays(probs, labels, kind="probs")
    left, right = MetricSet(keys, MetricConfig(), preds.k), MetricSet(keys, MetricConfig(), preds.k)
    left.update(model_batch(preds, slice(0, cut)))
    right.update(model_batch(preds, slice(cut, len(labels))))
    left.absorb(right.state())
    _same(whole, {key: entry["value"] for key, entry in left.results().items()})


@PROPERTY
@given(probability_rows())
def test_duplicating_every_row_leaves_every_streamed_metric_unchanged(data):
    """Every streamed metric is a mean over rows (or pairs): two copies of each row change nothing
    (the debiased ECE^2 and the smooth ECE excepted: their finite-sample terms depend on n; and the
    equal-mass ECE and scikit-learn's quantile curve, whose quantile edges interpolate between order
    statistics that move with n, and the top-label ECE's equal-mass bins; the adaptive RMS
    errors, whose bins hold 100 rows whatever n; and AURC, E-AURC and the selective accuracies, which
    read the risk-coverage curve at k = 1..n or ceil(c n) rows: two copies of each row add the points
    between; the AUROC of correctness and the coverage at a risk, which read whole runs of ties, stay;
    and HELM's numbers, whose equal-mass parts, tenth of the rows, tie order and Platt fit (lbfgs to
    its tolerance) follow n, its 1-bin ECE aside)."""
    probs, labels = data
    moving = ("debiased_ece_sq", "smece", "isotonic_ece", "ece_quantile", "ece_pos_quantile", "rms_ce", "rms_ce_hle", "tl_ece")
    moving += ("aurc", "eaurc", *(key for key in METRICS if key.startswith(("selective_accuracy_", "helm_"))))
    moving = tuple(key for key in moving if key != "helm_ece_1")
    keys = [key for key in _streamed_keys() if key not in moving]
    _same(_values(probs, labels, keys), _values(np.vstack([probs, probs]), np.concatenate([labels, labels]), keys))


DETERMINISTIC = [m for m, c in sorted(CALIBRATORS.items()) if not c.requires]


@pytest.mark.parametrize("method", DETERMINISTIC)
def test_every_calibrator_ignores_the_order_of_its_calibration_rows(method):
    """Fitting on the calibration rows in another order gives the same map (within float
    summation order). Methods that split the calibration rows by a seed are compared on their
    own seeded split, which follows the rows, not their positions."""
    data = np.load(SAMPLE / "cifar10_val.npz")
    logits, labels = data["logits"][:1500].astype(np.float64), data["labels"][:1500]
    order = np.random.default_rng(3).permutation(len(labels))
    new = np.load(SAMPLE / "cifar10_test.npz")["logits"][:300]
    first = calib.calibrator(method).fit(logits, labels).predict_proba(new)
    second = calib.calibrator(method).fit(logits[order], labels[order]).predict_proba(new)
    # L-BFGS pins the linear maps' weights to about sqrt(1e-14): their inputs summed in another order end that far apart
    tolerance = 1e-6 if method in ("dirichlet", "svs", "sms") else 1e-9
    np.testing.assert_allclose(second, first, rtol=0, atol=tolerance)


@PROPERTY
@given(st.integers(2, 40), st.integers(1, 39))
def test_equal_width_bin_rule_at_exact_edges(n_bins, k):
    """For every edge k/B (as a float), bin_index gives the reference's bin (comparison with the
    edges); R e / 2 below it is on it, 2 R e below it is not."""
    k = min(k, n_bins - 1)
    edge = k / n_bins
    assert bin_index(np.array([edge]), n_bins)[0] == ref.edge_bin(edge, n_bins)
    assert bin_index(np.array([edge - R * edge / 2, edge - 2 * R * edge]), n_bins).tolist() == [k, k - 1]


# rules the mutation run found unpinned ------------------------------------------------------------------


def test_options_gates_and_penalties_are_immutable():
    """Fitted state and parsed gates are frozen records: a method's options, a gate, the ridge
    weights of a linear map cannot be changed after the fact (a bundle's options stay its own)."""
    import dataclasses

    from calib.calibrators.matrix_scaling import Penalties

    records = [Penalties(1.0, 0.0, 2.0), Gate("cmce>0.1", "cmce", ">", 0.1), ChangeGate("cmce", 0.1, values(cmce=0.0))]
    records += [cls.Options() for cls in CALIBRATORS.values()]
    for record in records:
        field = dataclasses.fields(record)[0].name if dataclasses.fields(record) else None
        if field is None:
            continue
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, getattr(record, field))


def test_dirichlet_penalties_follow_odir_by_hand():
    """ODIR (Kull et al. 2019) with the documented defaults lambda = mu = 100: the off-diagonal
    weight is lambda / (K (K - 1)), the intercept's mu / K, none on the diagonal. K = 10:
    100 / 90 and 10; K = 2: 100 / 2 and 50."""
    from calib.calibrators.matrix_scaling import Dirichlet, Penalties

    dirichlet = Dirichlet(Dirichlet.Options())
    assert (Dirichlet.Options().odir_lambda, Dirichlet.Options().odir_mu) == (100.0, 100.0)
    assert dirichlet.penalties(500, 10) == Penalties(bias=10.0, diagonal=0.0, off_diagonal=100.0 / 90.0)
    assert dirichlet.penalties(500, 2) == Penalties(bias=50.0, diagonal=0.0, off_diagonal=50.0)


@pytest.mark.parametrize("method", ["svs", "sms"])
def test_structured_scaling_maps_the_tempered_log_probabilities_it_documents(method):
    """SVS/SMS act on x = max(log softmax(z / T), log(float32 tiny)) with T fitted by ts first,
    ridge k/n on the intercept and diagonal, k(k-1)/n off it; the output is softmax((I + D) x + b)."""
    from scipy.special import log_softmax as scipy_log_softmax
    from scipy.special import softmax as scipy_softmax

    from calib.calibrators.matrix_scaling import Penalties

    data = np.load(SAMPLE / "cifar10_val.npz")
    logits, labels = data["logits"][:1000].astype(np.float64), data["labels"][:1000]
    fitted = calib.calibrator(method).fit(logits, labels).fitted
    temperature = calib.calibrator("ts").fit(logits, labels).fitted.temperature_
    assert fitted.temperature_ == temperature
    x = np.maximum(scipy_log_softmax(logits / temperature, axis=1), np.log(np.finfo(np.float32).tiny))
    np.testing.assert_allclose(fitted.inputs(logits), x, rtol=1e-13, atol=1e-13)
    assert fitted.penalties(1000, 10) == Penalties(bias=10 / 1000, diagonal=10 / 1000, off_diagonal=90 / 1000)
    weights = np.eye(10) + (fitted.delta_ if fitted.full else np.diag(fitted.delta_))
    expected = scipy_softmax(x @ weights.T + fitted.bias_, axis=1)
    np.testing.assert_allclose(fitted.predict_proba(logits), expected, rtol=1e-10, atol=1e-13)


def test_a_converged_linear_map_reports_no_reason_to_stop():
    data = np.load(SAMPLE / "cifar10_val.npz")
    report = calib.calibrator("dirichlet").fit(data["logits"][:800], data["labels"][:800]).fit_report()
    assert report["converged"] is True and "stopped because" not in report and not any(k.startswith("warning") for k in report)


def test_baseline_rows_are_compared_by_count_then_labels():
    """A baseline is comparable when both reports cover as many rows with the same labels; either
    side unknown (an old report) is not a difference."""
    from calib.evaluation.gates import other_input
    from calib.evaluation.report_types import InputSection

    def section(**fields):
        return InputSection.from_json(fields)

    same = {"n": 10, "labels_sha256": "a", "path": "x"}
    assert other_input(section(**same), section(**same)) is None
    assert other_input(None, section(**same)) is None and other_input(section(**same), section()) is None
    assert "covers 10 rows" in other_input(section(**same), section(**{**same, "n": 11}))
    assert "other labels" in other_input(section(**same), section(**{**same, "labels_sha256": "b"}))
    assert other_input(section(**same), section(**{**same, "labels_sha256": None})) is None
    assert other_input(section(**{**same, "labels_sha256": None}), section(**same)) is None


def test_gate_and_increase_specs_are_parsed_or_refused(tmp_path):
    from calib.errors import InputError, UsageError
    from calib.evaluation.gate_parsing import parse_change_gates, parse_gate, read_report

    assert parse_gate("max_group:cmce>=0.02") == Gate("max_group:cmce>=0.02", "cmce", ">=", 0.02, "max_group")
    with pytest.raises(UsageError, match="per group"):
        parse_gate("max_group:vece_l1>0.1")
    assert parse_gate("vece_l1>0.1").metric == "vece_l1"
    with pytest.raises(UsageError, match="a paired comparison"):
        parse_change_gates([], None, paired=True)
    assert parse_change_gates([], None) == []
    with pytest.raises(UsageError, match="needs a baseline"):
        parse_change_gates(["cmce=0.1"], None)
    report = tmp_path / "base.json"
    report.write_text(json.dumps({"metrics": {"cmce": {"value": 0.1}}, "groups": {}}))
    for spec in ("cmce", "cmce=", "cmce=x"):
        with pytest.raises(UsageError, match="expected METRIC=NUMBER"):
            parse_change_gates([spec], str(report))
    (gate,) = parse_change_gates(["cmce=0.5"], str(report), paired=False)
    assert (gate.metric, gate.allowed, gate.baseline_groups, gate.paired) == ("cmce", 0.5, {}, False)
    for text, message in (("[1, 2]", "no 'metrics'"), ('{"metrics": 1}', "no 'metrics'"), ("{", "not a JSON report")):
        report.write_text(text)
        with pytest.raises(InputError, match=message):
            read_report(str(report))


def test_score_parameters_at_their_edges():
    """lambda and k_reg of RAPS may be 0 (>= 0), not below; SAPS's lambda must be > 0."""
    from calib.calibrators.conformal import ScoreOptions
    from calib.errors import UsageError

    assert ScoreOptions("raps", raps_lambda=0.0, raps_kreg=0).raps_kreg == 0
    for bad in ({"raps_lambda": -1e-12}, {"raps_kreg": -1}):
        with pytest.raises(UsageError, match="must be >= 0"):
            ScoreOptions("raps", **bad)
    assert ScoreOptions("saps", saps_lambda=1e-12).saps_lambda == 1e-12
    with pytest.raises(UsageError, match="must be > 0"):
        ScoreOptions("saps", saps_lambda=0.0)
    with pytest.raises(UsageError, match="msp has nothing to randomise"):
        ScoreOptions("msp", randomize=True)


def test_default_raps_and_saps_scores_by_hand():
    """One row of 8 probabilities (distinct, so ranks are plain). RAPS with the defaults lambda =
    0.01, k_reg = 5 (Angelopoulos et al. 2021): V(y) = (mass ranked at or above y) + 0.01 max(0,
    r - 5); SAPS with lambda = 0.2 (Huang et al. 2024): p_max at rank 1, else p_max + (r - 1) 0.2."""
    from calib.calibrators.conformal import ScoreOptions, nonconformity

    row = np.array([[0.30, 0.05, 0.20, 0.02, 0.15, 0.12, 0.10, 0.06]])
    order = [0, 2, 4, 5, 6, 7, 1, 3]  # by non-increasing probability
    rank = {column: r + 1 for r, column in enumerate(order)}
    cumulative = {column: row[0, order[: rank[column]]].sum() for column in range(8)}
    raps = nonconformity(row, ScoreOptions("raps"))[0]
    saps = nonconformity(row, ScoreOptions("saps"))[0]
    for column in range(8):
        assert raps[column] == pytest.approx(cumulative[column] + 0.01 * max(0, rank[column] - 5), abs=1e-15)
        expected_saps = 0.30 if rank[column] == 1 else 0.30 + (rank[column] - 1) * 0.2
        assert saps[column] == pytest.approx(expected_saps, abs=1e-15)
