"""The checks before an estimate is trusted: the weighted two-sample distance against SciPy's and by
hand, and every rule's edge."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from calib.estimation import checks
from calib.estimation.checks import absent_classes_check, foreign, outside_support, shift_check, support_check, weighted_ks


def test_equal_weights_give_scipy_two_sample_distance_with_ties():
    rng = np.random.default_rng(0)
    batch = rng.integers(0, 20, 300).astype(float)
    reference = rng.integers(0, 25, 500).astype(float)
    distance, effective = weighted_ks(batch, reference, np.ones(500))
    assert distance == pytest.approx(stats.ks_2samp(batch, reference).statistic, abs=1e-15)
    assert effective == pytest.approx(500)


def test_weighted_distance_by_hand():
    # batch {1, 2}; reference {1, 3}: equal weights put F_ref = 0.5 at 1 and 2, F_batch = 0.5, 1: D = 0.5
    assert weighted_ks(np.array([1.0, 2.0]), np.array([1.0, 3.0]), np.ones(2))[0] == 0.5
    # weights 3 and 1 put F_ref = 0.75 at 1 and 2: D = max(|0.5 - 0.75|, |1 - 0.75|) = 0.25; m_e = 16 / 10
    distance, effective = weighted_ks(np.array([1.0, 2.0]), np.array([1.0, 3.0]), np.array([3.0, 1.0]))
    assert (distance, effective) == (0.25, 1.6)


def test_the_rule_is_strict_in_p_and_inclusive_in_size():
    assert foreign(checks.ALPHA / 2, 0.01, 0.01)
    assert not foreign(checks.ALPHA, 0.5, 0.01)
    assert not foreign(checks.ALPHA / 2, np.nextafter(0.01, 0), 0.01)


def test_a_margin_on_the_support_edge_is_inside():
    reference = np.linspace(0.0, 5.0, 1001)
    assert not outside_support(np.array([0.0, 5.0]), reference).any()
    assert outside_support(np.array([np.nextafter(0.0, -1.0), np.nextafter(5.0, 6.0)]), reference).all()
    found = support_check(200, 200, reference)
    assert found.statistic == 1.0 and found.failed


def test_support_fails_at_exactly_the_least_share():
    reference = np.linspace(0.0, 5.0, 100_001)  # beyond the range by chance: 2 / 100002 of rows
    assert support_check(10, 1000, reference).failed  # 1% of the rows, improbable under 2e-5 a row
    assert not support_check(9, 1000, reference).failed


def test_label_shift_alone_passes_and_a_moved_score_fails():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 20_000)
    reference = rng.normal(2.0 * labels, 1.0)
    shares = np.array([0.8, 0.2])  # the batch: class 0 four times as common
    batch_labels = rng.choice(2, 5000, p=shares)
    batch = rng.normal(2.0 * batch_labels, 1.0)
    ratio = shares / np.bincount(labels, minlength=2) * len(labels)
    assert not shift_check(batch, reference, labels, ratio).failed
    assert shift_check(batch, reference, labels, np.ones(2)).failed  # read as if the priors had not moved
    assert shift_check(batch + 0.5, reference, labels, ratio).failed


def test_classes_the_map_has_not_seen_fail_at_one_percent_more_than_the_map_gives_them():
    reference = np.array([0.5, 0.49, 0.01])
    assert not absent_classes_check([2], np.array([0.5, 0.4800001, 0.0199999]), reference).failed
    assert absent_classes_check([2], np.array([0.5, 0.48, 0.02]), reference).failed


def test_a_batch_of_a_class_the_reference_never_had_is_unreliable():
    import calib

    val, test = (np.load(calib.sample_path(f"cifar10_{part}.npz")) for part in ("val", "test"))
    seen = val["labels"] != 3
    fitted = calib.calibrator("ts").fit(val["logits"][seen], val["labels"][seen])
    assert not calib.estimate(test["logits"], calibrator=fitted).reliable  # a tenth of its rows are cats
    assert calib.estimate(test["logits"][test["labels"] != 3], calibrator=fitted).reliable
