"""Temperature scaling: exact optimum, agreement with probmetrics, invariances."""

import numpy as np
import pytest
from conftest import needs
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax as scipy_log_softmax

from calib.calibrators.temperature import TemperatureScaling, nll_gradient


def nll_at(temperature, logits, labels):
    return -scipy_log_softmax(logits / temperature, axis=1)[np.arange(len(labels)), labels].mean()


def test_temperature_is_the_nll_minimiser_to_1e8(cifar100):
    logits = cifar100["val_logits"].astype(np.float64)
    labels = cifar100["val_labels"]
    fitted = TemperatureScaling().fit(logits, labels).temperature_
    # independent: scipy's bounded Brent on T, then the derivative must vanish at our T
    brent = minimize_scalar(lambda t: nll_at(t, logits, labels), bounds=(0.05, 20), method="bounded", options={"xatol": 1e-12}).x
    assert fitted == pytest.approx(brent, rel=1e-7)
    grad, curvature = nll_gradient(1.0 / fitted, logits, labels)
    # Newton distance to the root, relative: |grad / curvature| * T
    assert abs(grad / curvature) * fitted < 1e-8


def test_agrees_with_probmetrics(cifar100):
    torch = needs("torch")
    needs("numba")
    needs("probmetrics")
    from probmetrics.calibrators import get_calibrator
    from probmetrics.distributions import CategoricalLogits

    logits, labels = cifar100["val_logits"], cifar100["val_labels"]
    theirs = get_calibrator("temp-scaling", ts_max_bisection_steps=60)
    theirs.fit_torch(CategoricalLogits(torch.as_tensor(logits)), torch.as_tensor(labels))
    ours = TemperatureScaling().fit(logits.astype(np.float64), labels).temperature_
    assert ours == pytest.approx(1.0 / float(theirs.invtemp_), rel=1e-4)


@pytest.mark.parametrize("scale", [0.2, 1.0, 5.0])
def test_recovers_a_known_temperature(scale):
    # labels drawn from softmax(z); the model shows z * scale, so the best T is near `scale`
    rng = np.random.default_rng(0)
    z = rng.normal(size=(20000, 5)) * 2
    p = np.exp(scipy_log_softmax(z, axis=1))
    labels = (p.cumsum(1) > rng.random((20000, 1))).argmax(1)
    fitted = TemperatureScaling().fit(z * scale, labels).temperature_
    assert fitted == pytest.approx(scale, rel=0.05)


def test_keeps_argmax_and_lowers_nll(cifar100):
    logits, labels = cifar100["val_logits"].astype(np.float64), cifar100["val_labels"]
    ts = TemperatureScaling().fit(logits, labels)
    out = ts.transform(logits)
    assert np.array_equal(out.argmax(1), logits.argmax(1))
    assert np.allclose(np.exp(out).sum(1), 1.0, atol=1e-12)
    assert nll_at(ts.temperature_, logits, labels) <= nll_at(1.0, logits, labels)


def test_separable_data_hits_the_bracket_end():
    logits = np.array([[5.0, 0.0], [0.0, 5.0]])
    ts = TemperatureScaling().fit(logits, np.array([0, 1]))
    assert ts.temperature_ == pytest.approx(np.exp(-16.0))
    assert np.isfinite(ts.transform(logits)).all()


def test_newton_stops_once_converged(cifar100, monkeypatch):
    """A converged Newton step can land on a bracket end; it must stop there, not fall back to
    bisection (which took 47 passes over 50,000 x 1,000 logits instead of 8)."""
    from calib.calibrators import temperature

    calls = []
    original = temperature.nll_gradient
    monkeypatch.setattr(temperature, "nll_gradient", lambda *args: calls.append(args[0]) or original(*args))
    for scale in (1.0, 0.5, 3.0):
        calls.clear()
        logits = cifar100["val_logits"].astype(np.float64) * scale
        temperature.fit_inverse_temperature(logits, cifar100["val_labels"])
        assert len(calls) <= 12, (scale, len(calls))
