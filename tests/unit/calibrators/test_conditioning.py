"""What the model-trained parts condition on (calib.calibrators.conditioning): the logits up to 128
classes, the 32 largest log-probabilities of the row above, or features; a width that does not
grow with K, the same for any order of the classes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import needs

import calib
from calib.calibrators.conditioning import RANKED_ABOVE, RANKED_WIDTH, chosen, ranked_log_probs
from calib.errors import UsageError


def test_ranked_log_probs_by_hand():
    """log softmax of (0, log 3, log 6): log(1/10), log(3/10), log(6/10), largest first."""
    logits = np.array([[0.0, np.log(3.0), np.log(6.0)], [np.log(6.0), 0.0, np.log(3.0)]])
    expected = np.log([0.6, 0.3, 0.1])
    np.testing.assert_allclose(ranked_log_probs(logits, 3), [expected, expected], rtol=0, atol=1e-15)
    np.testing.assert_allclose(ranked_log_probs(logits, 2), [expected[:2], expected[:2]], rtol=0, atol=1e-15)


def test_ranked_log_probs_with_ties_and_a_shift():
    logits = np.array([[2.0, 2.0, 1.0, 2.0]])
    top = ranked_log_probs(logits, 3)
    assert top[0, 0] == top[0, 1] == top[0, 2]  # the three tied logits, one log-probability
    np.testing.assert_array_equal(ranked_log_probs(logits + 1e3, 3), top)  # a function of softmax(z)


@pytest.mark.parametrize(
    "option, k, expected",
    [
        ("auto", RANKED_ABOVE, ("logits", RANKED_ABOVE)),  # on the edge: still the logits
        ("auto", RANKED_ABOVE + 1, ("ranked", RANKED_WIDTH)),
        ("logits", 1000, ("logits", 1000)),
        ("ranked", 10, ("ranked", 10)),  # fewer classes than the width: all of them, ranked
        ("ranked", RANKED_WIDTH, ("ranked", RANKED_WIDTH)),
        ("ranked", RANKED_WIDTH + 1, ("ranked", RANKED_WIDTH)),
    ],
)
def test_chosen_on_its_edges(option, k, expected):
    assert chosen(option, k, None) == expected
    assert chosen(option, k, np.zeros((3, 7))) == ("features", 7)  # features, when given, always


def _large_k(n=1200, k=200, seed=0):
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((n, k)) * 3.0
    labels = rng.integers(0, k, n)
    u[np.arange(n), labels] += 9.0
    return u, labels


@pytest.mark.parametrize(
    "method, options",
    [
        ("mr", {"threshold": "adaptive"}),
        ("ats-aq", {}),
        ("ats-maq", {}),
        ("adaptive-ts", {}),
    ],
)
def test_above_128_classes_the_models_condition_on_ranked_log_probs_whatever_the_class_order(
    method, options, short_flow_training_fixture
):
    """K = 200: the fit reports the ranked conditioning, and permuting the classes of the
    calibration and test rows alike permutes the calibrated probabilities (the model sees the same
    inputs), which a model of the raw logits does not do."""
    needs("torch")  # every one of them trains a network
    logits, labels = _large_k()
    order = np.random.default_rng(1).permutation(logits.shape[1])
    inverse = np.argsort(order)
    fitted = calib.calibrator(method, **options).fit(logits[:1000], labels[:1000])
    assert fitted.fitted.conditioning_ == "ranked" and fitted.fitted.n_conditioning_ == RANKED_WIDTH
    if method == "adaptive-ts":  # its NLL sums over the classes in their order: float32 rounding, then chaos
        return
    permuted = calib.calibrator(method, **options).fit(logits[:1000, order], inverse[labels[:1000]])
    np.testing.assert_allclose(
        permuted.predict_proba(logits[1000:, order])[:, inverse], fitted.predict_proba(logits[1000:]), rtol=0, atol=1e-9
    )


@pytest.fixture
def short_flow_training_fixture(monkeypatch):
    from conftest import short_flow_training

    short_flow_training(monkeypatch, 30)


def test_the_old_conditioning_is_kept_by_name_and_saved(tmp_path):
    needs("torch")
    logits, labels = _large_k(n=600)
    fitted = calib.calibrator("adaptive-ts", conditioning="logits").fit(logits, labels)
    assert fitted.fitted.conditioning_ == "logits" and fitted.fitted.n_conditioning_ == 200
    fitted.save(str(tmp_path / "b"))
    loaded = calib.load(str(tmp_path / "b"))
    assert loaded.fitted.conditioning_ == "logits"
    np.testing.assert_array_equal(loaded.predict_proba(logits[:5]), fitted.predict_proba(logits[:5]))
    with pytest.raises(UsageError, match="'conditioning' must be one of auto, logits, ranked"):
        calib.calibrator("ats-aq", conditioning="sorted")


def test_a_ranked_model_applies_to_probabilities_as_given():
    """The ranked log-probabilities are a function of softmax(z): a bundle fitted on logits applies
    to the same rows' probabilities with the same result."""
    needs("torch")
    from scipy.special import softmax

    logits, labels = _large_k()
    fitted = calib.calibrator("mr", threshold="adaptive").fit(logits[:1000], labels[:1000])
    assert fitted.fitted.softmax_only()
    from_logits = fitted.predict_sets(logits[1000:])
    from_probs = fitted.predict_sets(softmax(logits[1000:], axis=1), kind="probs")
    assert (from_logits == from_probs).mean() > 0.999


def test_device_names_and_their_edges(monkeypatch):
    from calib.core import extras

    assert extras.resolve_device("cpu") == "cpu"
    for bad in ("gpu", "cuda:", "cuda:x", "CPU", ""):
        with pytest.raises(UsageError, match="device must be one of auto, cpu, cuda"):
            extras.check_device_name(bad)
    torch = needs("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert extras.resolve_device("auto") == "cpu"
    with pytest.raises(UsageError, match="torch sees no such GPU here"):
        extras.resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert extras.resolve_device("auto") == "cuda" and extras.resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(UsageError, match="no such GPU"):
        extras.resolve_device("cuda:2")  # two GPUs: cuda:0 and cuda:1


def test_training_device_is_scoped_and_reported(run, tmp_path):
    needs("torch")
    from calib.core import extras

    logits, labels = _large_k(n=600, k=20)
    assert extras.current_device() == "cpu"
    with extras.training_device("cpu") as used:
        assert used == "cpu" == extras.current_device()
    fitted = calib.calibrator("ats-aq").fit(logits, labels, device="cpu")
    same = calib.calibrator("ats-aq").fit(logits, labels)  # auto, on a machine whose torch sees no GPU
    assert fitted.device == "cpu" and calib.calibrator("ts").fit(logits, labels).device is None
    if same.device == "cpu":
        np.testing.assert_array_equal(fitted.predict_proba(logits[:20]), same.predict_proba(logits[:20]))
    path = tmp_path / "p.npz"
    np.savez(path, logits=logits, labels=labels)
    code, out, err = run("fit", path, "--method", "adaptive-ts", "--device", "cpu", "--out", tmp_path / "b", "--json", "-")
    assert code == 0, err
    import json

    assert json.loads(out)["device"] == "cpu"
    code, _, err = run("fit", path, "--method", "ts", "--device", "tpu", "--out", tmp_path / "c")
    assert code == 2 and "device must be one of" in err


def test_the_documented_widths_and_the_ranked_inputs_against_a_full_sort():
    assert (RANKED_ABOVE, RANKED_WIDTH) == (128, 32)
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(40, 50)) * 3
    from calib.core.numerics import log_softmax

    full = -np.sort(-log_softmax(logits), axis=1)
    for width in (1, 10, 49, 50):
        np.testing.assert_array_equal(ranked_log_probs(logits, width), full[:, :width])
