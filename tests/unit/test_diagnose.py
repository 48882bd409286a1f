"""`calib diagnose`: findings on crafted inputs, the report files, a deterministic comparison."""

import json

import numpy as np
import pytest
from conftest import SAMPLE

from calib.diagnose import diagnose
from calib.io import Predictions


def _preds(scores, labels, kind="logits"):
    return Predictions("t", np.asarray(scores, dtype=np.float64), kind, "test", np.asarray(labels), "0")


def test_findings_fire_on_crafted_inputs():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(6), 300)
    labels = rng.integers(0, 5, 300)  # class 5 never appears
    found = " | ".join(diagnose(_preds(probs, labels, "logits")).finding_texts())
    assert "probabilities passed as logits" in found
    assert "1 of 6 classes never appear" in found
    saturated = np.eye(6)[labels]
    found = " | ".join(diagnose(_preds(saturated, labels, "probs")).finding_texts())
    assert "exactly 0 or 1" in found
    found = " | ".join(diagnose(_preds(rng.normal(size=(50, 3)), rng.integers(0, 3, 50))).finding_texts())
    assert "too few to calibrate a conformal method at alpha = 0.01" in found


def test_curves_and_direction(cifar100):
    result = diagnose(_preds(cifar100["test_logits"], cifar100["test_labels"]))
    assert sum(r["count"] for r in result.reliability) == 10000
    assert sum(r["count"] for r in result.cumulative_mass) == 10000 * 100
    assert result.metrics["ece"] == pytest.approx(result.metrics["ece_over"] + result.metrics["ece_under"], abs=1e-12)
    assert any("over-confident" in line for line in result.finding_texts())  # ECE 7.9%, accuracy below confidence
    assert {f["severity"] for f in result.findings} <= {"info", "warning", "problem"}
    assert len(result.worst_classes) == 10 and result.worst_classes[0]["cw_ece"] >= result.worst_classes[-1]["cw_ece"]


def test_report_files_and_deterministic_comparison(tmp_path, run):
    from conftest import SAMPLE

    code, out, err = run(
        "diagnose", SAMPLE / "cifar10_val.npz", "--compare", "ts,isotonic", "--folds", "3", "--out", tmp_path / "r"
    )
    assert code == 0, err
    assert "recommendation" in out
    for name in ("reliability", "cumulative_mass", "over_under", "risk_coverage"):
        assert (tmp_path / "r" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"<svg" in (tmp_path / "r" / f"{name}.svg").read_bytes()[:500]
    page = (tmp_path / "r" / "report.html").read_text()
    assert page.startswith("<!doctype html>") and page.count("<svg") == 4 and "base64" not in page
    assert 'id="figure-risk_coverage"' in page
    first = json.loads((tmp_path / "r" / "report.json").read_text())
    run("diagnose", SAMPLE / "cifar10_val.npz", "--compare", "ts,isotonic", "--folds", "3", "--out", tmp_path / "again")
    assert json.loads((tmp_path / "again" / "report.json").read_text())["comparison"] == first["comparison"]
    assert {row["method"] for row in first["comparison"]} == {"uncalibrated", "ts", "isotonic"}
    code, _, err = run("diagnose", SAMPLE / "cifar10_val.npz", "--compare", "ts,nope")
    assert code == 2 and "unknown method 'nope'" in err


def test_conformal_bundle_adds_set_curves_and_the_uncalibrated_overlay(tmp_path, run):
    from conftest import SAMPLE

    code, _, err = run("fit", SAMPLE / "cifar10_val.npz", "--method", "mr", "--alpha", "0.1", "--out", tmp_path / "mr")
    assert code == 0, err
    code, _, err = run("diagnose", SAMPLE / "cifar10_test.npz", "--bundle", tmp_path / "mr", "--out", tmp_path / "r")
    assert code == 0, err
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    curve = report["conformal"]
    # two-fold split conformal keeps marginal coverage near 1 - alpha at every alpha
    for alpha, coverage in zip(curve["alphas"], curve["coverage"]):
        assert coverage == pytest.approx(1 - alpha, abs=0.02)
    assert curve["set_size"] == sorted(curve["set_size"], reverse=True)  # bigger sets for smaller alpha
    assert curve["bundle"]["alpha"] == 0.1 and 0.85 < curve["bundle"]["coverage"] < 0.95
    assert sum(r["count"] for r in report["cumulative_mass_uncalibrated"]) == 10000 * 10
    own = curve["bundle"]  # per-class coverage of the bundle's sets: 1,000 test rows per CIFAR-10 class
    assert own["class_rows"] == [1000] * 10
    assert np.mean(own["class_coverage"]) == pytest.approx(own["coverage"], abs=1e-12)
    assert any("classes below 1 - alpha = 0.9" in f["text"] for f in report["findings"])
    png = (tmp_path / "r" / "conformal_sets.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and b"conformal sets" in (tmp_path / "r" / "report.html").read_bytes()


def test_the_saturation_finding_says_what_the_tool_does_with_the_input_kind(tmp_path):
    """Probabilities of exactly 0: NLL floors them at 1e-12 (a label at p = 0 costs 27.63, as the
    finding says); logits whose softmax rounds to 0: NLL stays exact (a gap of 800 costs 800), and
    the finding does not claim a clip."""
    import calib
    from calib.diagnose import diagnose

    probs = np.array([[1.0, 0.0], [0.5, 0.5], [0.2, 0.8]])
    labels = np.array([1, 0, 1])
    finding = [
        f["text"] for f in diagnose(calib.io.predictions_from_arrays(probs, labels)).findings if "exactly 0 or 1" in f["text"]
    ][0]
    assert "log max(p, 1e-12)" in finding and "27.63" in finding
    assert calib.evaluate(probs[:1], labels[:1], metrics="nll").values["nll"] == pytest.approx(-np.log(1e-12))
    logits = np.array([[0.0, -800.0], [0.0, 0.0], [1.0, 2.0]])
    finding = [
        f["text"] for f in diagnose(calib.io.predictions_from_arrays(logits, labels)).findings if "exactly 0 or 1" in f["text"]
    ][0]
    assert "stays exact" in finding and "1e-12" not in finding
    assert calib.evaluate(logits[:1], labels[:1], metrics="nll").values["nll"] == pytest.approx(800.0)


def test_the_absent_class_finding_is_the_calibrators_own_rule():
    """Classes without labels: the finding states what a one-vs-rest calibrator fitted on these
    rows does by default, which is to keep the model's probability (not a constant 0 map)."""
    import calib
    from calib.diagnose import diagnose

    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(400, 4)), rng.integers(0, 3, 400)  # class 3 never appears
    finding = [
        f["text"] for f in diagnose(calib.io.predictions_from_arrays(logits, labels)).findings if "never appear" in f["text"]
    ][0]
    assert "kept as the model gave them" in finding and "absent=keep" in finding
    fitted = calib.calibrator("isotonic").fit(logits, labels)
    assert (fitted.predict_proba(logits)[:, 3] > 0).all()


def test_a_multi_label_set_shortfall_is_read_against_the_noise_of_rows_not_pairs():
    """The bundle's joint coverage is a share of rows: it is measured against 3 standard errors of a
    difference of two shares of N rows, sqrt(2 alpha (1 - alpha) / N), not of the N L pairs. At
    N = 400, alpha = 0.1: 3 sqrt(0.18 / 400) = 0.0636, so coverage 0.85 is within the noise of
    0.9 and 0.825 is below it (against the pairs' 0.0318 both would be)."""
    from calib.api import as_predictions
    from calib.diagnose import Diagnosis, _label_set_findings

    class SetOfTheLargerLogit:
        joint_ = {"labels": 4}

        def fit_report(self):
            return {"alpha": 0.1}

        def apply(self, inputs, output):
            return np.eye(2, dtype=bool)[inputs.logits.argmax(axis=1)], {}

    y = np.random.default_rng(5).integers(0, 2, (400, 4))
    severities = []
    for missed_rows in (60, 70):
        z = np.where(y == 1, 2.0, -2.0)
        z[:missed_rows, 0] *= -1  # label 0's set misses its label in these rows
        preds = as_predictions(z, y)
        result = Diagnosis(preds.n, preds.k, preds.kind)
        _label_set_findings(result, preds, SetOfTheLargerLogit())
        assert f"in {1 - missed_rows / 400:.4g} of the rows" in result.findings[0]["text"]
        severities.append(result.findings[0]["severity"])
    assert severities == ["info", "warning"]


def test_the_cumulative_mass_table_counts_pairs_and_the_reliability_table_rows(run, tmp_path):
    """Each row gives K masses, so the cumulative-mass curve's bins count (row, k) pairs (100,000
    for 10,000 rows of 10 classes), the reliability bins rows (10,000): each column says which."""
    code, out, err = run("diagnose", SAMPLE / "cifar10_test.npz", "--no-vece", "--out", tmp_path / "d")
    assert code == 0, err
    lines = out.splitlines()
    curve = lines.index("cumulative mass calibration curve")
    assert lines[curve + 1].split()[:4] == ["bin", "(row,", "k)", "pairs"]
    reliability = next(i for i, line in enumerate(lines) if line.startswith("reliability"))
    assert lines[reliability + 1].split()[:2] == ["bin", "rows"]


def test_a_probabilities_input_is_said_to_condition_on_its_log_probabilities():
    from types import SimpleNamespace

    from calib.calibrators.set_based import conditioned_on

    assert conditioned_on(SimpleNamespace(conditioning_="logits", scores_given_="probs")).startswith("log-probabilities")
    assert conditioned_on(SimpleNamespace(conditioning_="logits", scores_given_="logits")) == "logits"
    assert conditioned_on(SimpleNamespace(conditioning_="ranked", scores_given_="probs")) == "ranked"


def test_the_risk_coverage_curve_is_the_selective_risk_of_the_most_confident_rows():
    """Its points are r_k at k = ceil(j n / 100) rows and its AURC the metric's (calib.metrics.selective)."""
    from calib.diagnose import risk_coverage
    from calib.metrics.selective import aurc

    rng = np.random.default_rng(2)
    logits, labels = rng.normal(size=(250, 4)) * 2, rng.integers(0, 4, 250)
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    curve = risk_coverage(probs.max(1), (probs.argmax(1) == labels).astype(float))
    order = np.argsort(-probs.max(1))
    wrong = (probs.argmax(1) != labels)[order]
    assert curve["aurc"] == pytest.approx(aurc(probs.max(1), probs.argmax(1) == labels), abs=1e-12)
    assert [p["coverage"] for p in curve["points"]][:3] == [3 / 250, 5 / 250, 8 / 250]  # ceil(2.5), ceil(5), ceil(7.5)
    point = curve["points"][1]
    assert point["risk"] == pytest.approx(wrong[:5].mean(), abs=1e-15)  # no ties among continuous confidences
    assert point["oracle"] == max(0.0, 5 - (250 - wrong.sum())) / 5
    assert curve["points"][-1]["coverage"] == 1.0 and curve["points"][-1]["risk"] == pytest.approx(wrong.mean(), abs=1e-15)
