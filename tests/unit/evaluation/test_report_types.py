"""calib.evaluation.report_types: the typed report's sections read and written as the JSON report
holds them, and what the gates read of them (floors, gated groups, a group's replicates)."""

import json
import time

import numpy as np
import pytest
from conftest import SAMPLE

import calib
from calib.evaluation.report_types import BootstrapSection, EvaluationReport, GateResult, GroupSection

FLOORS = {
    "values": {"ece": 0.05},
    "means": {"ece": 0.02},
    "gaps": {"ece": 0.01},
    "by_group": {"ece": {"groups": 3, "values": {"a": 0.2}, "means": {"a": 0.1}, "gaps": {"a": 0.04}}},
}


def test_a_bootstrap_section_reads_its_floors_of_all_rows_and_of_each_group():
    section = BootstrapSection.from_json({"level": 0.9, "values": {}, "floors": FLOORS})
    assert (section.floor("ece"), section.mean_noise("ece"), section.gap_bound("ece")) == (0.05, 0.02, 0.01)
    assert (section.floor("ece", "a"), section.mean_noise("ece", "a"), section.gap_bound("ece", "a")) == (0.2, 0.1, 0.04)
    assert section.floor_groups("ece") == 3 and section.floor_groups("cmce") == 1
    assert section.floor("cmce") is None and section.floor("ece", "b") is None and section.gap_bound("cmce", "a") is None
    bare = BootstrapSection.from_json({"values": {}})
    assert bare.floor("ece") is None and bare.mean_noise("ece", "a") is None and bare.level == 0.95


def test_a_groups_replicates_replace_the_whole_samples():
    section = BootstrapSection.from_json({"values": {"ece": [1.0]}, "by_group": {"a": {"ece": [2.0, 3.0]}}})
    assert section.of_group("a").values == {"ece": [2.0, 3.0]} and section.of_group("b").values == {}
    assert BootstrapSection.from_json(None) is None and BootstrapSection.from_json({}) is None


def test_gated_groups_have_at_least_the_minimum_rows_exactly():
    section = GroupSection.from_json(
        {"a": {"n": 99, "metrics": {}}, "b": {"n": 100, "metrics": {}}}, {"source": "labels", "min_rows": 100}, of_labels=True
    )
    assert list(section.gated) == ["b"] and section.below_min_rows == ["a"] and section.unit == "label"
    assert GroupSection.from_json({}, {"source": "region"}).unit == "group"


def test_groups_are_labels_when_the_input_is_multi_label_whatever_their_source_is_called():
    """A column of class labels called "labels" groups rows of classes: its groups are groups; a
    multi-label input's groups are its labels (its input section says so)."""
    groups = {"groups": {"0": {"n": 5, "metrics": {}}}, "group_by": {"source": "labels", "min_rows": 1}}
    rows = EvaluationReport.from_json({"metrics": {}, "input": {"n": 5, "k": 3}, **groups})
    pairs = EvaluationReport.from_json(
        {"metrics": {}, "input": {"n": 5, "k": 2, "multilabel": {"rows": 5, "labels": 1}}, **groups}
    )
    assert (rows.groups.unit, pairs.groups.unit) == ("group", "label")


def test_a_legacy_gate_entry_reads_its_outcome_from_passed():
    """A report written before gates had three outcomes holds only ``passed``."""
    assert GateResult.from_json({"expr": "cmce>1", "passed": False}).outcome == "fail"
    assert GateResult.from_json({"expr": "cmce>1", "passed": True}).fields["outcome"] == "pass"
    assert GateResult.from_json({"expr": "cmce>1", "metric": "cmce", "outcome": "inconclusive", "passed": True}).outcome == (
        "inconclusive"
    )


def test_a_report_round_trips_through_its_json_byte_for_byte(tmp_path):
    """A computed report with replicates, floors, groups and gates, written and read back, writes
    the same JSON: the baseline a change gate reads is the report that was written."""
    data = np.load(SAMPLE / "cifar10_test.npz")
    groups = np.arange(600) % 3
    found = calib.evaluate(
        data["logits"][:600],
        data["labels"][:600],
        groups=groups,
        request=calib.EvaluationRequest.of(metrics=["ece", "accuracy"], gates=["max_group:ece>0.5"]),
    ).entries
    document = found.to_json()
    assert "floors" in document["bootstrap"] and document["gates"] and document["groups"]
    again = EvaluationReport.from_json(json.loads(json.dumps(document)))
    assert json.dumps(again.to_json()) == json.dumps(document)
    assert again.bootstrap.floor("ece") == pytest.approx(found.bootstrap.floor("ece"))


def test_a_reports_sections_are_immutable():
    """A baseline report is read once and shared by every change gate: no gate can change it."""
    from dataclasses import FrozenInstanceError, fields

    from calib.evaluation.report_types import GroupEntry, InputSection, MetricEntry

    sections = [
        MetricEntry(0.1, {}),
        InputSection("p", "logits", 10, 2),
        BootstrapSection.from_json({"values": {}}),
        GroupEntry(10, {}),
        GroupSection({}, "g", 0, {}),
        GateResult.from_json({"expr": "ece>1", "passed": True}),
    ]
    for section in sections:
        with pytest.raises(FrozenInstanceError):
            setattr(section, fields(section)[0].name, None)


def test_the_floors_are_drawn_once_when_read_and_at_once_where_they_will_be(monkeypatch):
    """A report with replicates holds its resolution floors deferred: a table that reads none draws
    none, the first read draws them once; with gates or a report kept as a baseline they are drawn
    at once, beside the replicates. Either way the same floors."""
    import calib
    from calib.evaluation import report as report_module

    drawn = []
    original = report_module._floors
    monkeypatch.setattr(report_module, "_floors", lambda *args: drawn.append(1) or original(*args))
    rng = np.random.default_rng(3)
    logits, labels = rng.normal(size=(400, 5)) * 2, rng.integers(0, 5, 400)
    table = calib.evaluate(logits, labels, request=calib.EvaluationRequest.of(metrics=["ece", "cmce"], bootstrap=50))
    assert drawn == []
    floors = table.to_dict()["bootstrap"]["floors"]
    table.to_dict()
    assert drawn == [1] and set(floors["values"]) == {"ece", "cmce"}
    for settings in ({"keep_as_baseline": True}, {"gates": ["ece>0.5"]}):
        drawn.clear()
        kept = calib.evaluate(
            logits, labels, request=calib.EvaluationRequest.of(metrics=["ece", "cmce"], bootstrap=50, **settings)
        )
        waited = 0.0
        while not drawn and waited < 10:  # started at once, on a thread of its own, before any read
            time.sleep(0.01)
            waited += 0.01
        assert drawn == [1]
        assert kept.to_dict()["bootstrap"]["floors"] == floors and drawn == [1]


def test_a_report_of_other_cluster_draws_does_not_pair():
    """Reports pair only when their clusters were drawn alike: an earlier calib's report (no
    "draw") has the same rows, seed and count but other clusters, so its replicates are no pairs."""
    from calib.bootstrap import CLUSTER_DRAW
    from calib.evaluation.report_types import paired_differences

    section = BootstrapSection(3, 0, 0.95, 10, 200, "ab", [], {"ece": [0.1, 0.2, 0.3]}, draw=CLUSTER_DRAW)
    same, reason = paired_differences(section, section, "ece")
    assert reason is None and same.tolist() == [0.0, 0.0, 0.0]
    older = BootstrapSection.from_json({**section.to_json(), "draw": None})
    assert paired_differences(section, older, "ece")[0] is None
    assert BootstrapSection.from_json(section.to_json()).draw == CLUSTER_DRAW
