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


def test_shifted_residuals_read_the_adapted_probabilities_by_hand():
    """Under priors pi' = (0.2, 0.8) (the map's priors pi: its mean probabilities (0.45, 0.55)),
    each row's q = p pi'/pi normalised; the accuracy residual 1{y = c} - q_c with c the argmax of
    p; rows of class y weighted pi'_y / (label share of y); the variance over the effective size."""
    record = _record()
    old, new = record.mean_probs / record.mean_probs.sum(), np.array([0.2, 0.8])
    probs = np.array([[0.8, 0.2], [0.6, 0.4], [0.3, 0.7], [0.1, 0.9]])
    labels = np.array([0, 1, 1, 1])
    residuals, weights = [], []
    for p, y in zip(probs, labels):
        q = p * new / old
        q = q / q.sum()
        c = int(np.argmax(p))
        residuals.append(float(c == y) - q[c])
        weights.append(new[y] / [0.25, 0.75][y])
    r, w = np.array(residuals), np.array(weights)
    mean = (w @ r) / w.sum()
    variance = ((w @ (r * r)) / w.sum() - mean**2) / (w.sum() ** 2 / (w @ w))
    found = record.shifted_map_error(new)["accuracy"]
    assert found[0] == pytest.approx(mean, abs=1e-7) and found[1] == pytest.approx(variance, abs=1e-7)  # float32 probabilities
    biases = record.shifted_map_biases(np.array([new, old]))
    assert biases["accuracy"][0] == pytest.approx(mean, abs=1e-7)


def test_under_the_maps_own_priors_the_shifted_residuals_are_the_plain_ones():
    """pi' = pi: q = p, so the residuals are the plain ones, under the same class weights."""
    record = _record()
    shifted = record.shifted_map_error(record.priors)
    for score in ("accuracy", "nll", "brier"):
        plain = record.map_error(score, record.class_weights(record.priors))
        assert shifted[score] == pytest.approx(plain, abs=1e-7)


def test_a_record_without_probabilities_falls_back_to_reweighted_residuals():
    """A bundle of an earlier version keeps no probabilities: the shifted error is the reweighted
    plain residuals' (what those versions computed), and the record still loads."""
    record = _record()
    older = ReferenceRows(
        *(
            getattr(record, f)
            for f in ("n", "label_counts", "mean_probs", "residual_sums", "residual_squares", "margins", "labels")
        )
    )
    new = np.array([0.2, 0.8])
    assert older.shifted_map_error(new)["nll"] == older.map_error("nll", older.class_weights(new))
    manifest = {"reference": {**older.to_manifest()}}
    assert "reference_probs" not in manifest["reference"]["arrays"]
    loaded = ReferenceRows.from_bundle(manifest, older.arrays(), "old")
    assert loaded is not None and loaded.probs is None
    again = ReferenceRows.from_bundle({"reference": record.to_manifest()}, record.arrays(), "new")
    np.testing.assert_array_equal(again.probs, record.probs)


def test_the_kept_probabilities_are_capped_by_cells(monkeypatch):
    monkeypatch.setattr(reference_module, "PROB_CELLS", 30)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(50, 3))
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    record = ReferenceRows.of(probs, logits, rng.integers(0, 3, 50))
    assert record.probs.shape == (10, 3) and record.probs.dtype == np.float32 and len(record.labels) == 50
