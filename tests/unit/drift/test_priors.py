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


def test_accelerated_em_reaches_the_fixed_point_of_plain_em_in_fewer_steps(monkeypatch):
    """A batch of CIFAR-100 test rows resampled to Dirichlet(1) class shares (plain EM: hundreds of
    steps): the accelerated answer lies within 1e-5 (L1) of the fixed point found with the tolerance
    at 1e-14, its likelihood is no lower than plain EM's answer's, and it takes fewer EM steps."""
    from conftest import DATA

    import calib.drift.priors as priors_module

    data = np.load(DATA / "cifar100_resnet110_test.npz")
    rng = np.random.default_rng(0)
    share = rng.dirichlet(np.ones(100))
    rows = np.concatenate(
        [rng.choice(np.flatnonzero(data["labels"] == k), size=rng.binomial(5000, share[k])) for k in range(100)]
    )
    probs, old = softmax(data["logits"][rows].astype(np.float64) / 1.5), np.full(100, 0.01)
    estimate, steps = em_priors(probs, old)
    plain, plain_steps = old.copy(), 0
    while True:
        stepped = adapted_probs(probs, old, plain).mean(axis=0)
        plain_steps += 1
        done = np.abs(stepped - plain).max() <= EM_TOLERANCE
        plain = stepped
        if done:
            break
    monkeypatch.setattr(priors_module, "EM_TOLERANCE", 1e-14)
    monkeypatch.setattr(priors_module, "EM_ITERATIONS", 10**6)
    exact, _ = em_priors(probs, old)
    assert np.abs(estimate - exact).sum() < 1e-5
    assert marginal_log_likelihood_gain(probs, old, estimate) >= marginal_log_likelihood_gain(probs, old, plain) - 1e-8
    assert steps < plain_steps / 3


def test_a_flat_likelihood_with_its_maximum_on_the_boundary_is_reached():
    """Two classes whose rows say almost nothing (p = 0.5 +- 1e-3): the likelihood's maximum over
    the priors is at (1, 0) (a bounded one-dimensional search of mean_i log sum_k q_ik pi_k finds it
    independently), where plain EM crawls 2e-5 a step and stops at its 10,000 steps 0.26 away. The
    extrapolation heads for the boundary; its step is halved while it would leave the simplex."""
    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(2)
    p1 = np.clip(0.5 + rng.normal(0, 1e-3, 400), 0, 1)
    probs, old = np.stack([1 - p1, p1], axis=1), np.array([0.5, 0.5])
    scaled = probs / old
    best = minimize_scalar(
        lambda a: -np.mean(np.log(scaled @ np.array([a, 1 - a]))), bounds=(0, 1), method="bounded", options={"xatol": 1e-12}
    )
    estimate, steps = em_priors(probs, old)
    assert abs(estimate[0] - best.x) < 1e-6 and steps < 100
    assert estimate.sum() == pytest.approx(1.0, abs=1e-12) and (estimate > 0).all()
