"""calib.drift.decomposition: the CORP decomposition against its identity, a plain PAV reference
and hand arithmetic; the class-wise decomposition against the multiclass Brier score and one
binary decomposition per class; every replicate against the decomposition of its resampled rows."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import needs

from calib.bootstrap import BootstrapConfig, ReplicateWeights, row_weights
from calib.core.numerics import softmax
from calib.drift.decomposition import SCORES, Classwise, OutcomeFit, top_label


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_decomposition_adds_up_and_equals_a_plain_pav_reference(seed):
    """MCB - DSC + UNC = the score to 1e-12; MCB and DSC equal those of scikit-learn's
    IsotonicRegression (its own tie handling) on the same vectors, with ties in the confidences."""
    isotonic = needs("sklearn.isotonic")
    rng = np.random.default_rng(seed)
    confidence = np.round(rng.uniform(0.2, 1.0, 4000), 2)  # ties
    correct = (rng.uniform(size=4000) < confidence**1.4).astype(float)
    reference = isotonic.IsotonicRegression(out_of_bounds="clip").fit(confidence, correct).predict(confidence)
    terms = OutcomeFit(confidence, correct).terms()
    for score in SCORES:
        t = terms[score]
        assert t.mcb - t.dsc + t.unc == pytest.approx(t.score, abs=1e-12)
        assert t.recalibrated == pytest.approx(t.unc - t.dsc, abs=1e-12)
        assert t.mcb >= -1e-15 and t.dsc >= -1e-15
    brier = terms["brier"]
    plain = np.mean((confidence - correct) ** 2) - np.mean((reference - correct) ** 2)
    assert brier.mcb == pytest.approx(plain, abs=1e-12)
    unc = np.mean((correct.mean() - correct) ** 2)
    assert brier.dsc == pytest.approx(unc - np.mean((reference - correct) ** 2), abs=1e-12)
    clipped = np.clip(reference, 1e-12, 1 - 1e-12)
    recalibrated = -np.mean(correct * np.log(clipped) + (1 - correct) * np.log1p(-clipped))
    assert terms["log_loss"].recalibrated == pytest.approx(recalibrated, abs=1e-12)


def test_the_decomposition_by_hand():
    """Four rows: c = (0.2, 0.4, 0.6, 0.8), y = (0, 1, 0, 1). PAV pools the middle two (1 > 0):
    iso = (0, 0.5, 0.5, 1). Brier: S(c) = (0.04 + 0.36 + 0.36 + 0.04) / 4 = 0.2, S(iso) = (0 + 0.25 +
    0.25 + 0) / 4 = 0.125, UNC = 0.25: MCB 0.075, DSC 0.125. Log loss: UNC = log 2, S(iso) = 2 log 2 / 4."""
    terms = OutcomeFit(np.array([0.2, 0.4, 0.6, 0.8]), np.array([0.0, 1.0, 0.0, 1.0])).terms()
    brier = terms["brier"]
    assert (brier.score, brier.mcb, brier.dsc, brier.unc) == pytest.approx((0.2, 0.075, 0.125, 0.25), abs=1e-15)
    log_loss = terms["log_loss"]
    assert (log_loss.unc, log_loss.recalibrated) == pytest.approx((np.log(2), np.log(2) / 2), abs=1e-12)


def test_the_class_wise_decomposition_is_the_multiclass_brier_score_split_per_class():
    """Its score is sum_k (p_ik - 1{y_i = k})^2 averaged, each term the sum of the binary
    decompositions of p_k against 1{y = k}, and UNC = 1 - sum_k pi_k^2 of the label shares."""
    rng = np.random.default_rng(5)
    probs = softmax(2.0 * rng.normal(size=(600, 4)))
    labels = rng.integers(0, 4, 600)
    terms = Classwise(probs, labels).terms()["brier"]
    assert terms.score == pytest.approx(np.mean(np.sum((probs - np.eye(4)[labels]) ** 2, axis=1)), abs=1e-12)
    shares = np.bincount(labels, minlength=4) / 600
    assert terms.unc == pytest.approx(1.0 - np.sum(shares**2), abs=1e-12)
    per_class = [OutcomeFit(probs[:, k], labels == k).terms(("brier",))["brier"] for k in range(4)]
    assert terms.mcb == pytest.approx(sum(t.mcb for t in per_class), abs=1e-12)
    assert terms.dsc == pytest.approx(sum(t.dsc for t in per_class), abs=1e-12)


def test_a_worse_model_on_the_same_labels_loses_class_wise_discrimination_not_uncertainty():
    """The top-label UNC a (1 - a) falls with the accuracy a; the class-wise UNC is the labels'
    alone, so the same labels keep it exactly and the lost accuracy shows as lost DSC."""
    rng = np.random.default_rng(6)
    labels = rng.integers(0, 10, 3000)
    signal = rng.normal(size=(3000, 10))
    signal[np.arange(3000), labels] += 3.0
    good, bad = softmax(signal), softmax(signal + 3.0 * rng.normal(size=signal.shape))
    good_terms, bad_terms = Classwise(good, labels).terms()["brier"], Classwise(bad, labels).terms()["brier"]
    assert good_terms.unc == bad_terms.unc
    assert bad_terms.dsc < good_terms.dsc - 0.1
    assert top_label(bad, labels).terms()["brier"].unc != top_label(good, labels).terms()["brier"].unc


@pytest.mark.parametrize("problem", ["top_label", "classwise"])
def test_each_replicate_is_the_decomposition_of_its_resampled_rows(problem):
    """Weighting the rows by a replicate's draw counts is the decomposition of the rows drawn (each
    repeated as often as it is drawn), to 1e-12."""
    rng = np.random.default_rng(7)
    probs = softmax(1.5 * rng.normal(size=(400, 3)))
    labels = rng.integers(0, 3, 400)
    build = top_label if problem == "top_label" else Classwise
    weights = row_weights(BootstrapConfig(4, 11), 400)
    drawn = build(probs, labels).replicate_terms(weights)
    for replicate, counts in enumerate(weights.matrix()):
        rows = np.repeat(np.arange(400), counts.astype(int))
        expected = build(probs[rows], labels[rows]).terms()
        for score, terms in expected.items():
            for term, value in terms.to_json().items():
                assert drawn[score][term][replicate] == pytest.approx(value, abs=1e-12)


def test_one_weighting_of_every_row_once_is_the_sample():
    weights = ReplicateWeights.once(5)
    np.testing.assert_array_equal(weights.matrix(), np.ones((1, 5)))
    assert weights.totals(np.arange(5.0)).tolist() == [10.0]
