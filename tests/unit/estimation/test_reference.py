"""The record of the reference rows: its residuals by hand, their weighting by other priors, the
bundle round trip and what a damaged record says."""

from __future__ import annotations

import numpy as np
import pytest

import calib
from calib.errors import InputError
from calib.estimation import reference as reference_module
from calib.estimation.reference import ReferenceRows, margins


def _record() -> ReferenceRows:
    probs = np.array([[0.8, 0.2], [0.6, 0.4], [0.3, 0.7], [0.1, 0.9]])
    return ReferenceRows.of(probs, np.log(probs), np.array([0, 1, 1, 1]))


def test_residuals_by_hand():
    record = _record()
    # accuracy residuals 1{y = argmax} - p_argmax: 1 - 0.8, 0 - 0.6, 1 - 0.7, 1 - 0.9
    residuals = np.array([0.2, -0.6, 0.3, 0.1])
    assert record.label_counts.tolist() == [1, 3]
    np.testing.assert_allclose(record.residual_sums[0], [0.2, -0.6 + 0.3 + 0.1], atol=1e-15)
    mean, noise = record.map_error("accuracy")
    assert mean == pytest.approx(residuals.mean(), abs=1e-15)
    assert noise == pytest.approx(residuals.var() / 4, abs=1e-15)


def test_prior_weights_reweigh_the_classes():
    record = _record()
    # class 0 weighted 3, class 1 weighted 1/3: 3 x 0.2 + (1/3)(-0.2) over 3 x 1 + (1/3) x 3 rows
    mean, noise = record.map_error("accuracy", np.array([3.0, 1.0 / 3.0]))
    assert mean == pytest.approx((0.6 - 0.2 / 3) / 4, abs=1e-15)
    second = (3 * 0.04 + (0.36 + 0.09 + 0.01) / 3) / 4
    effective = 4**2 / (9 * 1 + 3 / 9)
    assert noise == pytest.approx((second - mean**2) / effective, abs=1e-15)


def test_margins_are_the_top_two_distance():
    np.testing.assert_array_equal(margins(np.array([[3.0, 1.0, 2.0], [0.0, 0.0, -1.0]])), [1.0, 0.0])


def test_the_priors_are_the_maps_mean_probabilities_and_an_absent_class_weighs_nothing():
    probs = np.array([[0.9, 0.05, 0.05], [0.2, 0.7, 0.1]])
    record = ReferenceRows.of(probs, np.log(probs), np.array([0, 1]))
    assert record.absent_classes == [2]
    np.testing.assert_allclose(record.priors, [0.55, 0.375, 0.075])
    np.testing.assert_allclose(record.class_weights(np.array([0.25, 0.25, 0.5])), [0.5, 0.5, 0.0])


def test_kept_rows_are_capped_by_a_seeded_subsample(monkeypatch):
    monkeypatch.setattr(reference_module, "KEPT_ROWS", 10)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(50, 3))
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = rng.integers(0, 3, 50)
    first, again = (ReferenceRows.of(probs, logits, labels, seed=1) for _ in range(2))
    assert len(first.margins) == 10 and first.n == 50 and first.label_counts.sum() == 50
    np.testing.assert_array_equal(first.margins, again.margins)


def test_the_bundle_keeps_the_record(tmp_path):
    data = np.load(calib.sample_path("cifar10_val.npz"))
    fitted = calib.calibrator("ts").fit(data["logits"], data["labels"])
    fitted.save(str(tmp_path / "b"))
    loaded = calib.load(str(tmp_path / "b"))
    assert loaded.reference is not None and loaded.reference.n == 5000
    for score in ("accuracy", "nll", "brier"):
        assert loaded.reference.map_error(score) == fitted.reference.map_error(score)
    np.testing.assert_array_equal(loaded.predict_proba(data["logits"][:5]), fitted.predict_proba(data["logits"][:5]))


def test_a_damaged_record_is_refused_naming_the_bundle():
    record = _record()
    manifest = {"reference": {**record.to_manifest(), "kept_rows": 3}}
    with pytest.raises(InputError, match="b1: the bundle's record of its reference rows is inconsistent"):
        ReferenceRows.from_bundle(manifest, record.arrays(), "b1")
    arrays = record.arrays()
    del arrays["reference_margins"]
    with pytest.raises(InputError, match="incomplete"):
        ReferenceRows.from_bundle({"reference": record.to_manifest()}, arrays, "b1")
    assert ReferenceRows.from_bundle({}, {}, "b1") is None
