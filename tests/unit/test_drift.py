"""calib compare (calib.drift): the verdicts on worlds whose truth is known, an accuracy collapse
among them; the typed report and its JSON; the gates through the evaluation's gates, on their
edges; the remedy's fate on the command line; groups, multi-label inputs, bad input."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from conftest import DATA

import calib
from calib.api import as_predictions
from calib.drift import ComparisonRequest, compare, comparison_steps
from calib.drift.report import ComparisonReport
from calib.evaluation.gate_parsing import parse_gate
from calib.evaluation.gates import check_gates
from calib.synth.shift import EXPECTED, WORLDS, shift_world


def _pair(world: str, seed: int, labelled: bool = True, n: int = 3000):
    d = shift_world(world, n, np.random.default_rng(seed))
    ref = as_predictions(d["ref_logits"], d["ref_labels"])
    new = as_predictions(d["new_logits"], d["new_labels"] if labelled else None)
    return ref, new, d


QUICK = ComparisonRequest(replicates=40, level=0.95)


@pytest.mark.parametrize("world", WORLDS)
def test_each_world_gets_its_verdict(world):
    for seed in range(2):
        ref, new, _ = _pair(world, seed)
        assert compare(ref, new, ComparisonRequest(seed=seed)).verdict == EXPECTED[world]


def _collapse():
    """CIFAR-100's ResNet-110 on two halves of its test set, NEW's logits drowned in noise and
    temperature-scaled (a calibrated, much weaker model): 75% accurate against about 10% (the
    public trial compared a 75% model with a 12% one)."""
    from calib.calibrators.temperature import fit_inverse_temperature

    data = np.load(DATA / "cifar100_resnet110_test.npz")
    logits, labels = data["logits"].astype(np.float64), data["labels"]
    order = np.random.default_rng(0).permutation(len(labels))
    ref, new = order[:5000], order[5000:]
    weaker = logits[new] + np.random.default_rng(1).normal(0.0, 7.0, logits[new].shape)
    weaker *= fit_inverse_temperature(weaker, labels[new])
    return (logits[ref], labels[ref]), (weaker, labels[new])


def test_an_accuracy_collapse_is_a_performance_loss_with_the_accuracy_shown(run, tmp_path):
    """The top-label Brier score falls with the accuracy (its UNC a (1 - a) shrinks), so the old
    verdict read "none"; the accuracy at NEW's class shares and the class-wise decomposition do not."""
    (ref_logits, ref_labels), (new_logits, new_labels) = _collapse()
    report = compare((ref_logits, ref_labels), (new_logits, new_labels))
    whole = report.whole
    assert report.verdict == "performance loss" and whole.findings[0].test == "performance"
    assert whole.metrics["accuracy"].ref > 0.7 and whole.metrics["accuracy"].new < 0.15
    assert whole.decomposition["top_label"]["brier"]["score"].value < 0  # the old verdict's blind spot
    classwise = whole.decomposition["classwise"]["brier"]
    assert classwise["dsc"].ci[1] < -0.5 and abs(classwise["unc"].value) < 1e-12
    np.savez(tmp_path / "ref.npz", logits=ref_logits, labels=ref_labels)
    np.savez(tmp_path / "new.npz", logits=new_logits, labels=new_labels)
    code, out, err = run("compare", tmp_path / "ref.npz", tmp_path / "new.npz", "--format", "text")
    assert code == 0, err
    assert "verdict: performance loss" in out and "evidence: accuracy at NEW's class shares" in out
    assert any(line.startswith("accuracy ") for line in out.splitlines())  # the first table's first row


def test_the_report_reads_back_from_its_json_and_renders_the_same():
    from calib.reporting.text import comparison_lines

    (ref, new), groups = _two_sites(2)
    report = compare(ref, new, ComparisonRequest(gates=("max_group:accuracy_decrease>0.1",)), groups=(groups, groups))
    document = json.loads(json.dumps(report.to_json()))
    again = ComparisonReport.from_json(document)
    assert again.to_json() == document
    assert comparison_lines(again) == comparison_lines(report)


def test_the_same_rows_pair_their_replicates_and_other_rows_draw_independent_ones():
    data = np.load(DATA / "cifar10_resnet110_test.npz")
    logits, labels = data["logits"], data["labels"]
    paired = compare((logits[:3000], labels[:3000]), (1.2 * logits[:3000], labels[:3000]), QUICK)
    unpaired = compare((logits[:3000], labels[:3000]), (1.2 * logits[3000:6000], labels[3000:6000]), QUICK)
    assert paired.settings["paired"] and not unpaired.settings["paired"]
    # the accuracy of the same rows under logits x 1.2 is the same row for row: every replicate's change is 0
    assert paired.whole.replicates["accuracy"] == [0.0] * 40
    width = np.diff(paired.whole.metrics["brier"].ci)[0], np.diff(unpaired.whole.metrics["brier"].ci)[0]
    assert width[0] < width[1] / 3


def test_without_labels_only_label_shift_is_told_and_only_its_gate_reads(run, tmp_path):
    ref, new, d = _pair("label shift", 5, labelled=False)
    report = compare(ref, new, QUICK)
    assert report.verdict == "label shift" and not report.whole.labelled and "only label shift can be told" in report.note
    assert report.whole.metrics == {} and report.whole.decomposition == {}
    with pytest.raises(ValueError, match="gate on accuracy_decrease: NEW has no labels"):
        compare(ref, new, ComparisonRequest(gates=("accuracy_decrease>0.01",)))
    gated = compare(ref, new, ComparisonRequest(replicates=40, level=0.95, gates=("prior_shift>0.05",)))
    assert gated.gates[0].outcome == "fail" and not gated.passed
    np.savez(tmp_path / "ref.npz", logits=d["ref_logits"], labels=d["ref_labels"])
    np.savez(tmp_path / "new.npz", logits=d["new_logits"])
    code, _, err = run("compare", tmp_path / "ref.npz", tmp_path / "new.npz", "--fail-if", "accuracy_decrease>0.01")
    assert code == 2 and "NEW has no labels" in err and len(err.strip().splitlines()) == 1, err


def test_an_unlabelled_comparison_of_100_classes_is_quick_and_reports_progress():
    """Two 5,000 x 100 batches (CIFAR-100's halves) without labels on NEW: well under 30 s (about 3 s
    on 2 cores), one progress call per step."""
    data = np.load(DATA / "cifar100_resnet110_test.npz")
    logits, labels = data["logits"], data["labels"]
    steps = []
    new = as_predictions(logits[5000:])
    started = time.perf_counter()
    report = compare((logits[:5000], labels[:5000]), new, progress=steps.append)
    assert time.perf_counter() - started < 30.0 and report.verdict == "none"
    assert len(steps) == comparison_steps(new) == 2


def _gate(report, expr: str):
    results, _ = check_gates(report.gate_view(report_keys()), [parse_gate(expr, report_keys())])
    return results[0]


def report_keys():
    return ComparisonRequest().keys


def test_gates_read_the_changes_intervals_on_their_edges():
    """accuracy_decrease's interval is the accuracy change's, negated: a gate whose threshold is
    exactly its lower end does not fail (the end must lie above it), a hair below does; one exactly
    on the upper end passes (the end must not lie above it)."""
    ref, new, _ = _pair("worse model (-5 points)", 3)
    report = compare(ref, new)
    lo, hi = (-end for end in reversed(report.whole.metrics["accuracy"].ci))
    assert _gate(report, f"accuracy_decrease>{lo!r}").outcome == "inconclusive"
    assert _gate(report, f"accuracy_decrease>{float(np.nextafter(lo, -1))!r}").outcome == "fail"
    assert _gate(report, f"accuracy_decrease>{hi!r}").outcome == "pass"
    assert _gate(report, f"accuracy_decrease>{float(np.nextafter(hi, -1))!r}").outcome == "inconclusive"
    entry = _gate(report, "accuracy_decrease>0.01").fields
    assert entry["value"] == pytest.approx(-report.whole.metrics["accuracy"].value, abs=0)
    assert entry["bounds"] == pytest.approx([lo, hi], abs=1e-15)


def test_every_verdicts_evidence_has_a_gate_key():
    from calib.drift.verdict import DISCRIMINATION

    keys = {path for path, _ in report_keys().values()}
    assert {"class_accuracy", "prior_shift", DISCRIMINATION, "top_label.log_loss.mcb", "top_label.brier.mcb"} <= keys
    with pytest.raises(ValueError, match="unknown key 'ece'; the keys are accuracy_decrease"):
        ComparisonRequest(gates=("ece>0.1",))
    assert ComparisonRequest(gates=("top5_accuracy_decrease>0.01",)).top_k == (5,)


def _two_sites(seed: int):
    from calib.evaluation.groups import groups_from_values

    rng = np.random.default_rng(seed)
    same, decayed = shift_world("none", 3000, rng), shift_world("calibration decay", 3000, rng)
    sites = np.array(["a"] * 3000 + ["b"] * 3000 + ["c"] * 99)
    batches = []
    for side in ("ref", "new"):
        logits = np.vstack([same[f"{side}_logits"], decayed[f"{side}_logits"], same[f"{side}_logits"][:99]])
        labels = np.r_[same[f"{side}_labels"], decayed[f"{side}_labels"], same[f"{side}_labels"][:99]]
        batches.append(as_predictions(logits, labels))
    return batches, groups_from_values(sites, len(sites), "site")


def test_per_group_verdicts_and_gates_on_the_worst_group():
    (ref, new), groups = _two_sites(22)
    gates = (
        "max_group:log_loss_miscalibration_increase>0.001",
        "max_group:log_loss_miscalibration_increase>0.5",
        "log_loss_miscalibration_increase>0.5",
    )
    report = compare(ref, new, ComparisonRequest(gates=gates), groups=(groups, groups))
    found = report.groups
    assert {name: section.verdict for name, section in found.sections.items()} == {"a": "none", "b": "calibration decay"}
    assert found.level == pytest.approx(1 - 0.01 / 2, abs=1e-15)  # two groups compared
    assert found.skipped == {"c": "99 rows in REF and 99 in NEW; each needs 100"}  # one short of the edge
    failing, passing, whole = report.gates
    assert failing.outcome == "fail" and failing.fields["group"] == "b" and len(failing.fields["per_group"]) == 2
    assert passing.outcome == "pass" and whole.outcome == "pass" and not report.passed
    assert "Bonferroni over 2 groups" in failing.fields["noise"]


def test_a_multi_label_comparison_takes_each_label_as_a_group():
    rng = np.random.default_rng(25)

    def tags(stretch=1.0):
        z = rng.normal(0, 2, (3000, 5))
        y = (rng.uniform(size=(3000, 5)) < 1 / (1 + np.exp(-z))).astype(int)
        z[:, 2] *= stretch
        return z, y

    ref, new = tags(), tags(stretch=2.0)
    report = compare(as_predictions(*ref), as_predictions(*new))
    verdicts = {name: section.verdict for name, section in report.groups.sections.items()}
    assert verdicts == {"0": "none", "1": "none", "2": "calibration decay", "3": "none", "4": "none"}
    assert report.groups.of_labels and "resamples them by row" in report.note
    with pytest.raises(ValueError, match="grouped by its labels"):
        compare(as_predictions(*ref), as_predictions(*new), groups=(None, None))


@pytest.mark.parametrize(
    "settings, ok",
    [
        ({"replicates": 199, "level": 0.99}, False),  # 2 / (1 - level) = 200: one replicate beyond each end
        ({"replicates": 200, "level": 0.99}, True),
        ({"replicates": 39, "level": 0.95}, False),
        ({"replicates": 40, "level": 0.95}, True),
        ({"replicates": 4, "level": 0.5}, True),  # the one level rule of every request: [0.5, 1)
        ({"level": 1.0}, False),
        ({"level": 0.4999}, False),
    ],
)
def test_the_settings_on_their_edges(settings, ok):
    if ok:
        assert ComparisonRequest(**settings).replicates == settings.get("replicates", 200)
    else:
        with pytest.raises(ValueError):
            ComparisonRequest(**settings)


@pytest.mark.parametrize("rows, refused", [(99, True), (100, False)])
def test_the_fewest_rows_on_the_edge(rows, refused):
    _, _, d = _pair("none", 14, n=200)
    ref = as_predictions(d["ref_logits"][:rows], d["ref_labels"][:rows])
    new = as_predictions(d["new_logits"], d["new_labels"])
    if refused:
        for pair in ((ref, new), (new, ref)):
            with pytest.raises(ValueError, match="needs at least 100"):
                compare(*pair, QUICK)
    else:
        assert compare(ref, new, QUICK).whole.ref_n == 100


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda d: (d["ref_logits"][:, :5], d["ref_labels"] % 5, d["new_logits"], d["new_labels"]), "has 5 classes and"),
        (
            lambda d: (d["ref_logits"], np.zeros_like(d["ref_labels"]), d["new_logits"], np.ones_like(d["new_labels"])),
            "share no class",
        ),
        (lambda d: (d["ref_logits"][:50], d["ref_labels"][:50], d["new_logits"], d["new_labels"]), "needs at least 100"),
    ],
)
def test_bad_input_is_one_line_exit_2(run, tmp_path, make, says):
    _, _, d = _pair("none", 11, n=500)
    ref_logits, ref_labels, new_logits, new_labels = make(d)
    np.savez(tmp_path / "ref.npz", logits=ref_logits, labels=ref_labels)
    np.savez(tmp_path / "new.npz", logits=new_logits, labels=new_labels)
    code, _, err = run("compare", tmp_path / "ref.npz", tmp_path / "new.npz", "--bootstrap", "40", "--level", "0.95")
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_the_remedys_fate_on_the_command_line(run, tmp_path):
    """A performance loss writes no bundle, says why in one line, and still writes the report and
    its JSON (exit 0); a decay writes the recalibration, its evidence named."""
    ref, new, d = _pair("new concept", 9)
    np.savez(tmp_path / "ref.npz", logits=d["ref_logits"], labels=d["ref_labels"])
    np.savez(tmp_path / "new.npz", logits=d["new_logits"], labels=d["new_labels"])
    code, out, err = run(
        "compare", tmp_path / "ref.npz", tmp_path / "new.npz", "--fit-remedy", tmp_path / "fix", "--json", tmp_path / "r.json"
    )
    assert code == 0, err
    written = json.loads((tmp_path / "r.json").read_text())
    assert written["verdict"] == "performance loss" and written["remedy_written"]["path"] is None
    assert not (tmp_path / "fix").exists() and "no remedy written: no post-hoc map restores lost accuracy" in out
    _, _, d = _pair("calibration decay", 10)
    np.savez(tmp_path / "new.npz", logits=d["new_logits"], labels=d["new_labels"])
    code, out, err = run(
        "compare",
        tmp_path / "ref.npz",
        tmp_path / "new.npz",
        "--fit-remedy",
        tmp_path / "fix",
        "--fail-if",
        "log_loss_miscalibration_increase>0.001",
    )
    assert code == 1 and "gate FAIL: log_loss_miscalibration_increase" in out and "gate failed" in err
    assert "wrote the recalibration (ts, fitted on NEW): NEW's held-out log loss" in out
    assert calib.load(str(tmp_path / "fix")).method == "ts"


def test_the_verdict_is_on_stdout_with_the_table(run, tmp_path):
    _, _, d = _pair("label shift", 12)
    np.savez(tmp_path / "ref.npz", logits=d["ref_logits"], labels=d["ref_labels"])
    np.savez(tmp_path / "new.npz", logits=d["new_logits"], labels=d["new_labels"])
    code, out, err = run("compare", tmp_path / "ref.npz", tmp_path / "new.npz", "--top-k", "3")
    assert code == 0, err
    assert "verdict: label shift (remedy: prior correction)" in out and "evidence: class shares of the labels" in out
    assert "top-3 accuracy" in out and "verdict" not in err


def test_the_html_page_holds_the_verdict_the_tables_and_the_groups(run, tmp_path):
    from html.parser import HTMLParser

    import pyarrow as pa
    import pyarrow.parquet as pq

    (ref, new), groups = _two_sites(24)
    sites = [groups.names[c] for c in groups.codes]
    for name, preds in (("ref", ref), ("new", new)):
        pq.write_table(
            pa.table({"logits": list(preds.all_logits()), "label": preds.labels, "site": sites}), tmp_path / f"{name}.parquet"
        )
    code, out, err = run(
        "compare",
        tmp_path / "ref.parquet",
        tmp_path / "new.parquet",
        "--group-by",
        "site",
        "--html",
        tmp_path / "c.html",
        "--json",
        "-",
    )
    assert code == 0, err
    page, report = (tmp_path / "c.html").read_text(), json.loads(out)
    assert f"verdict: {report['verdict']}" in page and page.count("<table") == 4  # changes, decompositions, priors, groups
    for section in ("verdict", "changes", "decompositions", "priors", "groups"):
        assert f'id="{section}"' in page
    assert "site c not compared: 99 rows in REF and 99 in NEW" in page

    class Balance(HTMLParser):
        open_tags: list = []

        def handle_starttag(self, tag, attrs):
            if tag not in ("meta", "br", "wbr"):
                self.open_tags.append(tag)

        def handle_endtag(self, tag):
            assert self.open_tags.pop() == tag

    checker = Balance()
    checker.open_tags = []
    checker.feed(page)
    assert checker.open_tags == []


def test_the_gates_reach_junit_and_the_github_step_summary_as_evaluates_do(run, tmp_path, monkeypatch):
    import xml.etree.ElementTree as ET

    _, _, d = _pair("worse model (-20 points)", 15)
    np.savez(tmp_path / "ref.npz", logits=d["ref_logits"], labels=d["ref_labels"])
    np.savez(tmp_path / "new.npz", logits=d["new_logits"], labels=d["new_labels"])
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, err = run(
        "compare",
        tmp_path / "ref.npz",
        tmp_path / "new.npz",
        "--fail-if",
        "class_accuracy_decrease>0.05",
        "--fail-if",
        "prior_shift>0.5",
        "--junit",
        tmp_path / "gates.xml",
    )
    assert code == 1, err
    suite = ET.parse(tmp_path / "gates.xml").getroot().find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    written = summary.read_text()
    assert "verdict: performance loss" in written and "| accuracy |" in written
