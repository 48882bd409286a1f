"""The estimation of a batch with some labels, its gates (every rule's edge) and its groups."""

from __future__ import annotations

import numpy as np
import pytest

import calib
from calib.errors import InputError, UsageError
from calib.estimation.batch import Estimate
from calib.estimation.report import EstimationSettings, _combined, _gate_entry, estimate_report
from calib.evaluation.gate_parsing import parse_gate
from calib.evaluation.groups import Groups


@pytest.fixture(scope="module")
def fitted():
    val = np.load(calib.sample_path("cifar10_val.npz"))
    return calib.calibrator("ts").fit(val["logits"], val["labels"])


@pytest.fixture(scope="module")
def test_rows():
    data = np.load(calib.sample_path("cifar10_test.npz"))
    return data["logits"][:3000].astype(np.float64), data["labels"][:3000]


def test_combined_estimate_by_hand():
    estimate = Estimate(0.9, 0.88, 0.92, 0.01, {"batch": 1e-4})
    found = _combined(estimate, 0.8, 100, 300)
    # (100 x 0.8 + 300 x 0.9) / 400 = 0.875; the ends (80 + 264) / 400 and (80 + 276) / 400; sd 0.01 x 3 / 4
    assert (found.value, found.lower, found.upper, found.sd) == pytest.approx((0.875, 0.86, 0.89, 0.0075), abs=1e-15)


@pytest.mark.parametrize(
    ("expr", "outcome"),
    [
        ("est_accuracy<0.88", "pass"),  # the lower end on the threshold: not below it
        ("est_accuracy<0.920001", "fail"),
        ("est_accuracy<0.92", "inconclusive"),  # the upper end on the threshold: not below it
        ("est_accuracy>0.92", "pass"),
        ("est_accuracy>0.88", "inconclusive"),
        ("est_accuracy>=0.88", "fail"),
    ],
)
def test_gate_edges(expr, outcome):
    estimate = Estimate(0.9, 0.88, 0.92, 0.01, {"batch": 1e-4})
    entry = _gate_entry(parse_gate(expr, {"est_accuracy": ""}), estimate, True, [], EstimationSettings(), 1000)
    assert entry["outcome"] == outcome
    assert "rows_to_settle" not in entry


def test_an_unreliable_estimate_gates_inconclusive():
    estimate = Estimate(0.9, 0.88, 0.92, 0.01, {"batch": 1e-4})
    gate = parse_gate("est_accuracy>0.95", {"est_accuracy": ""})
    entry = _gate_entry(gate, estimate, False, ["moved"], EstimationSettings(inconclusive="fail"), 1000)
    assert (entry["outcome"], entry["passed"], entry["unreliable"]) == ("inconclusive", False, ["moved"])


def test_partial_labels_count_as_realised(fitted, test_rows):
    logits, labels = test_rows
    partial = labels.copy()
    partial[1000:] = -1
    probs = fitted.predict_proba(logits)
    report = estimate_report(probs, logits, partial, fitted.reference, EstimationSettings())
    alone = estimate_report(probs[1000:], logits[1000:], None, fitted.reference, EstimationSettings())
    realised = float(np.mean(probs[:1000].argmax(axis=1) == labels[:1000]))
    expected = (1000 * realised + 2000 * alone.estimates["est_accuracy"].value) / 3000
    assert report.estimates["est_accuracy"].value == pytest.approx(expected, abs=1e-12)
    assert report.test is not None and report.test.rows == 1000
    assert report.to_json()["input"] == {"rows": 3000, "labelled": 1000, "unlabelled": 2000}


def test_group_gates(fitted, test_rows):
    logits, _ = test_rows
    probs = fitted.predict_proba(logits)
    groups = Groups(["a", "b", "tiny"], np.r_[np.zeros(1500, int), np.ones(1450, int), np.full(50, 2)], "test")
    settings = EstimationSettings(gates=("min_group:est_accuracy<0.9", "max_group:est_accuracy<0.99"))
    report = estimate_report(probs, logits, None, fitted.reference, settings, groups=groups)
    assert [g.name for g in report.groups] == ["a", "b"]  # 50 rows are under min_group_rows
    low, high = report.gates
    assert low["outcome"] == "pass" and low["groups"] == 2 and low["group"] in ("a", "b")
    assert high["outcome"] == "fail" and len(high["per_group"]) == 2
    with pytest.raises(UsageError, match="not labels"):
        estimate_report(probs, logits, None, fitted.reference, EstimationSettings(gates=("min_label:est_accuracy<0.9",)))


def test_refusals(fitted, test_rows):
    logits, labels = test_rows
    probs = fitted.predict_proba(logits)
    with pytest.raises(InputError, match="nothing is left to estimate"):
        estimate_report(probs, logits, labels, fitted.reference, EstimationSettings())
    with pytest.raises(UsageError, match="unknown key 'ece'"):
        estimate_report(probs, logits, None, fitted.reference, EstimationSettings(gates=("ece>0.1",)))


def test_the_api_takes_labels_with_minus_one(fitted, test_rows):
    logits, labels = test_rows
    partial = np.where(np.arange(3000) < 200, labels, -1)
    report = calib.estimate(logits, partial, calibrator=fitted)
    assert report.to_json()["input"]["labelled"] == 200
    with pytest.raises(InputError, match="classes"):
        calib.estimate(logits[:, :5], calibrator=fitted)
