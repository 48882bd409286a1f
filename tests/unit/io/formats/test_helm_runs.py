"""HELM run folders (calib.io.formats.helm_runs), read from runs that HELM's own code wrote
(tests/data/helm, made by tools/make_helm_run.py with crfm-helm 0.5.16's ``helm-run``): calib's
``helm_*`` numbers from the per-instance stats equal the calibration numbers HELM's code wrote in
each run's stats.json, to 1e-9; the accuracy is HELM's exact_match; what HELM skips or cannot
compute is said or refused in one line."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from conftest import DATA

from calib.errors import InputError
from calib.io.formats import helm_runs
from calib.io.readers import read_predictions

SUITE = DATA / "helm" / "runs" / "toy"
RUNS = sorted(p for p in os.listdir(SUITE) if (SUITE / p / "per_instance_stats.json").is_file())
#: calib's key of each of HELM's numbers
HELM_NAMES = {
    "helm_ece_10": "ece_10_bin",
    "helm_ece_1": "ece_1_bin",
    "helm_platt_ece_10": "platt_ece_10_bin",
    "helm_selective_acc_10": "selective_acc@10",
    "helm_selective_area": "selective_cov_acc_area",
    "accuracy": "exact_match",
}


def _helm_stats(run: str) -> dict[str, float]:
    """The run's stats of the test split without perturbation, by name, as HELM wrote them."""
    with open(SUITE / run / "stats.json") as handle:
        stats = json.load(handle)
    test = [s for s in stats if s["name"].get("split") == "test" and "perturbation" not in s["name"] and s["count"]]
    return {s["name"]["name"]: s["mean"] for s in test}


@pytest.mark.parametrize("run_name", RUNS)
def test_calibs_numbers_equal_helms_own(run, run_name):
    args = ["evaluate", SUITE / run_name, "--metrics", ",".join(HELM_NAMES), "--no-vece", "--bootstrap", "0", "--json", "-"]
    code, out, err = run(*args)
    assert code == 0, err
    metrics = json.loads(out)["metrics"]
    helm = _helm_stats(run_name)
    for key, name in HELM_NAMES.items():
        assert metrics[key]["value"] == pytest.approx(helm[name], abs=1e-9), key
    assert "max_prob read as P(right) against its exact_match" in err


def test_a_suite_folder_is_one_input_grouped_by_run(run):
    code, out, err = run("evaluate", SUITE, "--metrics", "accuracy,helm_ece_10", "--no-vece", "--bootstrap", "0", "--json", "-")
    assert code == 0, err
    groups = json.loads(out)["groups"]
    assert sorted(groups) == RUNS
    for name in RUNS:
        helm = _helm_stats(name)
        assert groups[name]["metrics"]["accuracy"] == pytest.approx(helm["exact_match"], abs=1e-12)
        assert groups[name]["metrics"]["helm_ece_10"] == pytest.approx(helm["ece_10_bin"], abs=1e-9)


def test_the_per_instance_stats_file_names_its_run():
    path = SUITE / RUNS[0] / "per_instance_stats.json"
    assert read_predictions(str(path)).n == read_predictions(str(SUITE / RUNS[0])).n == 240


def _copied_run(tmp_path, edit) -> str:
    folder = tmp_path / "run"
    folder.mkdir()
    with open(SUITE / RUNS[0] / "per_instance_stats.json") as handle:
        entries = json.load(handle)
    edit(entries)
    (folder / "per_instance_stats.json").write_text(json.dumps(entries))
    return str(folder)


def _without(entry, name):
    entry["stats"] = [s for s in entry["stats"] if s["name"]["name"] != name]


def test_instances_without_both_stats_are_left_out_as_helm_leaves_them(tmp_path):
    def edit(entries):
        _without(entries[0], "max_prob")
        _without(entries[1], "exact_match")

    preds = read_predictions(_copied_run(tmp_path, edit))
    assert preds.n == 238
    assert "2 instances without both left out, as HELM leaves them" in preds.kind_reason


def test_a_run_without_log_probabilities_is_refused(tmp_path, run):
    def edit(entries):
        for entry in entries:
            for stat in entry["stats"]:
                if stat["name"]["name"] == "logprob":
                    stat["sum"] = 0.0

    code, out, err = run("evaluate", _copied_run(tmp_path, edit), "--no-vece")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "the model gave no log-probabilities (every logprob stat is 0)" in err


def test_several_train_trials_are_refused(tmp_path):
    def edit(entries):
        entries[0]["train_trial_index"] = 1

    with pytest.raises(InputError, match="2 train trials; HELM's calibration numbers are means over trials"):
        read_predictions(_copied_run(tmp_path, edit))


def test_a_max_prob_outside_0_1_is_refused_naming_the_instance(tmp_path):
    def edit(entries):
        for stat in entries[3]["stats"]:
            if stat["name"]["name"] == "max_prob":
                stat["mean"] = 1.5

    with pytest.raises(InputError, match=r"instance 'id\d+': max_prob 1.5 outside \[0, 1\]"):
        read_predictions(_copied_run(tmp_path, edit))


def test_a_truncated_stats_file_is_refused(tmp_path, run):
    folder = tmp_path / "run"
    folder.mkdir()
    data = (SUITE / RUNS[0] / "per_instance_stats.json").read_bytes()
    (folder / "per_instance_stats.json").write_bytes(data[: len(data) // 2])
    code, out, err = run("evaluate", folder, "--no-vece")
    assert code == 2 and "not readable JSON" in err and "truncated" in err


def test_a_folder_of_shards_is_not_a_helm_suite(tmp_path):
    shutil.copy(DATA / "cifar10_resnet110_val.npz", tmp_path / "a.npz")
    assert helm_runs.run_folders(str(tmp_path)) == []


def test_a_tie_shared_exact_match_is_truncated_as_helm_truncates_it(tmp_path):
    """HELM's exact_match of a tie of top choices is the share of right ones among them (2/3 for two
    right of three tied); its compute_calibration_metrics takes int() of it: 0, not the nearest 1. A
    value outside [0, 1] is refused."""

    def set_exact_match(value):
        def edit(entries):
            for stat in entries[0]["stats"]:
                if stat["name"]["name"] == "exact_match" and "perturbation" not in stat["name"]:
                    stat["mean"] = value

        return edit

    folder = tmp_path / "half"
    folder.mkdir()
    preds = read_predictions(_copied_run(folder, set_exact_match(2 / 3)))
    assert preds.labels[0] == 0
    assert read_predictions(_copied_run(tmp_path, set_exact_match(1.0))).labels[0] == 1
    other = tmp_path / "beyond"
    other.mkdir()
    with pytest.raises(InputError, match=r"exact_match 1.5 outside \[0, 1\]"):
        read_predictions(_copied_run(other, set_exact_match(1.5)))
