"""The calibration test on a batch's labelled rows: its fit against a grid, its three outcomes and
their edges."""

from __future__ import annotations

import numpy as np
import pytest

from calib.core.numerics import log_softmax, softmax
from calib.estimation.labelled import BROKEN, HOLDS, INCONCLUSIVE, TOLERANCE, calibration_test, outcome_of


def _rows(n: int, beta: float, seed: int):
    """Probabilities whose labels are drawn from softmax(beta log p): calibrated at beta = 1."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 2.5, size=(n, 5))
    truth = softmax(beta * log_softmax(logits))
    labels = (rng.random(n)[:, None] > truth.cumsum(axis=1)).sum(axis=1).clip(max=4)
    return softmax(logits), labels


def test_the_fitted_temperature_maximises_the_likelihood():
    probs, labels = _rows(400, 0.7, 0)
    found = calibration_test(probs, labels)
    grid = np.linspace(0.3, 1.5, 2401)
    log_q = np.log(probs)
    likelihood = [log_softmax(beta * log_q)[np.arange(400), labels].sum() for beta in grid]
    assert found.beta == pytest.approx(grid[int(np.argmax(likelihood))], abs=1e-3)
    assert found.interval[0] < found.beta < found.interval[1]


def test_a_decayed_map_is_broken_and_a_sound_one_is_not():
    assert calibration_test(*_rows(200, 0.5, 1)).outcome == BROKEN
    assert calibration_test(*_rows(20_000, 1.0, 2)).outcome == HOLDS
    assert calibration_test(*_rows(200, 1.0, 3)).outcome != BROKEN


def test_outcome_edges():
    band = (1.0 / (1.0 + TOLERANCE), 1.0 + TOLERANCE)
    assert outcome_of(*band, band) == HOLDS
    assert outcome_of(0.5, band[0], band) == INCONCLUSIVE  # touching the band is not outside it
    assert outcome_of(0.5, np.nextafter(band[0], 0.0), band) == BROKEN
    assert outcome_of(band[1], 2.0, band) == INCONCLUSIVE
    assert outcome_of(np.nextafter(band[1], 2.0), 2.0, band) == BROKEN
    assert outcome_of(0.5, 2.0, band) == INCONCLUSIVE
