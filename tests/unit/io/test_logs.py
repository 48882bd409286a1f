"""calib.io.logs: each tool's outputs found by its own reader, and a folder of shards by none."""

from __future__ import annotations

import shutil

import pytest
from conftest import DATA

from calib.io import logs
from calib.io.formats import harness_samples, helm_runs, inspect_logs, lighteval_details


@pytest.mark.parametrize(
    ("folder", "module"),
    [
        (DATA / "lm_eval" / "seeded-lm", harness_samples),
        (DATA / "helm" / "runs" / "toy", helm_runs),
        (DATA / "lighteval" / "details" / "toy" / "seeded", lighteval_details),
        (DATA / "inspect" / "choices", inspect_logs),
    ],
)
def test_each_tools_folder_is_one_input_found_by_its_reader(folder, module):
    assert logs.is_log_folder(str(folder))
    reader, found = logs.find_log(str(folder))
    assert reader is logs.LOG_READERS[[harness_samples, helm_runs, lighteval_details, inspect_logs].index(module)]
    assert found and all(str(folder) in path for path in reader.files(found))


def test_a_folder_of_shards_is_no_tools_output(tmp_path):
    shutil.copy(DATA / "cifar10_resnet110_val.npz", tmp_path / "a.npz")
    assert not logs.is_log_folder(str(tmp_path)) and logs.find_log(str(tmp_path)) is None
    assert not logs.is_log_folder(str(DATA / "cifar10_resnet110_val.npz"))  # a file is not a folder
