"""Inspect AI logs (calib.io.formats.inspect_logs), read from logs that Inspect's own code wrote
(tests/data/inspect, made by tools/make_inspect_logs.py with inspect-ai 0.3.285: ``.eval`` zips of
zstd entries and a ``.json`` log): the accuracy Inspect recorded, per task; the confidence over the
choices from the answer token's log-probabilities; stated confidences; one line naming the file
and the sample for every bad log."""

from __future__ import annotations

import glob
import json
import math
import os
import shutil

import numpy as np
import pytest
from conftest import DATA

from calib.errors import InputError
from calib.io.formats import inspect_logs
from calib.io.readers import read_predictions

CHOICES = DATA / "inspect" / "choices"
STATED = DATA / "inspect" / "stated"


def _logs(folder) -> list[str]:
    return sorted(glob.glob(str(folder / "*")))


def _recorded(path: str) -> tuple[str, float]:
    """(the task, the accuracy Inspect recorded in the log's results)."""
    header, _ = inspect_logs._load(path)
    (score,) = header["results"]["scores"]
    return header["eval"]["task"], score["metrics"]["accuracy"]["value"]


@pytest.mark.parametrize("path", _logs(CHOICES) + _logs(STATED), ids=os.path.basename)
def test_each_log_gives_the_accuracy_inspect_recorded(run, path):
    code, out, err = run("evaluate", path, "--metrics", "accuracy", "--no-vece", "--bootstrap", "0", "--json", "-")
    assert code == 0, err
    task, accuracy = _recorded(path)
    assert json.loads(out)["metrics"]["accuracy"]["value"] == pytest.approx(accuracy, abs=1e-12)
    assert f"Inspect AI logs ({task}:" in err


def test_a_folder_of_logs_is_one_input_grouped_by_task(run):
    code, out, err = run("evaluate", CHOICES, "--metrics", "accuracy,ece", "--no-vece", "--bootstrap", "0", "--json", "-")
    assert code == 0, err
    groups = json.loads(out)["groups"]
    recorded = dict(_recorded(path) for path in _logs(CHOICES))
    assert sorted(groups) == sorted(recorded) == ["toy_choice", "toy_choice_json"]
    for task, accuracy in recorded.items():
        assert groups[task]["metrics"]["accuracy"] == pytest.approx(accuracy, abs=1e-12)


def test_the_choices_are_the_answer_tokens_letters_renormalised():
    """Each row's softmax is the letters' probabilities among the answer token's top
    log-probabilities, divided by their sum (the token that is no letter left out); the label is
    the target's letter."""
    (path,) = glob.glob(str(CHOICES / "*.json"))
    preds = read_predictions(path)
    with open(path) as handle:
        samples = json.load(handle)["samples"]
    probs = np.exp(preds.scores - preds.scores.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    for row, sample in enumerate(samples):
        top = sample["output"]["choices"][0]["logprobs"]["content"][-1]["top_logprobs"]
        letters = "ABCDE"[: len(sample["choices"])]
        mass = {t["token"].strip(): math.exp(t["logprob"]) for t in top if t["token"].strip() in letters}
        total = sum(mass.values())
        for j, letter in enumerate(letters):
            assert probs[row, j] == pytest.approx(mass.get(letter, 0.0) / total, abs=1e-12)
        assert (probs[row, len(letters) :] == 0.0).all()
        assert preds.labels[row] == letters.index(sample["target"])


def test_stated_confidences_are_answers_read_by_the_stated_rule():
    (path,) = _logs(STATED)
    preds = read_predictions(path)
    _, samples = inspect_logs._load(path)
    assert preds.answers and preds.k == 2
    for row, sample in enumerate(samples):
        said = sample["scores"]["word_with_confidence"]["metadata"]["confidence"]
        expected = {"low": 0.3, "medium": 0.5, "high": 0.7}.get(said)
        if expected is None:
            expected = float(said[:-1]) / 100 if said.endswith("%") else float(said)
        assert preds.scores[row] == pytest.approx(expected, abs=1e-15)
        assert preds.labels[row] == (sample["scores"]["word_with_confidence"]["value"] == "C")
    assert "stated confidences (bare, percent, word)" in preds.kind_reason


def _json_log(tmp_path, edit) -> str:
    """The stated log rewritten as a ``.json`` log (Inspect's other format) after ``edit`` of its
    samples (in Inspect's order: by id as text, so the third is 'stated-10')."""
    (source,) = _logs(STATED)
    header, samples = inspect_logs._load(source)
    edit(samples)
    path = tmp_path / "toy-stated.json"
    path.write_text(json.dumps({**header, "samples": samples}))
    return str(path)


def _refusal(run, path, *options) -> str:
    code, out, err = run("evaluate", path, "--no-vece", *options)
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    return err


def test_a_confidence_of_87_among_probabilities_is_refused_naming_the_sample(tmp_path, run):
    def edit(samples):
        for sample in samples:
            sample["scores"]["word_with_confidence"]["metadata"]["confidence"] = "0.6"
        samples[7]["scores"]["word_with_confidence"]["metadata"]["confidence"] = "87"

    err = _refusal(run, _json_log(tmp_path, edit))
    assert (
        "sample 'stated-104' (epoch 1): confidence 87 where 199 other confidences of the log lie in [0, 1]" in err
    )  # the 8th in Inspect's order
    assert "87%" in err and "0.87" in err


def test_whole_numbers_up_to_100_are_percentages_as_browsecomp_stores_them(tmp_path):
    def edit(samples):
        for i, sample in enumerate(samples):
            sample["scores"]["word_with_confidence"]["metadata"]["confidence"] = [0, 1, 90, 100][i % 4]

    preds = read_predictions(_json_log(tmp_path, edit))
    assert list(preds.scores[:4]) == [0.0, 0.01, 0.9, 1.0]  # 1 on a 0-100 scale is 1%
    assert "bare numbers on a 0-100 scale" in preds.kind_reason


def test_a_missing_confidence_is_refused_or_set_as_browsecomp_sets_it(tmp_path, run):
    def edit(samples):
        for sample in samples[:3]:
            del sample["scores"]["word_with_confidence"]["metadata"]["confidence"]

    path = _json_log(tmp_path, edit)
    err = _refusal(run, path)
    assert "sample 'stated-0' (epoch 1): no stated confidence (3 of 200 rows lack one)" in err  # the first in Inspect's order
    assert "--missing-confidence browsecomp" in err
    preds = read_predictions(path, missing_confidence="browsecomp")
    assert list(preds.scores[:3]) == [1.0, 1.0, 1.0]
    assert "3 missing set to 1 as browsecomp sets them" in preds.kind_reason


def test_a_sample_without_a_score_is_refused_naming_it(tmp_path, run):
    def edit(samples):
        samples[4]["scores"] = {}

    err = _refusal(run, _json_log(tmp_path, edit))
    assert "toy-stated.json: sample 'stated-101' (epoch 1): no score by 'word_with_confidence'" in err


def test_a_partial_score_is_refused_naming_it(tmp_path, run):
    def edit(samples):
        samples[2]["scores"]["word_with_confidence"]["value"] = "P"

    err = _refusal(run, _json_log(tmp_path, edit))
    assert "sample 'stated-10' (epoch 1): score 'P' is not right or wrong" in err


def test_a_truncated_eval_zip_is_refused_naming_the_file(tmp_path, run):
    (source,) = glob.glob(str(CHOICES / "*.eval"))
    cut = tmp_path / "cut.eval"
    cut.write_bytes(open(source, "rb").read()[:-5000])
    err = _refusal(run, cut)
    assert f"{cut}: not a readable Inspect log" in err and "truncated" in err


def test_two_logs_of_one_task_are_refused(tmp_path, run):
    (source,) = glob.glob(str(CHOICES / "*.eval"))
    for name in ("first.eval", "second.eval"):
        shutil.copy(source, tmp_path / name)
    err = _refusal(run, tmp_path)
    assert "two logs of task 'toy_choice'" in err


def test_a_sampled_answer_that_is_not_the_most_probable_is_refused(tmp_path):
    (source,) = glob.glob(str(CHOICES / "*.json"))
    log = json.load(open(source))
    sample = log["samples"][0]
    letters = "ABCDE"[: len(sample["choices"])]
    other = next(letter for letter in letters if letter != sample["scores"]["choice"]["answer"])
    sample["scores"]["choice"]["answer"] = other
    path = tmp_path / "sampled.json"
    path.write_text(json.dumps(log))
    with pytest.raises(
        InputError, match=f"sample 'toy_choice_json-0' \\(epoch 1\\): the answer {other} is not the most probable"
    ):
        read_predictions(str(path))


def test_several_scorers_need_one_named(tmp_path):
    def edit(samples):
        for sample in samples:
            sample["scores"]["judge"] = {"value": "C", "metadata": {"confidence": "0.5"}}

    path = _json_log(tmp_path, edit)
    log = json.load(open(path))
    log["results"]["scores"].append({"name": "judge"})
    open(path, "w").write(json.dumps(log))
    with pytest.raises(InputError, match="scorers word_with_confidence, judge; name the one"):
        read_predictions(path)
    assert read_predictions(path, scores="word_with_confidence").n == 200
    assert read_predictions(path, scores="judge").labels.all()


def test_a_folder_mixing_choices_and_stated_confidences_is_refused(tmp_path):
    for path in _logs(CHOICES)[:1] + _logs(STATED):
        shutil.copy(path, tmp_path)
    with pytest.raises(InputError, match="some samples hold log-probabilities over their choices and others a stated"):
        read_predictions(str(tmp_path))


def _choice_log(tmp_path, edit, name="edited.json") -> str:
    """The ``.json`` choice log after ``edit`` of the whole log (its samples in the file's order)."""
    (source,) = glob.glob(str(CHOICES / "*.json"))
    log = json.load(open(source))
    edit(log)
    path = tmp_path / name
    path.write_text(json.dumps(log))
    return str(path)


def test_no_answer_is_wrong_and_numbers_and_booleans_are_verdicts(tmp_path):
    def edit(samples):
        scores = [s["scores"]["word_with_confidence"] for s in samples[:4]]
        for score, value in zip(scores, ["N", 1, True, 0.0]):
            score["value"] = value

    preds = read_predictions(_json_log(tmp_path, edit))
    assert list(preds.labels[:4]) == [0, 1, 1, 0]


def test_a_verdict_the_log_probabilities_contradict_is_refused(tmp_path):
    def edit(log):
        score = log["samples"][3]["scores"]["choice"]
        score["value"] = "I" if score["value"] == "C" else "C"

    with pytest.raises(
        InputError,
        match="sample 'toy_choice_json-11' .*the scorer says .*, the log-probabilities' most probable choice says otherwise",
    ):
        read_predictions(_choice_log(tmp_path, edit))


def test_a_letters_spellings_are_summed(tmp_path):
    """ " B" and "B" among the top log-probabilities are the same choice: their probabilities add."""

    def edit(log):
        top = log["samples"][0]["output"]["choices"][0]["logprobs"]["content"][-1]["top_logprobs"]
        top.append({"token": "A", "logprob": next(t["logprob"] for t in top if t["token"] == " A")})

    before = read_predictions(_choice_log(tmp_path, lambda log: None, "plain.json"))
    after = read_predictions(_choice_log(tmp_path, edit))
    assert after.scores[0, 0] == pytest.approx(before.scores[0, 0] + np.log(2.0), abs=1e-12)
    np.testing.assert_array_equal(after.scores[0, 1:], before.scores[0, 1:])


def test_a_run_that_did_not_succeed_is_refused(tmp_path):
    def edit(log):
        log["status"] = "error"

    with pytest.raises(InputError, match="the run's status is 'error', not success"):
        read_predictions(_choice_log(tmp_path, edit))


def test_numbered_samples_are_read_in_number_order(tmp_path):
    """Inspect orders samples by epoch, then id: a number's digits padded (2 before 10), as its
    own reader does; text ids as text."""

    def edit(log):
        for number, sample in enumerate(log["samples"]):
            sample["id"] = len(log["samples"]) - number  # 60, 59, ..., 1

    path = _choice_log(tmp_path, edit)
    samples = sorted(json.load(open(path))["samples"], key=lambda s: s["id"])
    preds = read_predictions(path)
    assert list(preds.labels) == ["ABCDE".index(s["target"]) for s in samples]
