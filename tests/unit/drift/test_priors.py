"""calib.drift.priors: EM's fixed point, its replicates at once against one EM per replicate, and
the sampling noise and held-out gain by hand."""

from __future__ import annotations

import numpy as np
import pytest

from calib.core.numerics import softmax
from calib.drift.priors import EM_TOLERANCE, adapted_probs, em_priors, l1_noise, marginal_log_likelihood_gain
from calib.synth.shift import shift_world


def _shifted(seed: int, n: int = 3000):
    world = shift_world("label shift", n, np.random.default_rng(seed))
    return softmax(world["new_logits"]), np.full(10, 0.1), world["new_priors"]


def test_em_priors_are_a_fixed_point_and_find_a_known_shift():
    """At EM's answer one more step moves no prior by more than its tolerance; on the label-shift
    world with a calibrated model it lands near the batch's true priors."""
    probs, old, truth = _shifted(4, 5000)
    estimate, iterations = em_priors(probs, old)
    one_more = adapted_probs(probs, old, estimate).mean(axis=0)
    assert np.max(np.abs(one_more - estimate)) <= EM_TOLERANCE and 1 < iterations < 10_000
    assert np.abs(estimate - truth).sum() < 0.1


def test_the_replicates_at_once_equal_em_on_each_replicates_rows():
    probs, old, _ = _shifted(5, 800)
    weights = np.random.default_rng(1).integers(0, 3, (4, 800)).astype(float)
    together, _ = em_priors(probs, old, weights)
    for replicate, counts in enumerate(weights):
        alone, _ = em_priors(probs[np.repeat(np.arange(800), counts.astype(int))], old)
        np.testing.assert_allclose(together[replicate], alone, rtol=0, atol=1e-7)


def test_the_priors_noise_is_the_mean_absolute_normal_of_each_class_summed():
    replicates = np.array([[0.1, 0.9], [0.3, 0.7], [0.2, 0.8]])  # each class's sd is 0.1
    assert l1_noise(replicates) == pytest.approx(np.sqrt(2 / np.pi) * 0.2, abs=1e-15)


def test_the_held_out_gain_by_hand():
    """Two rows p = (0.5, 0.5) and (0.9, 0.1), priors moved from (0.5, 0.5) to (0.8, 0.2): each
    row's log sum_k p_k new_k / old_k, log(0.5 1.6 + 0.5 0.4) = log 1 = 0 and log(0.9 1.6 + 0.1 0.4)
    = log 1.48, averaged."""
    probs = np.array([[0.5, 0.5], [0.9, 0.1]])
    gain = marginal_log_likelihood_gain(probs, np.array([0.5, 0.5]), np.array([0.8, 0.2]))
    assert gain == pytest.approx(np.log(1.48) / 2, abs=1e-15)
    assert marginal_log_likelihood_gain(probs, np.array([0.5, 0.5]), np.array([0.5, 0.5])) == 0.0
