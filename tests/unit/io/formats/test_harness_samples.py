"""lm-evaluation-harness sample logs (calib.io.formats.harness_samples), read from files that the
harness's own code wrote (tests/data/lm_eval, made by tools/make_lm_eval_samples.py with lm-eval
0.4.9): the accuracy the harness reported, the grouping by task, coverage of a conformal set fitted
on them, and one line naming the row for every bad row."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest
from conftest import DATA

import calib
from calib.io.formats import harness_samples
from calib.io.readers import read_predictions

RUN = DATA / "lm_eval" / "seeded-lm"


def _results() -> dict:
    (path,) = glob.glob(str(RUN / "results_*.json"))
    with open(path) as handle:
        return json.load(handle)["results"]


def _samples(task: str) -> str:
    (path,) = glob.glob(str(RUN / f"samples_{task}_*.jsonl"))
    return path


TASKS = ("toy_mc_easy", "toy_mc_hard")


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("reading", ["acc", "acc_norm"])
def test_a_sample_log_gives_the_accuracy_the_harness_reported(run, task, reading):
    """`calib evaluate samples_<task>.jsonl` with no options: the harness's acc; with --scores
    acc_norm, its acc_norm (the length-normalised reading)."""
    args = ["evaluate", _samples(task), "--metrics", "accuracy", "--no-vece", "--json", "-"]
    code, out, err = run(*args, *(["--scores", "acc_norm"] if reading == "acc_norm" else []))
    assert code == 0, err
    assert json.loads(out)["metrics"]["accuracy"]["value"] == pytest.approx(_results()[task][f"{reading},none"], abs=1e-12)
    assert f"as the harness's {reading} reads them" in err


def test_a_results_directory_is_one_input_grouped_by_task(run):
    """The run's folder (or the results directory above it): every task's rows, each task a group
    whose accuracy is the harness's."""
    for folder in (RUN, RUN.parent):
        code, out, err = run("evaluate", folder, "--metrics", "accuracy,ece", "--no-vece", "--json", "-")
        assert code == 0, err
        report = json.loads(out)
        results = _results()
        assert report["input"]["n"] == 240 + 160
        groups = report["groups"]
        assert sorted(groups) == sorted(TASKS)
        for task in TASKS:
            assert groups[task]["metrics"]["accuracy"] == pytest.approx(results[task]["acc,none"], abs=1e-12)
        assert "toy_mc_easy: 240 rows, toy_mc_hard: 160 rows" in err


def test_ragged_rows_are_padded_with_probability_zero_and_said():
    preds = read_predictions(_samples("toy_mc_easy"))
    with open(_samples("toy_mc_easy")) as handle:
        widths = [len(json.loads(line)["filtered_resps"]) for line in handle]
    assert preds.k == max(widths) == 5 and min(widths) == 2
    from scipy.special import softmax

    probs = softmax(np.asarray(preds.scores), axis=1)
    for row, width in enumerate(widths):
        assert (probs[row, width:] == 0.0).all()  # exp(-1000) underflows: no mass on a choice the row has not
        assert probs[row, :width].sum() == pytest.approx(1.0, abs=1e-12)
    padded = sum(w < 5 for w in widths)
    assert f"the {padded} rows with fewer than 5 padded 1000 below their least (probability 0)" in preds.kind_reason


def test_softmax_of_the_acc_reading_is_the_harness_prob_norm():
    """The acc reading's probabilities are softmax over the row's own log-likelihoods, the harness's
    prob_norm (utils.softmax(lls)), whatever the padding."""
    preds = read_predictions(_samples("toy_mc_hard"))
    with open(_samples("toy_mc_hard")) as handle:
        first = json.loads(handle.readline())
    lls = np.array([float(r[0]) for r in first["filtered_resps"]])
    harness = np.exp(lls - lls.max()) / np.exp(lls - lls.max()).sum()
    scores = np.asarray(preds.scores[0], dtype=np.float64)
    ours = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
    np.testing.assert_allclose(ours[: len(lls)], harness, rtol=0, atol=1e-15)


def test_a_conformal_set_fitted_on_a_sample_log_covers_over_100_splits():
    """Split conformal (mr, alpha 0.1) over 100 seeded random halves of the 400 rows: the mean
    coverage is at least 1 - alpha less three standard errors of the mean, and near it."""
    preds = read_predictions(str(RUN))
    scores, labels = np.asarray(preds.scores), preds.labels
    rng = np.random.default_rng(0)
    coverage = []
    for _ in range(100):
        order = rng.permutation(len(labels))
        fit, test = order[:200], order[200:]
        sets = calib.calibrator("mr", alpha=0.1).fit(scores[fit], labels[fit], kind="logits").predict_sets(scores[test])
        coverage.append(sets[np.arange(len(test)), labels[test]].mean())
    coverage = np.array(coverage)
    standard_error = coverage.std(ddof=1) / np.sqrt(len(coverage))
    assert coverage.mean() >= 0.9 - 3 * standard_error, (coverage.mean(), standard_error)
    assert coverage.mean() <= 0.95


def _write_rows(tmp_path, edit) -> str:
    """The easy task's sample log with its second row edited by ``edit`` (a record -> None)."""
    with open(_samples("toy_mc_easy")) as handle:
        records = [json.loads(line) for line in handle]
    edit(records[1])
    path = tmp_path / "samples_toy_mc_easy_2026-01-01T00-00-00.000000.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _drop_a_choice(record):
    record["filtered_resps"].pop()


def _nan(record):
    record["filtered_resps"][0][0] = "nan"


def _gold_out_of_range(record):
    record["target"] = str(len(record["filtered_resps"]))


def _several_golds(record):
    record["target"] = [0, 1]


def _disagrees(record):
    record["acc"] = 1.0 - record["acc"]


def _generation(record):
    """A generate_until row, as GSM8K writes one: (context, generation settings) arguments, the
    filtered response the extracted number, the target a number."""
    record["arguments"] = {"gen_args_0": {"arg_0": "Q: 6 x 7?", "arg_1": {"until": ["Question:"], "do_sample": False}}}
    record["filtered_resps"], record["resps"], record["target"] = ["42"], [["The answer is 42"]], "42"


@pytest.mark.parametrize(
    "edit, says",
    [
        (_drop_a_choice, "log-likelihoods for"),
        (_nan, "log-likelihood is nan"),
        (_gold_out_of_range, "gold index"),
        (_several_golds, "several gold answers"),
        (_disagrees, "the harness recorded acc"),
        (_generation, "a generation task's row (its arguments hold generation settings, not choices to score)"),
    ],
)
def test_a_bad_row_is_one_line_naming_it_exit_2(run, tmp_path, edit, says):
    code, _, err = run("evaluate", _write_rows(tmp_path, edit), "--no-vece")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "row 2 (doc_id 1)" in lines[0] and says in lines[0], lines[0]


def test_two_runs_of_one_task_in_a_directory_are_refused(run, tmp_path):
    for name in ("samples_toy_mc_easy_2026-01-01T00-00-00.000000.jsonl", "samples_toy_mc_easy_2026-02-01T00-00-00.000000.jsonl"):
        (tmp_path / name).write_text(open(_samples("toy_mc_easy")).read())
    code, _, err = run("evaluate", tmp_path, "--no-vece")
    assert code == 2 and "two sample files of task 'toy_mc_easy'" in err and len(err.strip().splitlines()) == 1


def test_an_unknown_reading_is_refused(run):
    code, _, err = run("evaluate", _samples("toy_mc_easy"), "--scores", "acc_mutual_info", "--no-vece")
    assert code == 2 and "read as acc or acc_norm" in err


def test_the_target_delimiter_comes_from_the_results_file(tmp_path):
    """acc_norm divides by the choice's length less the task's target delimiter, read from the
    run's results file; a delimiter that does not match the continuations is caught by the
    harness's own per-row acc_norm."""
    for path in glob.glob(str(RUN / "*")):
        (tmp_path / os.path.basename(path)).write_text(open(path).read())
    (results,) = glob.glob(str(tmp_path / "results_*.json"))
    data = json.load(open(results))
    assert data["configs"]["toy_mc_easy"]["target_delimiter"] == " "
    data["configs"]["toy_mc_easy"]["target_delimiter"] = " gold"
    json.dump(data, open(results, "w"))
    assert harness_samples._target_delimiter(str(tmp_path / "x.jsonl"), "toy_mc_easy") == " gold"
    assert harness_samples._target_delimiter(str(tmp_path / "x.jsonl"), "another") is None  # the choices tell it


@pytest.mark.parametrize("delimiter", ["\n", ": ", ""])
def test_without_its_results_file_the_target_is_found_whatever_the_delimiter(tmp_path, delimiter):
    """A task whose target delimiter is not the default space, read from its samples file alone:
    the target text is the choice that matches once the prefix all choices share is taken off,
    and acc_norm's lengths leave that prefix out too (the harness's own acc_norm per row agrees)."""
    records = [json.loads(line) for line in open(_samples("toy_mc_hard"))]
    for record in records:
        choices = record["doc"]["choices"]
        for j, args in enumerate(record["arguments"].values()):
            args["arg_1"] = delimiter + choices[j]
        record["target"] = choices[int(record["target"])]
        lls = np.array([float(r[0]) for r in record["filtered_resps"]])
        record["acc_norm"] = float(np.argmax(lls / np.array([len(c) for c in choices])) == choices.index(record["target"]))
        record.pop("acc")
    path = tmp_path / "samples_toy_mc_hard_2026-01-01T00-00-00.000000.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    preds = read_predictions(str(path), scores="acc_norm")
    assert preds.n == 160 and np.array_equal(preds.labels, [r["doc"]["choices"].index(r["target"]) for r in records])


def test_the_input_kind_line_is_the_readers_and_names_the_reading(run):
    for reading, words in (
        ("acc", "each row's log-likelihoods over"),
        ("acc_norm", "log-likelihoods per character of their choice"),
    ):
        code, _, err = run("evaluate", _samples("toy_mc_hard"), "--scores", reading, "--metrics", "accuracy", "--no-vece")
        assert code == 0
        line = next(line for line in err.splitlines() if line.startswith("input kind:"))
        assert line.startswith("input kind: logits (lm-evaluation-harness samples (toy_mc_hard: 160 rows)") and words in line


def test_one_task_is_not_grouped():
    preds = read_predictions(_samples("toy_mc_easy"))
    assert preds.groups_by is None and read_predictions(str(RUN)).groups_by == "task"


def _rewrite(tmp_path, edit, name="samples_toy_mc_easy_2026-01-01T00-00-00.000000.jsonl"):
    with open(_samples("toy_mc_easy")) as handle:
        records = [json.loads(line) for line in handle]
    for record in records:
        edit(record)
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_targets_as_numbers_or_as_choice_texts_and_choices_in_any_key_order(tmp_path):
    reference = read_predictions(_samples("toy_mc_easy"))

    def as_number(record):
        record["target"] = int(record["target"])

    def as_text(record):
        record["target"] = record["doc"]["choices"][int(record["target"])]

    def reversed_keys(record):
        record["arguments"] = dict(reversed(list(record["arguments"].items())))

    for edit in (as_number, as_text, reversed_keys):
        preds = read_predictions(_rewrite(tmp_path, edit))
        np.testing.assert_array_equal(preds.labels, reference.labels)
        np.testing.assert_array_equal(np.asarray(preds.scores), np.asarray(reference.scores))


def test_eleven_choices_are_ordered_by_number_not_text(tmp_path):
    """gen_args_10 comes after gen_args_9 (as text it would come after gen_args_1)."""
    record = {
        "doc_id": 0,
        "target": 10,
        "arguments": {f"gen_args_{j}": {"arg_0": "q", "arg_1": f" c{j}"} for j in range(11)},
        "filtered_resps": [[str(-float(j)), "False"] for j in range(11)],
    }
    path = tmp_path / "samples_eleven_2026-01-01T00-00-00.000000.jsonl"
    path.write_text(json.dumps(record) + "\n")
    preds = read_predictions(str(path))
    assert preds.k == 11 and preds.labels.tolist() == [10]
    np.testing.assert_array_equal(np.asarray(preds.scores)[0], -np.arange(11.0))


def test_an_empty_choice_is_refused_under_acc_norm(run, tmp_path):
    def empty(record):
        record["arguments"]["gen_args_0"]["arg_1"] = " "
        record.pop("acc_norm", None)

    code, _, err = run("evaluate", _rewrite(tmp_path, empty), "--scores", "acc_norm", "--no-vece")
    assert code == 2 and "an empty choice" in err


def test_a_file_named_otherwise_takes_its_name_as_the_task(tmp_path):
    path = tmp_path / "samples_mytask.jsonl"
    path.write_text(open(_samples("toy_mc_easy")).read())
    ((task, found),) = harness_samples.sample_files(str(tmp_path))
    assert task == "mytask" and found == str(path)


def test_the_newest_results_file_gives_the_delimiter(tmp_path):
    for name, delimiter in (("results_2026-01-01T00-00-00.json", " old"), ("results_2026-02-01T00-00-00.json", " new")):
        (tmp_path / name).write_text(json.dumps({"configs": {"t": {"target_delimiter": delimiter}}}))
    assert harness_samples._target_delimiter(str(tmp_path / "x.jsonl"), "t") == " new"


def test_the_library_groups_a_results_directory_as_the_command_line_does():
    report = calib.evaluate(read_predictions(str(RUN)), metrics=["accuracy"])
    assert sorted(report.group_values) == sorted(TASKS)
    assert report.group_values["toy_mc_hard"]["accuracy"] == pytest.approx(_results()["toy_mc_hard"]["acc,none"], abs=1e-12)


def test_diagnose_takes_padded_choices_for_absent_not_for_the_models_scores(tmp_path):
    """The results directory mixes tasks of 2 to 5 choices: the rows of fewer are padded 1000
    below their least log-likelihood (probability 0). Those entries are the reader's, marked
    absent: diagnose neither reports logits of |z| ~ 1000 nor rows holding a probability of exactly
    0, which on the unpadded entries there are none of."""
    from calib.diagnose import diagnose
    from calib.evaluation.request import EvaluationRequest

    preds = read_predictions(str(RUN))
    assert preds.absent is not None and preds.absent.sum() > 0
    assert np.all(preds.all_logits()[preds.absent] < -500)
    found = diagnose(preds, EvaluationRequest.of(metrics=["accuracy"]))
    said = " ".join(finding["text"] for finding in found.findings)
    assert "logits reach" not in said and "exactly 0 or 1" not in said
