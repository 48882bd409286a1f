"""Fitting on a multi-label input's pairs: shared by all labels, per label or joint, and the
refusals of what has no stated coverage."""

import numpy as np
import pytest

from calib.api import as_predictions
from calib.calibrators.base import CalibrationInputs
from calib.calibrators.label_pairs import fit_pairs
from calib.calibrators.per_label import PerLabel
from calib.registry import calibrator_class


def _pairs(n=300, labels=3, seed=0, all_zero=False):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, labels)) * 2.0
    y = np.zeros((n, labels), dtype=int) if all_zero else (rng.random((n, labels)) < 1 / (1 + np.exp(-z / 2))).astype(int)
    preds = as_predictions(z, y)
    return preds, CalibrationInputs.of(preds), preds.labels


def _fit(method, inputs, labels, per_label=False, joint=False, seed=0):
    cls = calibrator_class(method)
    return fit_pairs(cls, cls.parse_options({}), inputs, labels, 3, per_label=per_label, joint=joint, seed=seed)


def test_the_shared_fit_is_the_method_on_the_pooled_pairs():
    preds, inputs, labels = _pairs()
    shared = _fit("ts", inputs, labels)
    pooled = calibrator_class("ts")(calibrator_class("ts").parse_options({})).fit_inputs(inputs, labels, seed=0)
    assert type(shared).__name__ == type(pooled).__name__ and shared.temperature_ == pooled.temperature_
    assert shared.absent_classes_ == ()


def test_per_label_fits_a_calibrator_per_label():
    _, inputs, labels = _pairs(seed=1)
    fitted = _fit("ts", inputs, labels, per_label=True)
    assert isinstance(fitted, PerLabel) and len(fitted.calibrators_) == 3


def test_joint_fits_sets_with_the_joint_threshold():
    _, inputs, labels = _pairs(seed=2)
    fitted = _fit("mr", inputs, labels, joint=True)
    assert fitted.joint_["labels"] == 3 and fitted.absent_classes_ == ()


def test_a_class_never_seen_among_the_pairs_is_recorded():
    """Every pair's label 0: the class y_l = 1 (class 1 of a pair's two) had no calibration pair."""
    _, inputs, labels = _pairs(seed=3, all_zero=True)
    assert _fit("ts", inputs, labels).absent_classes_ == (1,)


@pytest.mark.parametrize(
    "method, how, words",
    [
        ("mr", {"per_label": True, "joint": True}, "each label or every label at once: choose one"),
        ("ts", {"joint": True}, "'ts' builds no conformal sets"),
        ("mr", {}, "need a stated coverage, per label"),
    ],
)
def test_what_has_no_stated_coverage_is_refused(method, how, words):
    _, inputs, labels = _pairs(seed=4)
    with pytest.raises(ValueError, match=words):
        _fit(method, inputs, labels, **how)
