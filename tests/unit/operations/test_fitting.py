"""Fitting a calibrator on a source (calib.operations.fitting)."""

import numpy as np
import pytest
from conftest import NEEDS_TORCH

import calib
from calib.errors import CalibError
from calib.operations import Source, fit_source


def test_the_fit_saved_is_calib_calibrator_fitted_on_the_rows(tmp_path):
    path = calib.sample_path("cifar10_val.npz")
    reports = []
    done = fit_source(Source(path), "ts", str(tmp_path / "ts"), options={}, seed=0, progress=reports.append)
    data = np.load(path)
    direct = calib.calibrator("ts").fit(data["logits"], data["labels"])
    loaded = calib.load(str(tmp_path / "ts"))
    assert loaded.fitted.temperature_ == pytest.approx(direct.fitted.temperature_, rel=1e-12)
    assert done.summary["method"] == "ts" and done.summary["bundle"] == str(tmp_path / "ts")
    assert done.shape == direct.fitted_shape(done.input.preds) and done.train is None


def test_a_method_option_given_as_text_is_read_by_the_method(tmp_path):
    done = fit_source(Source(calib.sample_path("cifar10_val.npz")), "ats-gq", str(tmp_path / "b"), options={"alpha": "0.2"})
    assert done.calibration.fitted.options.alpha == 0.2


@NEEDS_TORCH
def test_the_training_rows_come_with_their_features(tmp_path):
    data = np.load(calib.sample_path("cifar10_val.npz"))
    for name, rows in (("cal", slice(0, 600)), ("train", slice(600, 1400))):
        np.savez(tmp_path / f"{name}.npz", logits=data["logits"][rows], labels=data["labels"][rows])
        np.save(tmp_path / f"{name}_features.npy", data["logits"][rows, :3] ** 2)
    source = Source(str(tmp_path / "cal.npz"), features=str(tmp_path / "cal_features.npy"))
    train = Source(str(tmp_path / "train.npz"), features=str(tmp_path / "train_features.npy"))
    done = fit_source(source, "ats-aq", str(tmp_path / "b"), train=train)
    assert done.calibration.fit_report()["conditioned on"] == "features" and done.train.preds.n == 800
    with pytest.raises(CalibError, match="features"):
        fit_source(source, "ats-aq", str(tmp_path / "c"), train=Source(str(tmp_path / "train.npz")))
