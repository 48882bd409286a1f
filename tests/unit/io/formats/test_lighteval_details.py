"""lighteval details (calib.io.formats.lighteval_details), read from details that lighteval's own
pipeline and EvaluationTracker wrote (tests/data/lighteval, made by tools/make_lighteval_details.py
with lighteval 0.13.0): the accuracy lighteval reported per task, the grouping by task, the
padding of rows of fewer choices, and one line naming the row for every bad row."""

from __future__ import annotations

import glob
import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import DATA

from calib.errors import InputError
from calib.io.readers import read_predictions

MODEL = DATA / "lighteval" / "details" / "toy" / "seeded"
(RUN,) = glob.glob(str(MODEL / "*"))
TASKS = ("toy_mc_easy|0", "toy_mc_hard|0")


def _results() -> dict:
    (path,) = glob.glob(str(DATA / "lighteval" / "results" / "toy" / "seeded" / "results_*.json"))
    with open(path) as handle:
        return json.load(handle)["results"]


def _details(task: str) -> str:
    (path,) = glob.glob(f"{RUN}/details_{glob.escape(task)}_*.parquet")
    return path


@pytest.mark.parametrize("task", TASKS)
def test_a_details_file_gives_the_accuracy_lighteval_reported(run, task):
    code, out, err = run("evaluate", _details(task), "--metrics", "accuracy", "--no-vece", "--bootstrap", "0", "--json", "-")
    assert code == 0, err
    assert json.loads(out)["metrics"]["accuracy"]["value"] == pytest.approx(_results()[task]["acc"], abs=1e-12)
    assert "as lighteval's acc reads them" in err


@pytest.mark.parametrize("folder", [RUN, MODEL])
def test_a_run_folder_is_one_input_grouped_by_task(run, folder):
    code, out, err = run("evaluate", folder, "--metrics", "accuracy,ece", "--no-vece", "--bootstrap", "0", "--json", "-")
    assert code == 0, err
    report = json.loads(out)
    assert report["input"]["n"] == 240 + 160
    for task in TASKS:
        assert report["groups"][task]["metrics"]["accuracy"] == pytest.approx(_results()[task]["acc"], abs=1e-12)


def test_rows_are_the_choices_log_likelihoods_padded_to_the_most_choices():
    preds = read_predictions(_details(TASKS[0]))
    records = pq.read_table(_details(TASKS[0])).to_pylist()
    widths = [len(r["doc"]["choices"]) for r in records]
    assert preds.k == max(widths) == 5 and min(widths) == 2
    for row, record in enumerate(records):
        width = widths[row]
        assert list(preds.scores[row, :width]) == record["model_response"]["logprobs"][:width]
        assert (preds.scores[row, width:] == min(record["model_response"]["logprobs"]) - 1000.0).all()
        assert preds.labels[row] == record["doc"]["gold_index"]
    assert (preds.absent == (np.arange(5)[None, :] >= np.array(widths)[:, None])).all()


def _edited(tmp_path, edit) -> str:
    table = pq.read_table(_details(TASKS[0]))
    records = table.to_pylist()
    edit(records)
    path = tmp_path / "details_toy_mc_easy|0_2026.parquet"
    pq.write_table(pa.Table.from_pylist(records, schema=table.schema), path)
    return str(path)


def test_a_row_whose_recorded_acc_disagrees_is_refused_naming_it(tmp_path, run):
    def edit(records):
        records[5]["metric"]["acc"] = 1 - records[5]["metric"]["acc"]

    code, out, err = run("evaluate", _edited(tmp_path, edit), "--no-vece")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "row 5 (doc id '" in err and "lighteval recorded acc" in err


def test_fewer_log_likelihoods_than_choices_are_refused(tmp_path):
    def edit(records):
        records[0]["model_response"]["logprobs"] = records[0]["model_response"]["logprobs"][:1]

    with pytest.raises(InputError, match="row 0 .*: 1 log-likelihoods for"):
        read_predictions(_edited(tmp_path, edit))


def test_a_gold_index_outside_the_choices_is_refused(tmp_path):
    def edit(records):
        records[2]["doc"]["gold_index"] = 7

    with pytest.raises(InputError, match="row 2 .*: gold index 7 outside the sample's"):
        read_predictions(_edited(tmp_path, edit))


def test_two_runs_of_one_task_are_refused(tmp_path):
    shutil.copytree(RUN, tmp_path / "run1")
    shutil.copytree(RUN, tmp_path / "run2")
    with pytest.raises(InputError, match="two details files of task 'toy_mc_easy\\|0'"):
        read_predictions(str(tmp_path))


def test_a_truncated_details_file_is_refused(tmp_path, run):
    path = tmp_path / "details_x_2026.parquet"
    data = open(_details(TASKS[0]), "rb").read()
    path.write_bytes(data[: len(data) // 2])
    code, out, err = run("evaluate", path, "--no-vece")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
