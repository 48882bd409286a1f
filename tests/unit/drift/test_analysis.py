"""calib.drift.analysis: the accuracy at NEW's class shares by hand, its indifference to label shift
alone, and the change's interval (calib's one bootstrap interval)."""

from __future__ import annotations

import numpy as np
import pytest

from calib.bootstrap import BootstrapConfig, ReplicateWeights, row_weights
from calib.drift.analysis import class_accuracy_change, interval, label_shares


def _probs_for(predicted: np.ndarray, k: int) -> np.ndarray:
    probs = np.full((len(predicted), k), 0.1 / (k - 1))
    probs[np.arange(len(predicted)), predicted] = 0.9
    return probs


def test_the_class_accuracy_by_hand():
    """REF: class 0 right 2 of 4, class 1 right 4 of 4. NEW: class 0 right 1 of 1, class 1 right 1
    of 3 (shares 1/4, 3/4). At NEW's shares REF is 0.25 0.5 + 0.75 1 = 0.875 and NEW 0.25 1 + 0.75
    (1/3) = 0.5: the change -0.375. NEW's accuracy itself is 2/4 = 0.5."""
    ref_labels, new_labels = np.array([0, 0, 0, 0, 1, 1, 1, 1]), np.array([0, 1, 1, 1])
    ref_probs = _probs_for(np.array([0, 0, 1, 1, 1, 1, 1, 1]), 2)
    new_probs = _probs_for(np.array([0, 1, 0, 0]), 2)
    once = ReplicateWeights.once
    change, draws = class_accuracy_change(ref_probs, ref_labels, new_probs, new_labels, once(8), once(4), 0.9)
    assert (change.ref, change.new, change.value) == pytest.approx((0.875, 0.5, -0.375), abs=1e-15)
    assert draws.tolist() == pytest.approx([-0.375], abs=1e-15)


def test_label_shift_alone_leaves_the_class_accuracy_unchanged():
    """NEW is REF's rows with class 0's rows taken three times: the raw accuracy moves, the accuracy
    at NEW's class shares does not, to the last bit."""
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 3, 900)
    predicted = np.where(rng.random(900) < np.array([0.95, 0.6, 0.7])[labels], labels, (labels + 1) % 3)
    probs = _probs_for(predicted, 3)
    rows = np.r_[np.arange(900), np.flatnonzero(labels == 0), np.flatnonzero(labels == 0)]
    weights = row_weights(BootstrapConfig(200, 0), 900)
    change, _ = class_accuracy_change(
        probs, labels, probs[rows], labels[rows], weights, row_weights(BootstrapConfig(200, 1), len(rows)), 0.99
    )
    assert change.value == pytest.approx(0.0, abs=1e-15)
    raw = (predicted[rows] == labels[rows]).mean() - (predicted == labels).mean()
    assert raw > 0.03 and change.ci[0] < 0.0 < change.ci[1]


def test_a_class_one_batch_lacks_is_left_out_of_the_shares():
    """NEW has no row of class 2: the shares are NEW's over classes 0 and 1."""
    ref_labels, new_labels = np.array([0, 1, 2, 2]), np.array([0, 0, 1, 1])
    probs = _probs_for(np.array([0, 0, 2, 2]), 3)
    new_probs = _probs_for(np.array([0, 0, 0, 1]), 3)
    once = ReplicateWeights.once
    change, _ = class_accuracy_change(probs, ref_labels, new_probs, new_labels, once(4), once(4), 0.9)
    assert (change.ref, change.new) == pytest.approx((0.5, 0.75), abs=1e-15)


def test_the_interval_is_the_centred_percentile_one_and_a_distance_is_floored_at_0():
    replicates = np.arange(1.0, 101.0)  # mean 50.5
    shifted = replicates - 50.5 + 10.0
    assert interval(replicates, 10.0, 0.9) == [np.percentile(shifted, 5.0), np.percentile(shifted, 95.0)]
    assert interval(replicates, 0.5, 0.9, floor=0.0)[0] == 0.0
    assert interval(replicates, None, 0.9) is None


def test_label_shares_under_weights():
    weights = ReplicateWeights(np.array([[2.0, 0.0], [1.0, 1.0]]), np.array([0, 0, 1]))
    np.testing.assert_allclose(label_shares(np.array([0, 1, 1]), 2, weights), [[0.5, 0.5], [1 / 3, 2 / 3]], rtol=0, atol=1e-15)


def test_a_change_needs_both_values_and_a_distance_interval_is_floored_at_both_ends():
    from calib.drift.analysis import change_of

    draws = np.linspace(-1.0, 1.0, 50)
    assert change_of(None, 0.5, draws, 0.9).value is None and change_of(0.5, None, draws, 0.9).value is None
    assert change_of(0.2, 0.5, draws, 0.9).value == pytest.approx(0.3, abs=1e-15)
    above = interval(np.linspace(1.0, 2.0, 50), 1.5, 0.9, floor=0.0)  # nowhere near the floor: unchanged
    assert above == interval(np.linspace(1.0, 2.0, 50), 1.5, 0.9)
    assert interval(-np.linspace(1.0, 2.0, 50), -1.5, 0.9, floor=0.0) == [0.0, 0.0]
