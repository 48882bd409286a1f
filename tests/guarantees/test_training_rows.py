"""Training rows apart from the calibration rows (the ATS-CP paper's protocol): the model of ats-aq,
ats-maq and the adaptive threshold is fitted on them and every calibration row conformalises it."""

import json

import numpy as np
import pytest
from conftest import SAMPLE, needs, short_flow_training

import calib
from calib.calibrators import mlp
from calib.calibrators import thresholds as thresholds_module
from calib.calibrators.conformal import conformal_quantile, label_scores

pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def short_training(monkeypatch):
    monkeypatch.setitem(thresholds_module.QR_TRAINING, "steps", 100)
    short_flow_training(monkeypatch, 100)


@pytest.fixture(scope="module")
def rows():
    val, test = np.load(SAMPLE / "cifar10_val.npz"), np.load(SAMPLE / "cifar10_test.npz")
    return val["logits"].astype(np.float64), val["labels"], test["logits"].astype(np.float64), test["labels"]


def test_every_calibration_row_conformalises_the_model_trained_apart(rows):
    """q is the conformal quantile of E = V - qr(x) over all the calibration rows (not a half), and
    the sets cover 1 - alpha of fresh rows."""
    cal, cal_labels, other, other_labels = rows
    train, test = slice(0, 2000), slice(2000, None)
    fitted = calib.calibrator("ats-aq", alpha=0.1).fit(cal, cal_labels, train=(other[train], other_labels[train]))
    arrays = fitted.fitted.threshold_
    residuals = label_scores(cal, cal_labels, "msp") - mlp.forward(arrays, "qr", cal)[:, 0]
    assert float(arrays["q"]) == conformal_quantile(residuals, 0.1)
    assert fitted.fit_report()["model fitted on"] == "2000 training rows"
    sets = fitted.predict_sets(other[test])
    assert np.mean(sets[np.arange(len(sets)), other_labels[test]]) >= 0.88
    halves = calib.calibrator("ats-aq", alpha=0.1).fit(cal, cal_labels)
    assert halves.fit_report()["model fitted on"] == "half of the calibration rows"
    assert float(halves.fitted.threshold_["q"]) != float(arrays["q"])


@pytest.mark.parametrize(
    "method,options", [("ats-maq", {"model": "multiqr"}), ("ats-maq", {"model": "flow"}), ("mr", {"threshold": "adaptive"})]
)
def test_each_method_with_a_model_takes_training_rows(rows, tmp_path, method, options):
    cal, cal_labels, other, other_labels = rows
    fitted = calib.calibrator(method, **options).fit(cal, cal_labels, train=(other[:1500], other_labels[:1500]))
    probs = fitted.predict_proba(other[1500:2500])
    assert np.allclose(probs.sum(axis=1), 1.0)
    fitted.save(str(tmp_path / "bundle"))
    again = calib.load(str(tmp_path / "bundle"))
    assert again.fit_report()["model fitted on"] == "1500 training rows"
    assert np.array_equal(again.predict_proba(other[1500:2500]), probs)


def test_training_rows_are_refused_where_they_have_no_use(rows):
    cal, cal_labels, other, other_labels = rows
    for method, options in (("ts", {}), ("mr", {}), ("ats-mgq", {})):
        with pytest.raises(ValueError, match="fits no model of its own"):
            calib.calibrator(method, **options).fit(cal, cal_labels, train=(other[:100], other_labels[:100]))
    with pytest.raises(ValueError, match="classes"):
        calib.calibrator("ats-aq").fit(cal, cal_labels, train=(other[:100, :5], other_labels[:100] % 5))
    with pytest.raises(ValueError, match="features"):
        calib.calibrator("ats-aq").fit(cal, cal_labels, features=cal[:, :3], train=(other[:100], other_labels[:100]))
    with pytest.raises(ValueError, match="training rows came with features"):
        calib.calibrator("ats-aq").fit(cal, cal_labels, train=(other[:100], other_labels[:100]), train_features=other[:100, :3])
    with pytest.raises(ValueError, match="without the training rows"):
        calib.calibrator("ats-aq").fit(cal, cal_labels, train_features=other[:100, :3])
    # training probabilities beside calibration logits: another kind, refused (not read as logits)
    probs = np.exp(other[:100] - other[:100].max(axis=1, keepdims=True))
    with pytest.raises(ValueError, match="classes of probs"):
        calib.calibrator("ats-aq").fit(cal, cal_labels, train=(probs / probs.sum(axis=1, keepdims=True), other_labels[:100]))


def test_fit_train_on_the_command_line(tmp_path, run):
    code, out, err = run(
        "fit",
        SAMPLE / "cifar10_val.npz",
        "-m",
        "ats-aq",
        "--train",
        SAMPLE / "cifar10_test.npz",
        "--out",
        tmp_path / "aq",
        "--json",
        "-",
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["train"]["n"] == 10000 and summary["fit_report"]["model fitted on"] == "10000 training rows"
    code, _, err = run(
        "fit", SAMPLE / "cifar10_val.npz", "-m", "ts", "--train", SAMPLE / "cifar10_test.npz", "--out", tmp_path / "ts"
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "fits no model of its own" in err
    code, _, err = run(
        "fit", SAMPLE / "cifar10_val.npz", "-m", "ats-aq", "--train-features", SAMPLE / "cifar10_val.npz", "--out", tmp_path / "x"
    )
    assert code == 2 and "--train-features needs --train" in err


def test_when_no_attempt_reaches_the_loss_bound_the_best_is_kept():
    """A loss that cannot go below the restart bound (mean squared error + 20): every attempt runs,
    each with lr / 10; the attempt with the lowest loss is kept, not the last one (whose lr is 100x
    smaller here and which stays near its initialisation), and a warning says so."""
    torch = needs("torch")

    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(400, 3))
    targets = inputs @ np.array([1.0, -2.0, 0.5]) + 3.0

    def loss(out, v):
        return torch.mean((out[:, 0] - v) ** 2) + 20.0

    settings = dict(layers=(8, 1), loss_fn=loss, prefix="m", steps=300, batch_size=80)
    kept = mlp.train(inputs, targets, lr=1e-2, seed=0, restarts=2, **settings)
    last = mlp.train(inputs, targets, lr=1e-4, seed=2, restarts=0, **settings)
    assert int(kept["m_attempts"]) == 3 and int(last["m_attempts"]) == 1
    assert float(kept["m_loss"]) < float(last["m_loss"]) - 1.0
    fitted = mlp.forward(kept, "m", inputs)[:, 0]
    assert float(kept["m_loss"]) == pytest.approx(np.mean((fitted - targets) ** 2) + 20.0, rel=1e-4)
    (warning,) = mlp.training_warnings(kept, "m", "test model")
    assert "all 3 attempts" in warning and f"{float(kept['m_loss']):.4g}" in warning
    assert mlp.training_warnings(last, "m", "test model") != [] and mlp.training_warnings({}, "m", "x") == []


def test_training_rows_with_features(rows):
    """A model conditioned on features learns from the training rows' features; the widths must match."""
    cal, cal_labels, other, other_labels = rows
    features, train_features = cal[:, :4] ** 2, other[:1500, :4] ** 2
    fitted = calib.calibrator("ats-aq", alpha=0.1).fit(
        cal, cal_labels, features=features, train=(other[:1500], other_labels[:1500]), train_features=train_features
    )
    assert fitted.fit_report()["conditioned on"] == "features"
    assert fitted.predict_sets(other[2000:2100], features=other[2000:2100, :4] ** 2).shape == (100, 10)
    with pytest.raises(ValueError, match="expects 4 features columns; got 3"):
        calib.calibrator("ats-aq").fit(
            cal, cal_labels, features=features, train=(other[:1500], other_labels[:1500]), train_features=train_features[:, :3]
        )
