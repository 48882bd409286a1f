"""The incomplete beta function and its quantile without SciPy: closed forms on tiny parameters,
SciPy's own values on a grid (large parameters too, where the textbook log-Gamma form loses 1e-7),
and the Clopper-Pearson ends they give."""

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy.special import betainc, betaincinv

from calib.core.beta import beta_quantile, regularized_beta
from calib.core.binning import clopper_pearson


@pytest.mark.parametrize("x", [0.0, 1e-12, 0.1, 0.5, 0.9, 1.0 - 1e-12, 1.0])
def test_closed_forms_of_the_incomplete_beta_function(x):
    assert regularized_beta(x, 1.0, 1.0) == pytest.approx(x, abs=1e-15)
    assert regularized_beta(x, 1.0, 4.0) == pytest.approx(1.0 - (1.0 - x) ** 4, abs=1e-15)
    assert regularized_beta(x, 3.0, 1.0) == pytest.approx(x**3, abs=1e-15)
    assert regularized_beta(x, 2.0, 2.0) == pytest.approx(3 * x**2 - 2 * x**3, abs=1e-15)


@pytest.mark.parametrize("q", [0.0, 1e-9, 0.025, 0.5, 0.975, 1.0])
def test_closed_forms_of_the_quantile(q):
    assert beta_quantile(q, 1.0, 1.0) == pytest.approx(q, abs=1e-15)
    assert beta_quantile(q, 5.0, 1.0) == pytest.approx(q ** (1 / 5), abs=1e-14)
    assert beta_quantile(q, 1.0, 5.0) == pytest.approx(1.0 - (1.0 - q) ** (1 / 5), abs=1e-14)


def test_the_arcsine_distribution_near_both_ends():
    """I_x(1/2, 1/2) = 2 asin(sqrt(x)) / pi = 1 - 2 asin(sqrt(1 - x)) / pi, also within 1e-9 of 1
    (where SciPy's is 1e-12 off)."""
    for x in (1e-9, 0.01, 0.3):
        assert regularized_beta(x, 0.5, 0.5) == pytest.approx(2 * math.asin(math.sqrt(x)) / math.pi, abs=1e-15)
    for x in (0.6, 0.999, 1 - 1e-9):
        assert regularized_beta(x, 0.5, 0.5) == pytest.approx(1 - 2 * math.asin(math.sqrt(1 - x)) / math.pi, abs=1e-15)


@pytest.mark.parametrize("a, b", [(2, 5), (30, 70), (1000, 3), (1e5, 2e5), (7.5e6, 2.5e6)])
def test_the_incomplete_beta_function_equals_scipys(a, b):
    """To 2e-13: at a + b = 10^7 one standard deviation from the mean both differ from the exact
    binomial sum by up to 1.7e-13 (this) and 2e-14 (SciPy); at three, by under 1e-15."""
    mean, sd = a / (a + b), math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
    for x in np.r_[np.linspace(0.001, 0.999, 21), np.clip(mean + sd * np.arange(-4, 5), 1e-9, 1 - 1e-9)]:
        assert regularized_beta(float(x), a, b) == pytest.approx(betainc(a, b, x), abs=2e-13), x


@pytest.mark.parametrize("n", [1, 2, 9, 37, 1000, 123_457, 10**6, 10**7])
def test_clopper_pearson_ends_equal_scipys_quantiles_up_to_ten_million_rows(n):
    rng = np.random.default_rng(n)
    for k in sorted({0, 1, n // 3, n // 2, n - 1, n, *rng.integers(0, n + 1, 3).tolist()}):
        for level in (0.5, 0.95, 0.9999):
            lower, upper = clopper_pearson(k, n, level)
            tail = (1 - level) / 2
            assert lower == (pytest.approx(betaincinv(k, n - k + 1, tail), abs=1e-12) if k > 0 else 0.0), (k, level)
            assert upper == (pytest.approx(betaincinv(k + 1, n - k, 1 - tail), abs=1e-12) if k < n else 1.0), (k, level)


def test_clopper_pearson_keeps_the_shape_of_its_counts():
    lower, upper = clopper_pearson(np.array([[0, 3], [9, 5]]), np.array([9, 9]), 0.95)
    assert lower.shape == upper.shape == (2, 2)
    assert lower[0, 0] == 0.0 and upper[1, 0] == 1.0
    assert lower[0, 1] == pytest.approx(betaincinv(3, 7, 0.025), abs=1e-12)


def test_an_evaluation_with_bootstrap_intervals_imports_no_scipy():
    """The analytic intervals and the floors of gates need no scipy.special (0.2 s to import), and
    the bootstrap's intervals and the gates' floors no numpy.ma (7 ms, which np.percentile's first
    call imports)."""
    code = (
        "import sys, numpy as np, calib\n"
        "rng = np.random.default_rng(0)\n"
        "calib.evaluate(rng.normal(size=(300, 5)), rng.integers(0, 5, 300), "
        "request=calib.EvaluationRequest.of(bootstrap=200, gates=['ece>0.5']))\n"
        "print(sorted(name for name in sys.modules if name.startswith('scipy') or name == 'numpy.ma'))\n"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"
