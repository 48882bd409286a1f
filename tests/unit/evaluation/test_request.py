"""calib.evaluation.request: one request per evaluation, built by the notebook API and the command
line alike, with every policy in the library."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

import calib
from calib.errors import UsageError
from calib.evaluation.request import BootstrapSettings, EvaluationRequest, GateSettings, flat_names


def _scores(n=300, k=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, k)) * 2, rng.integers(0, k, n)


def test_the_flat_settings_are_the_request_fields_and_the_nested_ones():
    """EvaluationRequest.of's settings are exactly the request's own fields and its nested ones."""
    from dataclasses import fields

    own = {f.name for f in fields(EvaluationRequest)} - {"gates", "bootstrap", "vece_settings"}
    assert own == {"metrics", "bins", "cmce_bins", "vece", "min_group_rows", "emit_state"}
    assert flat_names() - own == {
        "gates",
        "increase_gates",
        "max_increase",
        "max_decrease",
        "baseline",
        "paired",
        "ignore_noise",
        "inconclusive",
        "bootstrap",
        "seed",
        "level",
        "keep_as_baseline",
        "first_row",
        "vece_recalibrator",
        "vece_max_rows",
        "vece_recipe",
    }


def test_every_setting_is_a_named_parameter_and_an_unknown_one_is_refused():
    """No public call hides its settings in ``**settings``: calib.evaluate takes the metrics and a
    request by name, EvaluationRequest.of every flat setting by name (so IDEs and type checkers see
    them), and a misspelt one is Python's own refusal naming it."""
    evaluate = inspect.signature(calib.evaluate).parameters
    of = inspect.signature(EvaluationRequest.of).parameters
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in (*evaluate.values(), *of.values()))
    assert {"metrics", "request"} <= set(evaluate) and set(of) == flat_names()
    scores, labels = _scores()
    with pytest.raises(TypeError, match="'bin'"):
        EvaluationRequest.of(bin=10)
    with pytest.raises(TypeError, match="'bins'"):
        calib.evaluate(scores, labels, bins=10)


def test_a_request_and_metrics_by_name_are_not_mixed():
    scores, labels = _scores()
    with pytest.raises(UsageError, match="give the metrics in the request or by name, not both"):
        calib.evaluate(scores, labels, request=EvaluationRequest(), metrics=["ece"])


def test_a_request_gives_the_report_of_the_same_settings_by_name():
    scores, labels = _scores()
    named = calib.evaluate(
        scores, labels, request=calib.EvaluationRequest.of(metrics=["ece", "nll"], bins=10, gates=["ece>0.5"], seed=3)
    ).to_dict()
    request = EvaluationRequest(
        metrics=("ece", "nll"), bins=10, gates=GateSettings(("ece>0.5",)), bootstrap=BootstrapSettings(seed=3)
    )
    assert calib.evaluate(scores, labels, request=request).to_dict() == named
    assert named["bootstrap"]["replicates"] == 200 and named["bootstrap"]["seed"] == 3  # gated: drawn by default


@pytest.mark.parametrize(
    "settings, replicates",
    [
        ({}, None),  # neither gated nor kept: no replicates
        ({"gates": ["ece>0.5"]}, 200),  # gated
        ({"keep_as_baseline": True}, 200),  # kept for later change gates (calib evaluate --json does this)
        ({"gates": ["ece>0.5"], "bootstrap": 0}, None),  # asked for none
        ({"bootstrap": 7}, 7),
    ],
)
def test_when_replicates_are_drawn(settings, replicates):
    scores, labels = _scores()
    report = calib.evaluate(scores, labels, request=calib.EvaluationRequest.of(metrics=["ece"], **settings)).to_dict()
    assert (report.get("bootstrap") or {}).get("replicates") == replicates


def test_the_command_line_json_report_is_the_api_report_kept_as_a_baseline(tmp_path, run):
    """`calib evaluate --json` records replicates for later change gates; the API asked to keep the
    report as a baseline gives the same report."""
    scores, labels = _scores(seed=5)
    np.savez(tmp_path / "s.npz", logits=scores, labels=labels)
    code, out, _ = run("evaluate", tmp_path / "s.npz", "--no-vece", "--metrics", "ece,cmce", "--json", "-")
    assert code == 0
    cli = json.loads(out)
    api = calib.evaluate(
        scores, labels, request=calib.EvaluationRequest.of(metrics=["ece", "cmce"], keep_as_baseline=True)
    ).to_dict()
    for report in (cli, api):
        report["input"] = {key: value for key, value in report["input"].items() if key not in ("path", "sha256")}
    assert cli == api


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"bins": 0}, "bins takes a positive number of bins or 'auto'; got 0"),
        ({"cmce_bins": "many"}, "cmce_bins takes a positive number of bins or 'auto'; got 'many'"),
        ({"inconclusive": "maybe"}, "inconclusive must be one of pass, fail; got 'maybe'"),
        ({"level": 0.4}, r"the confidence level must be in \[0.5, 1\); got 0.4"),
        ({"level": 1.0}, r"the confidence level must be in \[0.5, 1\); got 1.0"),
        ({"min_group_rows": 0}, "min_group_rows must be a positive count of rows; got 0"),
        ({"metrics": ["ece", "eec"]}, "eec"),
        ({"vece_recalibrator": "forest"}, "the V-ECE recalibrator must be one of"),
        ({"gates": ["ece>>0.1"]}, "ece>>0.1"),
    ],
)
def test_bad_settings_are_refused_before_any_row_is_read(settings, message):
    with pytest.raises(UsageError, match=message):
        EvaluationRequest.of(**settings)


def test_the_confidence_level_on_its_edges():
    """0.5 is the lowest level the intervals take; 1 is refused (an interval of every replicate)."""
    assert BootstrapSettings(level=0.5).level == 0.5
    assert BootstrapSettings(level=0.999).level == 0.999


def test_one_gate_as_text_is_one_gate_not_its_characters():
    assert [g.metric for g in GateSettings("ece>0.1").thresholds] == ["ece"]
    assert EvaluationRequest(metrics="ece").metrics == ("ece",)


def test_auto_bins_stay_auto_until_the_rows_are_known():
    request = EvaluationRequest(bins="auto", cmce_bins="10")
    assert request.bins == "auto" and request.cmce_bins == 10
    scores, labels = _scores(n=500)
    report = calib.evaluate(scores, labels, request=EvaluationRequest(metrics=("ece",), bins="auto")).to_dict()
    assert report["metrics"]["ece"]["settings"]["bins"] == 10  # 10^3 >= 2 x 500 > 9^3


def test_planned_work_counts_the_boosted_fits_and_says_when_the_rows_are_subsampled():
    from calib.api import as_predictions
    from calib.evaluation.report import planned_work

    scores, labels = _scores(n=400)
    preds = as_predictions(scores, labels)
    assert planned_work(preds, EvaluationRequest(metrics=("ece",))) == (0, False)
    small = EvaluationRequest.of(metrics=("vece_l1",), vece_recalibrator="ts", vece_max_rows=400)
    assert planned_work(preds, small) == (0, False)  # ts is no boosted fit; 400 rows is not above 400
    assert planned_work(preds, EvaluationRequest.of(metrics=("vece_l1",), vece_max_rows=399))[1] is True
    boosted = EvaluationRequest(metrics=("vece_l1",))
    fits, _ = planned_work(preds, boosted)
    assert fits > 0 and planned_work(preds, boosted, calibrated=True)[0] == 2 * fits


def test_one_row_is_the_smallest_group_that_may_be_gated():
    assert EvaluationRequest(min_group_rows=1).min_group_rows == 1


def test_a_paired_change_gate_and_raw_values_are_refused_together(tmp_path):
    """A paired gate reads the bootstrap's paired differences; ignore_noise compares raw values:
    the two together are refused, each alone is taken."""
    from calib.evaluation import parse_change_gates

    scores, labels = _scores()
    report = calib.evaluate(scores, labels, request=calib.EvaluationRequest.of(metrics=["ece"], keep_as_baseline=True)).to_dict()
    (tmp_path / "base.json").write_text(json.dumps(report))
    paired = parse_change_gates(["ece=0.01"], str(tmp_path / "base.json"), paired=True)
    unpaired = parse_change_gates(["ece=0.01"], str(tmp_path / "base.json"))
    with pytest.raises(UsageError, match="a paired change gate reads the bootstrap's intervals and ignore_noise the raw values"):
        GateSettings(changes=paired, ignore_noise=True)
    assert GateSettings(changes=paired).changes == tuple(paired)
    assert GateSettings(changes=unpaired, ignore_noise=True).ignore_noise
