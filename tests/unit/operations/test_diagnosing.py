"""Diagnosing a source (calib.operations.diagnosing)."""

import pytest

import calib
from calib.errors import CalibError
from calib.operations import EvaluationRequest, Source, plan_diagnosis


def test_the_report_directory_is_refused_before_any_row_is_read(tmp_path):
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "old.txt").write_text("x")
    with pytest.raises(CalibError, match="report"):
        plan_diagnosis(Source(str(tmp_path / "absent.npz")), out=str(tmp_path / "report"))


def test_a_diagnosis_counts_its_boosted_fits_before_the_work():
    source = Source(calib.sample_path("cifar10_test.npz"))
    assert plan_diagnosis(source, EvaluationRequest.of(vece=False, bootstrap=0)).fits == 0
    plan = plan_diagnosis(source, compare=["ts"], folds=2)
    assert plan.fits > 0 and plan.request.vece  # calib.diagnose's default request has V-ECE
    result = plan_diagnosis(source, EvaluationRequest.of(vece=False, bootstrap=0), compare=["ts"], folds=2).run()
    assert result.n == 10000 and result.report.values["accuracy"] == pytest.approx(0.9452, abs=1e-4)
