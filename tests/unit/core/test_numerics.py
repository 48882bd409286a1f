"""calib.core.numerics: the isotonic fit of fixed rows under many weightings (the one PAV of
calib), against scikit-learn's IsotonicRegression and by hand, with ties of mixed targets; the
linear percentiles against NumPy's."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import needs

from calib.core.numerics import IsotonicProblem, Turns, isotonic_fit, linear_percentiles, zeros_in_order


@pytest.mark.parametrize("seed", range(6))
def test_isotonic_fit_equals_scikit_learns_with_ties_and_weights(seed):
    isotonic = needs("sklearn.isotonic")
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 80))
    values = rng.integers(0, 9, n) / 8.0 if seed % 2 else rng.random(n)  # ties of mixed targets on odd seeds
    targets = (rng.random(n) < values).astype(float) if seed < 4 else rng.random(n)
    weights = rng.integers(1, 4, n).astype(float)
    x, level = isotonic_fit(values, targets, weights)
    expected = isotonic.IsotonicRegression().fit(values, targets, sample_weight=weights).predict(x)
    np.testing.assert_allclose(level, expected, rtol=0, atol=1e-12)


def test_runs_of_one_target_are_merged_and_ties_of_mixed_targets_stand_alone():
    """Values 0.1 (target 0), 0.2 (0), 0.3 (0 and 1: a tie of mixed targets), 0.4 (1), 0.5 (1):
    runs {0.1, 0.2}, {0.3}, {0.4, 0.5}."""
    problem = IsotonicProblem(np.array([0.3, 0.1, 0.2, 0.3, 0.5, 0.4]), np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0]))
    assert problem.n_runs == 3
    np.testing.assert_array_equal(problem.run_of_value, [0, 0, 1, 2, 2])
    np.testing.assert_array_equal(problem.row_runs, [1, 0, 0, 1, 2, 2])


def test_the_fit_by_hand_with_a_violation_pooled():
    """c = (0.2, 0.4, 0.6, 0.8), y = (0, 1, 0, 1): the middle two violate and pool to 0.5."""
    x, level = isotonic_fit(np.array([0.2, 0.4, 0.6, 0.8]), np.array([0.0, 1.0, 0.0, 1.0]))
    np.testing.assert_array_equal(level, [0.0, 0.5, 0.5, 1.0])


def test_a_run_no_weighting_draws_is_left_out_and_gets_level_0():
    """Weights (1, 0, 1, 1) on y = (1, 0, 0, 1): the second row is not drawn; the rest fit
    (1, 0, 1) -> PAV pools the first two to 0.5."""
    problem = IsotonicProblem(np.array([0.1, 0.2, 0.3, 0.4]), np.array([1.0, 0.0, 0.0, 1.0]))
    weights = np.array([[1.0, 0.0, 1.0, 1.0]])
    run_weights = np.array([[np.bincount(problem.row_runs, weights=weights[0], minlength=problem.n_runs)]])[0]
    run_sums = np.array([np.bincount(problem.row_runs, weights=weights[0] * problem.targets, minlength=problem.n_runs)])
    levels = problem.run_levels(run_weights, run_sums)[0]
    # runs: {0.1}, {0.2, 0.3} (both 0), {0.4}; the middle run weighs 1 (its 0.2 row is not drawn)
    np.testing.assert_array_equal(levels, [0.5, 0.5, 1.0])


def test_linear_percentiles_are_numpys_to_the_bit():
    """np.percentile's default method, bit for bit: the bootstrap's two ends at the levels in use
    (0.95, 0.99, a Bonferroni 1 - 0.05 / 50), 0 and 100, ranks on whole numbers and between; ties,
    one and two values, infinities and NaN."""
    rng = np.random.default_rng(0)
    samples = [np.array([3.0]), np.array([2.0, 1.0]), np.array([1.0, np.inf, 2.0]), np.array([0.0, np.nan, 1.0])]
    samples += [rng.normal(size=int(n)) for n in rng.integers(2, 500, 300)]
    samples += [rng.integers(0, 4, int(n)).astype(float) for n in rng.integers(2, 60, 100)]  # ties
    for values in samples:
        for level in (0.95, 0.99, 1 - 0.05 / 50, 0.5):
            upper = round(50.0 * (1.0 + level), 9)
            percents = [100.0 - upper, upper, 0.0, 100.0, 25.0, rng.random() * 100]
            with np.errstate(invalid="ignore"):
                got, expected = linear_percentiles(values, percents), np.percentile(values, percents)
            assert np.array_equal(got.view(np.uint64), expected.view(np.uint64)), (values, percents)
    assert linear_percentiles(np.array([1.0, 2.0, 3.0, 4.0, 5.0]), [25.0, 62.5]).tolist() == [2.0, 3.5]  # h = 1, 2.5


@pytest.mark.parametrize("size", [0, 1, 511, 512, 513, 3_000_001])
def test_zeros_in_order_are_zeros(size):
    array = zeros_in_order(size)
    assert array.dtype == np.float64 and array.shape == (size,) and not array.any()


def _take_all(turns: Turns, items, section_of, timeout: float = 20.0) -> dict:
    """Every item's turn taken on a thread of its own, the threads started in reverse order:
    {item: what its take returned or raised}."""
    import threading

    out = {}

    def take(item):
        try:
            out[item] = turns.take(item, section_of(item))
        except Exception as error:  # noqa: BLE001 - what the section raised is the result
            out[item] = error

    threads = [threading.Thread(target=take, args=(item,), daemon=True) for item in items]
    import time

    for thread in reversed(threads):
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "a turn was never handed on"
    return out


def test_turns_run_each_section_once_in_the_order_of_the_items_whatever_the_threads():
    """Threads that arrive last-first still run their sections first-last, one at a time."""
    import threading

    ran, running, overlapped = [], [], []
    lock = threading.Lock()

    def section_of(item):
        def section():
            with lock:
                overlapped.append(bool(running))
                running.append(item)
            ran.append(item)
            with lock:
                running.remove(item)
            return item * item

        return section

    out = _take_all(Turns(), range(12), section_of)
    assert ran == list(range(12))
    assert out == {item: item * item for item in range(12)}
    assert not any(overlapped)


def test_a_turn_without_a_section_or_whose_section_raises_is_handed_on():
    """An item that failed before its section (None) and one whose section raises both let the
    items after them run, and the error reaches the one who took that turn."""
    ran = []

    def section_of(item):
        if item == 2:
            return None
        if item == 4:

            def fails():
                raise RuntimeError("section 4")

            return fails
        return lambda: ran.append(item)

    out = _take_all(Turns(), range(7), section_of)
    assert ran == [0, 1, 3, 5, 6]
    assert out[2] is None and isinstance(out[4], RuntimeError) and str(out[4]) == "section 4"
