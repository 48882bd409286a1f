"""calib.drift.remedies: each remedy undoes its world's change on rows it was not fitted on, is
written only where its held-out evidence says so, and the unlabelled prior correction is a new
calibrator composed of the fitted one and the correction, neither edited."""

from __future__ import annotations

import numpy as np
import pytest

import calib
from calib.api import as_predictions
from calib.core.numerics import log_softmax
from calib.drift import compare, remedy
from calib.drift.remedies import halves
from calib.synth.shift import shift_world


def _pair(world: str, seed: int, labelled: bool = True, n: int = 3000):
    d = shift_world(world, n, np.random.default_rng(seed))
    return (
        as_predictions(d["ref_logits"], d["ref_labels"]),
        as_predictions(d["new_logits"], d["new_labels"] if labelled else None),
        d,
    )


def test_the_halves_are_disjoint_and_cover_every_row():
    fit, held = halves(1001, 3)
    assert len(fit) == 500 and len(held) == 501 and not np.intersect1d(fit, held).size
    np.testing.assert_array_equal(np.sort(np.r_[fit, held]), np.arange(1001))
    np.testing.assert_array_equal(halves(1001, 3)[0], fit)  # the same seed, the same halves


@pytest.mark.parametrize(
    "world, labelled, method",
    [("label shift", True, "prior-shift"), ("label shift", False, "bcts"), ("calibration decay", True, "ts")],
)
def test_the_remedy_undoes_what_was_found(world, labelled, method):
    ref, new, d = _pair(world, 7, labelled)
    report = compare(ref, new)
    fixed, sentence = remedy(ref, new, report)
    assert fixed.method == method and report.whole.remedies[report.remedy].improves
    before = calib.evaluate(d["new_logits"], d["new_labels"], metrics=["nll"]).values["nll"]
    after = calib.evaluate(fixed.predict_proba(d["new_logits"]), d["new_labels"], metrics=["nll"], kind="probs").values["nll"]
    assert after < before - 0.01 and "held-out" in sentence


def test_the_unlabelled_correction_composes_a_new_calibrator_and_edits_none():
    """softmax(z / T + b + w): bcts's temperature and biases plus the EM correction's weights."""
    from calib.calibrators.bias_corrected import BiasCorrectedTemperatureScaling, PriorShift

    ref, new, d = _pair("label shift", 8, labelled=False)
    report = compare(ref, new)
    fixed, _ = remedy(ref, new, report)
    reference = BiasCorrectedTemperatureScaling().fit(ref.all_logits(), ref.labels)
    shift = PriorShift.from_priors(np.array(report.whole.priors["ref"]), np.array(report.whole.priors["new"]))
    expected = log_softmax(d["new_logits"] / reference.temperature_ + reference.bias_ + shift.log_weights_)
    np.testing.assert_allclose(fixed.predict_log_proba(d["new_logits"]), expected, rtol=0, atol=1e-9)
    bias = reference.bias_.copy()
    composed = reference.followed_by(shift)
    assert composed is not reference and np.array_equal(reference.bias_, bias)
    assert fixed.fitted_on["prior correction from"] == new.name


@pytest.mark.parametrize(
    "world, says",
    [
        ("none", "no remedy written: nothing moved beyond noise"),
        ("new concept", "no remedy written: no post-hoc map restores lost accuracy: retrain the model"),
        ("better model (+5 points)", "no remedy written: NEW performs better: nothing to undo"),
    ],
)
def test_no_remedy_where_nothing_undoes_the_change(world, says):
    ref, new, _ = _pair(world, 13)
    fixed, sentence = remedy(ref, new, compare(ref, new))
    assert fixed is None and sentence.startswith(says)


def test_a_remedy_that_would_not_help_on_held_out_rows_is_not_written():
    """A label-shift verdict whose prior correction raises NEW's held-out log loss: the evidence
    decides, and the sentence gives it."""
    from dataclasses import replace

    ref, new, _ = _pair("label shift", 14)
    report = compare(ref, new)
    evidence = report.whole.remedies["prior correction"]
    worse = replace(evidence, after={**evidence.after, "nll": evidence.before["nll"] + 0.01}, improves=False)
    report.whole = replace(report.whole, remedies={**report.whole.remedies, "prior correction": worse})
    fixed, sentence = remedy(ref, new, report)
    assert fixed is None and sentence.startswith("no remedy written: the prior correction would not improve NEW")
