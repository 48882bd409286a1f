"""How a gate reads the noise: the three outcomes at their edges (from the rule's definition: fail
when the whole confidence interval is past the threshold, pass when none of it is), the interval's
ends and the minimum detectable change."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from calib.evaluation.gate_noise import Spread, outcome


def spread(lower, upper, sd=1.0, rows=100, level=0.95):
    return Spread(lower, upper, sd, rows, level, "bootstrap")


# the decision rule -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op, lower, upper, expected",
    [
        # fails when value > 0.5: fail iff lower > 0.5, pass iff upper <= 0.5
        (">", 0.5, 0.75, "inconclusive"),  # lower exactly on the threshold: not past it
        (">", float(np.nextafter(0.5, 1)), 0.75, "fail"),
        (">", 0.25, 0.5, "pass"),  # upper exactly on the threshold: 0.5 > 0.5 does not hold
        (">", 0.25, float(np.nextafter(0.5, 1)), "inconclusive"),
        # fails when value >= 0.5: the threshold itself is failing
        (">=", 0.5, 0.75, "fail"),
        (">=", 0.25, 0.5, "inconclusive"),
        (">=", 0.25, float(np.nextafter(0.5, 0)), "pass"),
        # fails when value < 0.5 (higher is better): fail iff upper < 0.5, pass iff lower >= 0.5
        ("<", 0.25, 0.5, "inconclusive"),
        ("<", 0.25, float(np.nextafter(0.5, 0)), "fail"),
        ("<", 0.5, 0.75, "pass"),
        # fails when value <= 0.5
        ("<=", 0.25, 0.5, "fail"),
        ("<=", 0.5, 0.75, "inconclusive"),
        ("<=", float(np.nextafter(0.5, 1)), 0.75, "pass"),
    ],
)
def test_the_three_outcomes_at_their_edges(op, lower, upper, expected):
    assert outcome(0.5, spread(lower, upper), op, 0.5) == expected


def test_without_replicates_the_value_decides_and_undefined_fails():
    assert outcome(0.5, None, ">", 0.5) == "pass" and outcome(float(np.nextafter(0.5, 1)), None, ">", 0.5) == "fail"
    assert outcome(None, spread(0.0, 0.1), ">", 0.5) == "fail"


def test_the_interval_is_the_quantiles_centred_on_the_estimate():
    """401 replicates 0, 0.25, ..., 100 (10 beyond each end): the 95% interval's ends are the 2.5% and
    97.5% quantiles, 2.5 and 97.5; centred on an estimate of 60 (their mean is 50) every replicate
    moves up by 10; sd with n - 1."""
    values = np.linspace(0.0, 100.0, 401)
    found = Spread.of(values, 0.95, 1000, "bootstrap")
    assert (found.lower, found.upper) == (2.5, 97.5)
    assert found.sd == pytest.approx(math.sqrt(sum((i / 4 - 50) ** 2 for i in range(401)) / 400), rel=1e-12)
    centred = Spread.of(values, 0.95, 1000, "bootstrap", estimate=60.0)
    assert (centred.lower, centred.upper) == (12.5, 107.5)
    assert Spread.of([1.0, float("nan")], 0.95, 10, "bootstrap") is None  # one value left: no spread


def test_minimum_detectable_change_and_rows_to_settle():
    """(z_0.975 + z_0.8) sd = (1.9599640 + 0.8416212) x 0.01 for a 95% interval; n (that / d)^2
    rows settle d."""
    found = spread(0.0, 1.0, sd=0.01, rows=300)
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
    assert found.detectable() == pytest.approx(2.8015852 * 0.01, rel=1e-7) == pytest.approx(z * 0.01)
    assert found.rows_to_settle(0.005) == math.ceil(300 * (z * 0.01 / 0.005) ** 2)
    assert found.rows_to_settle(0.0) is None
    assert spread(0.0, 0.0, sd=0.0).rows_to_settle(0.5) is None  # no spread: nothing to settle
    assert spread(0.0, 1.0, sd=1.0, rows=100).rows_to_settle(2.0) == math.ceil(100 * (z / 2.0) ** 2)
