"""Inputs and fits where a wrong number with exit 0 is easy: ties, exact zeros, near-probabilities,
separable calibration data. Each case has its reproducer and a property test on random draws."""

import json

import numpy as np
import pytest

from calib import calibrator_class
from calib.calibrators.venn_abers import venn_abers_runs
from calib.core.numerics import isotonic_fit, softmax
from calib.core.validation import kind_tolerance, resolve_kind
from calib.errors import InputError
from calib.io.readers import read_predictions


def _binary_logits(p1):
    p1 = np.asarray(p1, dtype=np.float64)
    return np.log(np.maximum(np.stack([1.0 - p1, p1], axis=1), 1e-12))


# 1. isotonic: ties pooled first, one routine everywhere -------------------------------------------


def test_isotonic_pools_ties_as_sklearn_on_its_own_vector():
    # scikit-learn's test_isotonic_regression_with_ties_in_differently_sized_groups as p1 = x / 4:
    # the pooled fit is [0, .25, .25, .25, .25, 1] (by hand: the three middle groups {0, 1} at
    # x = 1, {0} at 2, {0} at 3 violate order, pooled mean 1/4).
    x = np.array([0, 1, 1, 2, 3, 4]) / 4
    y = np.array([0, 0, 1, 0, 0, 1])
    expected = [0, 0.25, 0.25, 0.25, 0.25, 1]
    fitted = calibrator_class("isotonic")().fit(_binary_logits(x), y)
    assert fitted.class_maps(_binary_logits(x), softmax(_binary_logits(x)), given=False)[:, 1] == pytest.approx(
        expected, abs=1e-12
    )
    swapped = calibrator_class("isotonic")().fit(_binary_logits(x[[0, 2, 1, 3, 4, 5]]), y[[0, 2, 1, 3, 4, 5]])
    assert swapped.class_maps(_binary_logits(x), softmax(_binary_logits(x)), given=False)[:, 1] == pytest.approx(
        expected, abs=1e-12
    )
    grid, level = isotonic_fit(x, y)
    assert level[np.searchsorted(grid, x)] == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("seed", range(5))
def test_isotonic_equals_sklearn_on_heavily_tied_data_and_ignores_row_order(seed):
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 8, size=300) / 8  # 8 distinct values: heavy ties
    y = (rng.random(300) < x).astype(float)
    reference = IsotonicRegression().fit(x, y).predict(x)
    grid, level = isotonic_fit(x, y)
    assert level[np.searchsorted(grid, x)] == pytest.approx(reference, abs=1e-12)
    order = rng.permutation(300)
    maps = [
        calibrator_class("isotonic")()
        .fit(_binary_logits(x[o]), y[o])
        .class_maps(_binary_logits(x), softmax(_binary_logits(x)), given=False)
        for o in (np.arange(300), order)
    ]
    np.testing.assert_array_equal(maps[0], maps[1])
    assert maps[0][:, 1] == pytest.approx(np.clip(reference, 0, 1), abs=1e-9)


def test_vece_isotonic_recalibrator_and_isotonic_ece_use_the_pooled_fit():
    from calib.estimators.recalibrators import _isotonic
    from calib.metrics import MetricConfig
    from calib.metrics.accumulators import TopLabelValues
    from calib.metrics.definitions import isotonic_ece

    x = np.array([0, 1, 1, 2, 3, 4]) / 4
    y = np.array([0, 0, 1, 0, 0, 1], dtype=float)
    assert _isotonic(x, y)(x) == pytest.approx([0, 0.25, 0.25, 0.25, 0.25, 1], abs=1e-12)
    assert _isotonic(x[[0, 2, 1, 3, 4, 5]], y[[0, 2, 1, 3, 4, 5]])(x) == pytest.approx(_isotonic(x, y)(x), abs=0)
    state = TopLabelValues()
    state.confidence.append(x)
    state.correct.append(y)
    # mean |F - g(F)| with g = [0, .25, .25, .25, .25, 1]: (0 + 0 + 0 + .25 + .5 + 0) / 6
    assert isotonic_ece(state, MetricConfig()) == pytest.approx(0.75 / 6, abs=1e-15)


# 2. conformal sets on probability inputs: scores from the probabilities as given ------------------


def _write(path, **arrays):
    np.savez(path, **arrays)
    return str(path)


@pytest.mark.parametrize("method", ["mr", "ats-gq", "conformal-ts"])
def test_label_with_score_equal_to_q_is_kept_with_exact_zeros(tmp_path, run, method):
    cal = _write(tmp_path / "cal.npz", probs=np.tile([0.5, 0.4, 0.1], (9, 1)), labels=np.ones(9, dtype=np.int64))
    test = _write(tmp_path / "test.npz", probs=np.array([[0.4, 0.6, 0.0]]), labels=np.array([0]))
    assert run("fit", cal, "--method", method, "--alpha", "0.1", "--out", tmp_path / "b")[0] == 0
    code, _, err = run("apply", tmp_path / "b", test, "--what", "sets", "--out", tmp_path / "sets.npz")
    assert code == 0, err
    sets = np.load(tmp_path / "sets.npz")
    # q = 1 - 0.4 = 0.6 (the 9th smallest of nine equal scores); V(0) = 1 - 0.4 = 0.6 <= q: {0, 1}
    np.testing.assert_array_equal(sets[sets.files[0]], [[True, True, False]])


def _definition_sets(cal_probs, cal_labels, test_probs, alpha, score):
    """Split-conformal sets by the definition, on the probabilities as given (a plain loop): V <= q,
    a score within 1e-12 max(1, |q|) above q counted as on it (sums of tied probabilities taken in
    another order differ from q in the last bit)."""

    def v(row, label):
        if score == "msp":
            return 1.0 - row[label]
        rank = sorted(range(len(row)), key=lambda j: (-row[j], j))
        total = 0.0
        for j in rank:
            total += row[j]
            if j == label:
                return total

    scores = sorted(v(r, y) for r, y in zip(cal_probs, cal_labels))
    n = len(scores)
    q = scores[int(np.ceil((n + 1) * (1 - alpha) - 1e-9)) - 1]
    return np.array([[v(row, j) <= q + 1e-12 * max(1.0, abs(q)) for j in range(len(row))] for row in test_probs])


def _tied_probs(rng, n, k):
    """Probability rows on a coarse grid (multiples of 1/10): many exact ties and exact zeros."""
    counts = rng.multinomial(10, rng.dirichlet(np.ones(k) * 0.5), size=n)
    return counts / 10.0


@pytest.mark.parametrize("score", ["msp", "aps"])
@pytest.mark.parametrize("seed", range(3))
def test_sets_equal_the_definition_on_tied_probabilities(seed, score):
    from calib.io.predictions import Predictions
    from calib.pipeline import apply_calibrator, fit_calibrator

    rng = np.random.default_rng(seed)
    cal, test = _tied_probs(rng, 99, 4), _tied_probs(rng, 200, 4)
    cal_labels = np.array([rng.choice(4, p=row) for row in cal])
    preds = Predictions("cal", cal, "probs", "", cal_labels, "x")
    fitted = fit_calibrator(preds, "mr", {"alpha": 0.3, "score": score})
    sets, _ = apply_calibrator(fitted, Predictions("test", test, "probs", "", None, "x"), what="sets")
    np.testing.assert_array_equal(sets, _definition_sets(cal, cal_labels, test, 0.3, score))


def test_coverage_holds_on_tied_probability_inputs_over_many_draws():
    from calib.io.predictions import Predictions
    from calib.pipeline import apply_calibrator, fit_calibrator

    rng = np.random.default_rng(11)
    covered = []
    for _ in range(200):
        rows = _tied_probs(rng, 199, 3)
        labels = np.array([rng.choice(3, p=row) for row in rows])
        fitted = fit_calibrator(Predictions("cal", rows[:99], "probs", "", labels[:99], "x"), "mr", {"alpha": 0.3})
        sets, _ = apply_calibrator(fitted, Predictions("test", rows[99:], "probs", "", None, "x"), what="sets")
        covered.append(sets[np.arange(100), labels[99:]].mean())
    # split conformal: E[coverage] >= 1 - alpha = 0.7 (the bug gave 0.650); 200 draws, std of the mean ~0.005
    assert np.mean(covered) >= 0.7


# 3. Venn-Abers against brute force IVAP ------------------------------------------------------------


def _brute_ivap(scores, targets, test):
    """(p0, p1): isotonic refit with (test, 0) and with (test, 1) added, read at test."""
    out = []
    for label in (0, 1):
        grid, level = isotonic_fit(np.append(scores, test), np.append(targets, label))
        out.append(level[np.searchsorted(grid, test)])
    return out


def _ivap(scores, targets, test):
    boundaries, p0, p1, _ = venn_abers_runs(scores, targets)
    run_index = np.searchsorted(boundaries, test, side="right") - 1
    return p0[run_index], p1[run_index]


def test_venn_abers_reproducer_p0():
    scores = np.arange(1, 19) / 19
    targets = np.array([1, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0, 0])
    p0, p1 = _ivap(scores, targets, np.array([11 / 19]))
    # brute force: the 19-point isotonic fits read at 11/19 give 5/11 and 5/9
    assert (p0[0], p1[0]) == pytest.approx((5 / 11, 5 / 9), abs=1e-12)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("n", [30, 400, 5000])
def test_venn_abers_equals_brute_force(n, ties):
    rng = np.random.default_rng(n + ties)
    scores = rng.random(n)
    if ties:
        scores = np.round(scores, 2)
    targets = (rng.random(n) < scores**2).astype(float)
    test = np.concatenate([rng.random(150), scores[:100], np.round(rng.random(50), 2), [-1.0, 0.0, 1.0, 2.0]])
    p0, p1 = _ivap(scores, targets, test)
    expected = np.array([_brute_ivap(scores, targets, s) for s in test])
    np.testing.assert_allclose(p0, expected[:, 0], atol=1e-12)
    np.testing.assert_allclose(p1, expected[:, 1], atol=1e-12)


# 4. near-probabilities: tolerance by dtype, never logits for a [0, 1] matrix -----------------------


def _softmax_export(rng, n, k, dtype):
    logits = rng.normal(size=(n, k)) * 3
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (probs / probs.sum(axis=1, keepdims=True)).astype(dtype), rng.integers(0, k, n)


def test_float32_entries_a_hair_above_one_are_probabilities(tmp_path, run):
    rng = np.random.default_rng(0)
    probs, labels = _softmax_export(rng, 1000, 10, np.float32)
    probs[:5] = 0.0
    probs[:5, 0] = np.float32(1.0000005)
    path = _write(tmp_path / "p.npz", arr_0=probs, labels=labels)
    code, out, err = run("evaluate", path, "--no-vece", "--metrics", "ece", "--json", "-")
    assert code == 0, err
    report = json.loads(out)
    assert report["input"]["kind"] == "probs"
    assert "clipped to [0, 1] and renormalised" in err
    fixed = probs.astype(np.float64)
    fixed[:5, 0] = 1.0
    confidence, correct = fixed.max(axis=1), fixed.argmax(axis=1) == labels
    bins = np.minimum((confidence * 15).astype(int), 14)
    expected = sum(abs((correct[bins == b] - confidence[bins == b]).sum()) for b in range(15)) / 1000
    assert report["metrics"]["ece"]["value"] == pytest.approx(expected, abs=1e-6)


def test_float32_export_with_sums_off_by_3e4_evaluates_with_a_note(tmp_path, run):
    rng = np.random.default_rng(1)
    probs, labels = _softmax_export(rng, 500, 176, np.float64)
    probs = (probs * (1 + 3e-4)).astype(np.float32)
    np.save(tmp_path / "p.npy", probs)
    np.save(tmp_path / "y.npy", labels)
    code, out, err = run("evaluate", tmp_path / "p.npy", "--labels", tmp_path / "y.npy", "--no-vece", "--json", "-")
    assert code == 0, err
    assert json.loads(out)["input"]["kind"] == "probs"
    assert "500 rows off by up to 0.0003" in err


def test_beyond_tolerance_is_refused_with_the_value_in_full(tmp_path, run):
    probs = np.full((4, 3), 1 / 3, dtype=np.float32)
    probs[2] = [0.0, 0.0, np.float32(1.00002) + np.float32(0.001)]
    path = _write(tmp_path / "p.npz", probs=probs, labels=np.zeros(4, dtype=np.int64))
    code, _, err = run("evaluate", path, "--no-vece")
    assert code == 2
    assert "row 2, column 2 is 1.00102" in err


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_detection_never_returns_logits_for_a_unit_interval_matrix(dtype):
    rng = np.random.default_rng(2)
    for _ in range(50):
        k = int(rng.integers(2, 30))
        matrix = rng.random((20, k)).astype(dtype)
        if rng.random() < 0.5:
            matrix = (matrix / matrix.sum(axis=1, keepdims=True)).astype(dtype)
        try:
            kind, _ = resolve_kind(matrix, "auto", "m")
        except InputError as exc:
            assert "declare the input kind" in str(exc) and exc.cli_hint == "--input-kind logits"
            assert "--" not in str(exc)  # the library names no command-line flag
            continue
        assert kind == "probs"


def test_a_unit_interval_matrix_not_summing_to_one_is_refused_naming_the_flag(tmp_path, run):
    np.save(tmp_path / "s.npy", np.random.default_rng(0).random((20, 5)))
    code, _, err = run("evaluate", tmp_path / "s.npy", "--no-vece")
    assert code == 2 and "never taken for logits" in err and "(--input-kind logits)" in err


def test_tolerance_follows_the_dtype():
    assert kind_tolerance(np.float32) == pytest.approx(3.45e-4, rel=1e-2)
    assert kind_tolerance(np.float64) == kind_tolerance(np.float32)
    assert kind_tolerance(np.float16) == pytest.approx(0.03125)
    rows = np.array([[0.5, 0.52], [0.25, 0.75]], dtype=np.float16)  # sums 1.02: within 0.031 for float16
    assert resolve_kind(rows, "auto", "m")[0] == "probs"
    with pytest.raises(InputError, match="sums to"):
        resolve_kind(rows.astype(np.float32), "auto", "m")


def test_exact_rows_are_used_as_given_and_off_rows_renormalised(tmp_path):
    probs = np.array([[0.1, 0.2, 0.7], [0.3, 0.3, 0.40001], [-0.0001, 0.5, 0.5]])
    np.save(tmp_path / "p.npy", probs)
    preds = read_predictions(str(tmp_path / "p.npy"))
    given = preds.probs_as_given()
    np.testing.assert_array_equal(given[0], probs[0])  # within 1e-9: bit for bit
    assert given[1] == pytest.approx(probs[1] / probs[1].sum(), abs=1e-15)
    assert given[2] == pytest.approx([0.0, 0.5, 0.5], abs=1e-15)
    assert "2 rows off by up to 0.0001" in preds.kind_reason


# 5. temperature scaling on separable data: say that T sits on the bracket end -------------------


def test_ts_on_separable_rows_says_the_fit_is_on_the_bracket_end(tmp_path, run):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 200)
    logits = rng.normal(size=(200, 3))
    logits[np.arange(200), labels] += 5  # every row's label has the top logit: separable
    path = _write(tmp_path / "sep.npz", logits=logits, labels=labels)
    code, _, err = run("fit", path, "--method", "ts", "--out", tmp_path / "b")
    assert code == 0
    assert "warning: the NLL optimum lies on the end of the search interval" in err
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert "separable" in manifest["fit_report"]["warning"]
    code, out, _ = run("diagnose", path, "--bundle", tmp_path / "b")
    assert "bundle (ts): the NLL optimum lies on the end" in out
    logits[:, 0] += 0.3 * rng.normal(size=200) * 10  # no longer separable: no warning
    path = _write(tmp_path / "mixed.npz", logits=logits, labels=labels)
    code, _, err = run("fit", path, "--method", "ts", "--out", tmp_path / "c")
    assert code == 0 and "warning" not in err
