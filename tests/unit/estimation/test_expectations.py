"""Each score's expectation and variance under a row's probabilities, against enumeration of the
label by hand (tiny rows, ties, exact zeros)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from calib.estimation.expectations import SCORES, expected, predicted_class, realised


def _enumerated(probs: np.ndarray, truth: np.ndarray, predicted: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """E and V of each score by summing over every label y of each row, weighted by truth[y]."""
    out = {score: (np.zeros(len(probs)), np.zeros(len(probs))) for score in SCORES}
    for i, y in itertools.product(range(len(probs)), range(probs.shape[1])):
        values = realised(probs[i : i + 1], predicted[i : i + 1], np.array([y]))
        for score in SCORES:
            out[score][0][i] += truth[i, y] * values[score][0]
            out[score][1][i] += truth[i, y] * values[score][0] ** 2
    return {score: (mean, second - mean**2) for score, (mean, second) in out.items()}


ROWS = np.array([[0.7, 0.2, 0.1], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]])


def test_hand_values_of_one_row():
    p = np.array([[0.5, 0.25, 0.25]])
    found = expected(p, np.array([0]))
    assert found["accuracy"] == (pytest.approx(0.5), pytest.approx(0.25))
    entropy = -(0.5 * np.log(0.5) + 0.5 * np.log(0.25))
    assert found["nll"][0][0] == pytest.approx(entropy, abs=1e-15)
    second = 0.5 * np.log(0.5) ** 2 + 0.5 * np.log(0.25) ** 2
    assert found["nll"][1][0] == pytest.approx(second - entropy**2, abs=1e-15)
    squares = 0.25 + 0.0625 + 0.0625
    assert found["brier"][0][0] == pytest.approx(1 - squares, abs=1e-15)
    # the Brier score of label 0: 0.25 + 0.0625 + 0.0625 = 0.375; of label 1 or 2: 0.25 + 0.5625 + 0.0625 = 0.875
    assert found["brier"][1][0] == pytest.approx(0.5 * 0.375**2 + 0.5 * 0.875**2 - (1 - squares) ** 2, abs=1e-15)


@pytest.mark.parametrize("other", [False, True])
def test_expectations_equal_enumeration_over_labels(other):
    truth = ROWS[::-1].copy() if other else ROWS
    predicted = predicted_class(ROWS)
    found = expected(ROWS, predicted, truth if other else None)
    for score, (mean, variance) in _enumerated(ROWS, truth, predicted).items():
        np.testing.assert_allclose(found[score][0], mean, atol=1e-12)
        np.testing.assert_allclose(found[score][1], variance, atol=1e-12)


def test_ties_go_to_the_lower_class_and_zeros_are_floored():
    assert predicted_class(ROWS).tolist() == [0, 0, 0, 0]
    # label 2 of row 1 has probability exactly 0: its log loss is -log 1e-12, as the registry's nll takes it
    assert realised(ROWS[1:2], np.array([0]), np.array([2]))["nll"][0] == pytest.approx(-np.log(1e-12))


def test_float16_and_float32_rows_give_float64_values():
    for dtype in (np.float16, np.float32):
        found = expected(ROWS.astype(dtype).astype(np.float64), predicted_class(ROWS))
        assert all(values.dtype == np.float64 for pair in found.values() for values in pair)
