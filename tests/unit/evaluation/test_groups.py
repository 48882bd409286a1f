"""Slice-aware evaluation: every group's metrics in one pass equal an evaluation of that group's
rows alone; gates on the worst group; groups through shards, metric states and diagnose."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import SAMPLE, data_file

import calib
from calib.evaluation.groups import MISSING, groups_from_values

TEST = SAMPLE / "cifar10_test.npz"
STREAMED = ["accuracy", "nll", "brier", "ece", "mce", "cw_ece", "cmce", "coverage_0.9_0.92", "ece_quantile", "smece"]


def _assert_groups_equal_subsets(report, scores, labels, values, calibrator=None):
    groups = groups_from_values(values, len(labels), "g")
    assert set(report.group_values) == set(groups.names)
    for code, name in enumerate(groups.names):
        rows = groups.codes == code
        alone = calib.evaluate(scores[rows], labels[rows], metrics=STREAMED, calibrator=calibrator).values
        got = report.group_values[name]
        for key in STREAMED:
            if alone[key] is None:
                assert got[key] is None, (name, key)
            else:
                assert got[key] == pytest.approx(alone[key], abs=1e-12, rel=0), (name, key)
        assert report.to_dict()["groups"][name]["n"] == int(rows.sum())


def test_group_values_equal_evaluations_of_each_subset():
    """CIFAR-100 test (real logits) by 20 groups of classes, and by a random column with a tiny group."""
    data = np.load(data_file("cifar100_resnet110_test.npz"))
    logits, labels = data["logits"], data["labels"]
    by_class_family = labels // 5
    report = calib.evaluate(logits, labels, metrics=STREAMED, groups=by_class_family)
    _assert_groups_equal_subsets(report, logits, labels, by_class_family)
    rng = np.random.default_rng(0)
    column = rng.choice(np.array(["a", "b", "c", "tiny"]), size=len(labels), p=[0.5, 0.3, 0.195, 0.005])
    report = calib.evaluate(logits, labels, metrics=STREAMED, groups=column)
    _assert_groups_equal_subsets(report, logits, labels, column)
    overall = calib.evaluate(logits, labels, metrics=STREAMED).values
    for key in STREAMED:
        assert report.values[key] == pytest.approx(overall[key], abs=1e-12, rel=0)
    summary = report.to_dict()["group_by"]
    assert summary["below_min_rows"] == ["tiny"] and "tiny" not in {w["group"] for w in summary["worst"].values()}


def test_groups_with_a_calibrator_and_probabilities():
    val, test = np.load(SAMPLE / "cifar10_val.npz"), np.load(TEST)
    ts = calib.calibrator("ts").fit(val["logits"], val["labels"])
    groups = test["labels"] % 3
    report = calib.evaluate(test["logits"], test["labels"], metrics=STREAMED, calibrator=ts, groups=groups)
    _assert_groups_equal_subsets(report, test["logits"], test["labels"], groups, calibrator=ts)
    news = np.load(data_file("news20_probs.npz"))
    families = np.where(news["labels"] < 6, "comp", np.where(news["labels"] < 11, "rec", "other"))
    report = calib.evaluate(news["probs"], news["labels"], metrics=STREAMED, groups=families)
    _assert_groups_equal_subsets(report, news["probs"], news["labels"], families)


def test_group_values_read_as_people_store_them():
    floats = np.array([1.0, 2.0, np.nan, 1.0])
    groups = groups_from_values(floats, 4, "x")
    assert groups.names == ["1", "2", MISSING] and groups.codes.tolist() == [0, 1, 2, 0]
    text = groups_from_values(np.array(["b", None, "a", ""], dtype=object), 4, "x")
    assert sorted(text.names) == sorted(["a", "b", MISSING])
    assert text.codes[1] == text.codes[3] and text.names[text.codes[1]] == MISSING
    numbers = groups_from_values(np.array([10, 9, 10]), 3, "x")
    assert numbers.names == ["9", "10"]  # sorted as numbers, not as text


@pytest.fixture(scope="module")
def grouped_parquet(tmp_path_factory):
    data = np.load(TEST)
    family = np.where(np.isin(data["labels"], [0, 1, 8, 9]), "vehicles", "animals").astype(object)
    family[np.flatnonzero(data["logits"].argmax(1) != data["labels"])[:60]] = "rare"  # 60 misclassified rows
    path = tmp_path_factory.mktemp("groups") / "test.parquet"
    table = pa.table({"logits": pa.array(list(data["logits"])), "label": data["labels"], "family": family})
    pq.write_table(table, path, row_group_size=1500)
    return path, family


def test_cli_group_by_a_parquet_column_and_gates_on_the_worst_group(run, grouped_parquet, tmp_path):
    path, family = grouped_parquet
    data = np.load(TEST)
    code, out, err = run("evaluate", path, "--group-by", "family", "--no-vece", "--json", "-")
    assert code == 0, err
    report = json.loads(out)
    names, counts = np.unique(family.astype(str), return_counts=True)
    assert {name: entry["n"] for name, entry in report["groups"].items()} == dict(zip(names, counts.tolist()))
    assert report["groups"]["rare"]["n"] == 60
    animals = family == "animals"
    alone = calib.evaluate(data["logits"][animals], data["labels"][animals]).values
    assert report["groups"]["animals"]["metrics"]["ece"] == pytest.approx(alone["ece"], abs=1e-12)
    worst = max(("animals", "vehicles"), key=lambda g: report["groups"][g]["metrics"]["ece"])
    worst_ece = report["groups"][worst]["metrics"]["ece"]
    assert report["group_by"]["worst"]["ece"] == {"group": worst, "value": worst_ece}
    limit = f"{worst_ece - 0.001:.4f}"
    raw = ["--ignore-noise"]  # the worst group's value itself (tests/unit/evaluation/test_gates.py has the bounds)
    code, out, err = run("evaluate", path, "--group-by", "family", "--no-vece", *raw, "--fail-if", f"max_group:ece>{limit}")
    assert code == 1
    assert (
        f"gate FAIL: ece of group {worst} (the max group of 2 groups) = " in out and f"(the gate fails when ece > {limit})" in out
    )
    assert "by group: family (3 groups)" in out and "rare*" in out and "fewer than 100 rows" in out
    code, out, _ = run(
        "evaluate", path, "--group-by", "family", "--no-vece", *raw, "--fail-if", f"max_group:ece>{worst_ece + 0.001:.4f}"
    )
    assert code == 0
    # the 60-row group (accuracy 0) is listed but not gated: with --min-group-rows 10 it is
    code, out, _ = run("evaluate", path, "--group-by", "family", "--no-vece", "--fail-if", "min_group:accuracy<0.5")
    assert code == 0
    code, out, _ = run(
        "evaluate", path, "--group-by", "family", "--no-vece", "--min-group-rows", "10", "--fail-if", "min_group:accuracy<0.5"
    )
    assert (
        code == 1
        and "accuracy of group rare (the min group of 3 groups) = 0, the upper end of its 98.33% (Bonferroni over 3 groups) interval 0 < 0.5"
        in out
    )
    code, _, err = run("evaluate", path, "--no-vece", "--fail-if", "max_group:ece>0.03")
    assert code == 2 and "needs the rows' groups" in err and "--group-by" in err
    code, _, err = run("evaluate", path, "--group-by", "family", "--fail-if", "max_group:vece_l1>0.1")
    assert code == 2 and "computed on all rows only" in err
    code, _, err = run("evaluate", path, "--group-by", "hospital", "--no-vece")
    assert code == 2 and "no column 'hospital' beside the scores (found family)" in err


def test_groups_file_and_label_column(run, tmp_path):
    data = np.load(TEST)
    (tmp_path / "g.txt").write_text("".join(f"{'even' if v % 2 == 0 else 'odd'}\n" for v in data["labels"]))
    code, out, _ = run("evaluate", TEST, "--groups", tmp_path / "g.txt", "--no-vece", "--metrics", "ece", "--json", "-")
    groups = json.loads(out)["groups"]
    assert code == 0 and set(groups) == {"even", "odd"} and groups["even"]["n"] + groups["odd"]["n"] == 10000
    (tmp_path / "g.csv").write_text("id,site\n" + "".join(f"{i},s{i % 4}\n" for i in range(10000)))
    code, out, _ = run(
        "evaluate", TEST, "--groups", tmp_path / "g.csv", "--group-by", "site", "--no-vece", "--metrics", "ece", "--json", "-"
    )
    assert code == 0 and set(json.loads(out)["groups"]) == {"s0", "s1", "s2", "s3"}
    code, out, _ = run("evaluate", TEST, "--group-by", "labels", "--no-vece", "--metrics", "accuracy", "--json", "-")
    per_class = json.loads(out)["groups"]  # calibration per class: the labels' own array
    assert code == 0 and len(per_class) == 10 and per_class["3"]["n"] == 1000
    np.save(tmp_path / "short.npy", np.zeros(10))
    code, _, err = run("evaluate", TEST, "--groups", tmp_path / "short.npy", "--no-vece")
    assert code == 2 and "10 group values for 10000 rows" in err


def test_baseline_gates_per_group(run, grouped_parquet, tmp_path):
    path, _ = grouped_parquet
    code, _, _ = run("evaluate", path, "--group-by", "family", "--no-vece", "--metrics", "ece", "--json", tmp_path / "b.json")
    assert code == 0
    table = pq.read_table(path)
    worse = pa.array([list(np.asarray(row) * 1.6) for row in table.column("logits").to_pylist()])
    pq.write_table(table.set_column(0, "logits", worse), tmp_path / "worse.parquet")
    gate = ["--baseline", tmp_path / "b.json", "--max-increase", "ece=0.001"]
    code, out, err = run(
        "evaluate", tmp_path / "worse.parquet", "--group-by", "family", "--no-vece", "--metrics", "ece", *gate, "--json", "-"
    )
    assert code == 1
    entries = json.loads(out)["gates"]
    assert [e.get("group") for e in entries] == [None, "animals", "vehicles"]  # rare: below the minimum rows
    assert all(not e["passed"] for e in entries)


def test_shards_and_states_give_the_same_groups(run, grouped_parquet, tmp_path):
    path, _ = grouped_parquet
    table = pq.read_table(path)
    shards = tmp_path / "shards"
    shards.mkdir()
    pq.write_table(table.slice(0, 3500), shards / "a.parquet")
    pq.write_table(table.slice(3500), shards / "b.parquet")
    args = ["--group-by", "family", "--no-vece", "--metrics", "ece,cmce,accuracy"]
    code, out, _ = run("evaluate", path, *args, "--json", "-")
    whole = json.loads(out)
    code, out, _ = run("evaluate", shards, *args, "--json", "-")
    merged = json.loads(out)
    for name in ("a", "b"):
        run("evaluate", shards / f"{name}.parquet", *args, "--emit-state", tmp_path / f"{name}.npz")
    code, out, _ = run("merge-states", tmp_path / "a.npz", tmp_path / "b.npz", "--json", "-")
    states = json.loads(out)
    for other in (merged, states):
        assert set(other["groups"]) == set(whole["groups"])
        for name, entry in whole["groups"].items():
            assert other["groups"][name]["n"] == entry["n"]
            for key, value in entry["metrics"].items():
                assert other["groups"][name]["metrics"][key] == pytest.approx(value, abs=1e-12)
        assert other["group_by"]["worst"].keys() == whole["group_by"]["worst"].keys()


def test_diagnose_by_group(run, grouped_parquet, tmp_path):
    path, family = grouped_parquet
    code, out, err = run("diagnose", path, "--group-by", "family", "--out", tmp_path / "report")
    assert code == 0, err
    assert "worst groups of family (top-label ECE; over 2 groups" in out and "animals" in out
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    data = np.load(TEST)
    for name in ("animals", "vehicles"):
        rows = family == name
        alone = calib.evaluate(data["logits"][rows], data["labels"][rows], metrics=["ece"]).values["ece"]
        assert report["groups"]["ece"][name]["ece"] == pytest.approx(alone, abs=1e-12)
    assert report["groups"]["worst"][0]["group"] == "animals"
    assert (tmp_path / "report" / "reliability_groups.png").stat().st_size > 10_000


def test_a_group_of_exactly_the_minimum_rows_is_gated_and_one_row_fewer_is_not():
    """The worst group is taken over the groups with at least ``min_rows`` rows: a group of exactly
    ``min_rows`` is one of them, a group of ``min_rows`` - 1 is listed but not gated."""
    from calib.evaluation.groups import group_section

    def section(rows_of_worst):
        values = [{"ece": {"value": 0.30}}, {"ece": {"value": 0.10}}]
        return group_section(["small", "large"], [rows_of_worst, 500], "column g", values, None, min_rows=100)

    assert section(100).worst["ece"] == {"group": "small", "value": 0.30}
    assert section(99).worst["ece"] == {"group": "large", "value": 0.10}
    assert section(99).groups["small"].n == 99  # listed all the same


def test_merged_group_names_sort_as_a_single_evaluation_sorts_them():
    """Numbers as numbers first, then text, the group of missing values last (what
    groups_from_values gives one input, and merged states must give again)."""
    from calib.evaluation.groups import group_sort_key

    assert sorted(["b", MISSING, "10", "a", "2", "-1.5"], key=group_sort_key) == ["-1.5", "2", "10", "a", "b", MISSING]
    assert groups_from_values(np.array([2.0, 10.0, np.nan, -1.5]), 4, "g").names == ["-1.5", "2.0", "10.0", MISSING]


def test_a_column_of_group_values_reads_as_a_vector():
    values = np.array(["x", "y", "x", "z"])
    as_column = groups_from_values(values[:, None], 4, "g")
    as_vector = groups_from_values(values, 4, "g")
    assert as_column.names == as_vector.names == ["x", "y", "z"] and np.array_equal(as_column.codes, as_vector.codes)


def test_one_group_has_its_metrics_and_is_the_worst():
    from calib.evaluation.groups import group_section

    section = group_section(["only"], [300], "column g", [{"ece": {"value": 0.2}}], None, min_rows=100)
    assert section.worst["ece"] == {"group": "only", "value": 0.2}


def test_rows_grouped_by_a_labels_column_are_groups_not_the_labels_of_a_multi_label_input(run, tmp_path):
    """Calibration per class of rows of classes, their label column called "labels": a table "by
    group" of all rows, not of a multi-label input's labels and pairs, in the text and the JSON read
    back alike."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "mc.npz", logits=rng.normal(size=(600, 3)) * 2, labels=rng.integers(0, 3, 600))
    code, out, err = run(
        "evaluate", tmp_path / "mc.npz", "--group-by", "labels", "--metrics", "ece", "--json", tmp_path / "r.json"
    )
    assert code == 0, err
    lines = out.splitlines()
    assert "by group: labels (3 groups)" in lines and any(line.startswith("(all rows)") for line in lines)
    assert not any(line.startswith(("label ", "(all pairs", "(mean")) for line in lines)
    from calib.evaluation.report_types import EvaluationReport

    report = EvaluationReport.from_json(json.loads((tmp_path / "r.json").read_text()))
    assert report.groups.source == "labels" and report.groups.unit == "group" and report.groups.mean == {}
