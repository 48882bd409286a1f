"""Top-label calibration (Gupta & Ramdas 2022): ``tl_ece`` and ``tl-hb`` on their own CIFAR-10
ResNet-50 example (example_cifar10.ipynb of github:AIgen/df-posthoc-calibration, whose logits are
tests/data/cifar10_resnet50.npz), and the rules by hand."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DATA

import calib
from calib.calibrators.top_label import share_the_rest
from calib.core.binning import uniform_mass_upper_edges, upper_edge_bins
from calib.core.numerics import softmax
from calib.metrics.conventions import top_label_ece

#: Their toplabel_ece (assessment.py) of the base model and of its temperature-scaled test set, run
#: on these arrays with their code (numpy 2.4): the 0.024 and 0.022 their notebook prints.
THEIR_BASE, THEIR_TEMPERATURE = 0.023733365213212107, 0.022304031644799764
#: Their toplabel_ece of their HB_toplabel(points_per_bin=50)'s test probabilities over 50 seeds of
#: their 1e-10 nudge: the 0.015 their notebook prints, its seed spread [min, max].
THEIR_HB = (0.015149825874007102, 0.015149825889589545)


def _data():
    return np.load(DATA / "cifar10_resnet50.npz")


def test_tl_ece_is_their_toplabel_ece():
    data = _data()
    base = calib.evaluate(data["test_logits"], data["test_labels"], metrics=["tl_ece"]).values["tl_ece"]
    scaled = calib.evaluate(data["test_logits_temp"], data["test_labels_temp"], metrics=["tl_ece"]).values["tl_ece"]
    assert base == pytest.approx(THEIR_BASE, abs=1e-9) and scaled == pytest.approx(THEIR_TEMPERATURE, abs=1e-9)


def test_tl_hb_reproduces_their_printed_top_label_ece():
    """Their fit nudges each bin's value by U(0, 1e-10) / (1 + 1e-10), so two bins of one class with
    the same value (1.0, say) stay two values, and toplabel_ece's one-bin-per-value rule (a discrete
    output) scores them apart. Our bins' values, nudged as theirs are, land inside their seed
    spread. On the exact values (bins of one value scored together) the top-label ECE is 0.01490;
    both print as their 0.015."""
    data = _data()
    fitted = calib.calibrator("tl-hb").fit(data["val_logits"], data["val_labels"])
    probs = fitted.predict_proba(data["test_logits"])
    predicted = softmax(data["test_logits"]).argmax(axis=1)
    confidence = probs[np.arange(len(probs)), predicted]
    correct = (predicted == data["test_labels"]).astype(float)
    hb, top = fitted.fitted, softmax(data["test_logits"]).max(axis=1)
    bins = np.zeros(len(top), dtype=np.int64)  # each row's bin among all classes' bins
    for label in range(10):
        part, rows = hb._class_bins(label), predicted == label
        bins[rows] = part.start + upper_edge_bins(top[rows], hb.edges_[part])
    for seed in range(5):
        noise = np.random.default_rng(seed).uniform(0.0, 1e-10, len(hb.values_))
        nudged = (hb.values_ + noise) / (1.0 + 1e-10)
        np.testing.assert_allclose(nudged[bins], confidence, rtol=0, atol=1e-9)
        value = top_label_ece(nudged[bins], predicted.astype(float), correct, 15)
        assert THEIR_HB[0] - 1e-11 <= value <= THEIR_HB[1] + 1e-11
    exact = top_label_ece(confidence, predicted.astype(float), correct, 15)
    assert exact == pytest.approx(0.0148958775728, abs=1e-12) and round(exact, 3) == 0.015


def test_the_uniform_mass_edges_and_bins_by_hand():
    """Seven values in three bins: groups of 3, 2, 2 (array_split), upper edges 0.3 and 0.5, the
    last +inf; a value on an edge (0.3) goes to the first bin, one between (0.35) to the second."""
    values = np.array([0.7, 0.1, 0.5, 0.3, 0.2, 0.4, 0.6])
    edges = uniform_mass_upper_edges(values, 3)
    np.testing.assert_array_equal(edges, [0.3, 0.5, np.inf])
    np.testing.assert_array_equal(upper_edge_bins(np.array([0.3, 0.35, 0.5, 0.9]), edges), [0, 1, 1, 2])


def test_tl_ece_by_hand_discrete_and_binned():
    """Class 0: confidences 0.7 (right) and 0.9 (wrong): 2 distinct values > 2 / 10, so binned, in
    min(15, 2) = 2 bins of one row: |0.7 - 1| + |0.9 - 0| = 1.2. Class 1: twenty rows at 0.6, 12
    right: one value (1 <= 20 / 10), one bin: |20 (0.6) - 12| = 0. Weighted: (1.2 + 0) / 22. Two rows
    tied at 0.8 (one right) share the first of their two bins: |1.6 - 1| = 0.6."""
    confidence = np.r_[0.7, 0.9, np.full(20, 0.6)]
    predicted = np.r_[0.0, 0.0, np.ones(20)]
    correct = np.r_[1.0, 0.0, np.ones(12), np.zeros(8)]
    assert top_label_ece(confidence, predicted, correct, 15) == pytest.approx(1.2 / 22, abs=1e-15)
    tied = np.r_[0.8, 0.8, np.full(20, 0.6)]
    assert top_label_ece(tied, predicted, correct, 15) == pytest.approx(0.6 / 22, abs=1e-15)


def test_a_class_predicted_on_too_few_rows_keeps_its_confidences():
    """points_per_bin 50: a class predicted on 49 calibration rows gets no bins (a warning), on 50
    one bin whose value is its rows' accuracy."""
    rng = np.random.default_rng(1)
    logits = np.zeros((99, 3))
    logits[:49, 0], logits[49:, 1] = 2.0 + rng.random(49), 2.0 + rng.random(50)
    labels = np.r_[np.zeros(49, int), np.ones(25, int), np.full(25, 2)]
    fitted = calib.calibrator("tl-hb").fit(logits, labels)
    assert "2 classes are predicted on fewer than 50 calibration rows (0, 2)" in fitted.fitted.warnings()[0]  # 49 and 0
    probs = fitted.predict_proba(logits)
    np.testing.assert_allclose(probs[:49], softmax(logits[:49]), rtol=0, atol=1e-15)  # class 0: as it was
    np.testing.assert_allclose(probs[49:, 1], 0.5, rtol=0, atol=1e-15)  # one bin: 25 of 50 right


def test_the_other_classes_share_the_rest_capped_at_the_top():
    """p = (0.5, 0.3, 0.2) with the top recalibrated to 0.6: the rest in proportion, 0.24 and 0.16;
    to 0.35: proportion would give 0.39 > 0.35, so class 1 is capped at 0.35 and class 2 takes 0.3;
    to 0.2 < 1 / 3: even shares (no share keeps class 0 on top); a top of 1.0 shares evenly."""
    probs = np.array([[0.5, 0.3, 0.2]] * 3 + [[1.0, 0.0, 0.0]])
    out = share_the_rest(probs, np.zeros(4, int), np.array([0.6, 0.35, 0.2, 0.5]))
    np.testing.assert_allclose(
        out, [[0.6, 0.24, 0.16], [0.35, 0.35, 0.3], [0.2, 0.4, 0.4], [0.5, 0.25, 0.25]], rtol=0, atol=1e-15
    )
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=0, atol=1e-15)
