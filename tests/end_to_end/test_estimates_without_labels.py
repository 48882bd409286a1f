"""`calib evaluate` on rows without labels (docs/estimation.md): estimates from a bundle or a
reference file, partial labels, gates on estimates, the JSON and HTML outputs, and every bad input in
one line with exit 2."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import SAMPLE


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("estimates")
    test = np.load(SAMPLE / "cifar10_test.npz")
    logits, labels = test["logits"][:3000], test["labels"][:3000]
    np.save(folder / "unlabelled.npy", logits)
    partial = labels.astype(np.float64)
    partial[300:] = np.nan
    pq.write_table(
        pa.table({"logits": list(logits), "label": pa.array(partial, mask=np.isnan(partial))}), folder / "partial.parquet"
    )
    np.savez(folder / "minus_one.npz", logits=logits, labels=np.where(np.arange(3000) < 300, labels, -1))
    np.savez(folder / "decayed.npz", logits=2 * logits, labels=np.where(np.arange(3000) < 300, labels, -1))
    np.savez(folder / "five.npz", logits=logits[:, :5], labels=labels % 5)
    return folder


@pytest.fixture(scope="module")
def bundle(files):
    import calib

    val = np.load(SAMPLE / "cifar10_val.npz")
    path = files / "ts"
    calib.calibrator("ts").fit(val["logits"], val["labels"]).save(str(path))
    five = files / "ts5"
    calib.calibrator("ts").fit(val["logits"][:, :5], val["labels"] % 5).save(str(five))
    return path, five


def test_estimates_from_a_bundle_in_json_and_html(run, files, bundle, tmp_path):
    code, out, err = run(
        "evaluate", files / "unlabelled.npy", "--bundle", bundle[0], "--json", "-", "--html", tmp_path / "e.html"
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["reliable"] is True and report["input"]["unlabelled"] == 3000
    accuracy = report["estimates"]["est_accuracy"]
    assert accuracy["interval"][0] < accuracy["value"] < accuracy["interval"][1]
    truth = np.mean(np.load(SAMPLE / "cifar10_test.npz")["labels"][:3000] == np.load(files / "unlabelled.npy").argmax(axis=1))
    assert accuracy["interval"][0] <= truth <= accuracy["interval"][1]
    page = (tmp_path / "e.html").read_text()
    assert "Estimates without labels" in page and "Class priors" in page


def test_a_reference_file_fits_the_map(run, files):
    code, out, err = run("evaluate", files / "unlabelled.npy", "--reference", SAMPLE / "cifar10_val.npz")
    assert code == 0, err
    assert "accuracy" in out and "ts fitted on 5000 rows" in err


@pytest.mark.parametrize("name, extra", [("partial.parquet", []), ("minus_one.npz", ["--missing-label", "-1"])])
def test_partial_labels_are_evaluated_and_the_rest_estimated(run, files, bundle, name, extra):
    code, out, err = run(
        "evaluate",
        files / name,
        "--bundle",
        bundle[0],
        "--no-vece",
        *extra,
        "--fail-if",
        "accuracy<0.5",
        "--fail-if",
        "est_accuracy<0.5",
    )
    assert code == 0, err
    assert "its 300 labelled rows" in out and "3000 rows, 300 of them labelled" in out
    assert "gate pass: est_accuracy" in out


def test_a_decayed_map_is_unreliable_and_its_gate_can_fail(run, files, bundle):
    code, out, _ = run("evaluate", files / "decayed.npz", "--bundle", bundle[0], "--no-vece", "--missing-label", "-1")
    assert code == 0 and "UNRELIABLE" in out and "no longer holds" in out
    code, out, err = run(
        "evaluate", files / "decayed.npz", "--bundle", bundle[0], "--no-vece", "--missing-label", "-1",
        "--fail-if", "est_accuracy<0.5", "--inconclusive", "fail",
    )  # fmt: skip
    assert code == 1 and "inconclusive as the estimate is unreliable" in out and "gate failed" in err


@pytest.mark.parametrize(
    "args, words",
    [
        (["--fail-if", "est_accuracy<0.9"], "need a calibration map"),
        (["--bundle", "{five}"], "K = 5"),
        (["--bundle", "{ts}", "--fail-if", "ece>0.1"], "reads labels and no row"),
        (["--bundle", "{ts}", "--reference", "{val}"], "give one"),
        (["--bundle", "{ts}", "--estimator", "plain"], "debiased, cbpe"),
        (["--missing-label", "-1"], "need a calibration map"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(run, files, bundle, args, words):
    given = [a.format(five=bundle[1], ts=bundle[0], val=SAMPLE / "cifar10_val.npz") for a in args]
    code, out, err = run("evaluate", files / "unlabelled.npy", *given)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and words in err


def test_no_map_and_no_labels_says_so(run, files):
    code, _, err = run("evaluate", files / "unlabelled.npy")
    assert code == 2 and "no labels" in err


def test_stated_confidences_without_labels_are_refused_not_misread(run, tmp_path):
    """Rows of answers (a confidence column) with some correctness missing: the estimates read each
    row's most probable class, which is not an answer's, so they are refused in one line."""
    rng = np.random.default_rng(0)
    confidence = rng.uniform(0, 1, 300)
    correct = (rng.uniform(size=300) < confidence).astype(float)
    path = tmp_path / "judge.csv"
    path.write_text("confidence,correct\n" + "".join(f"{c},{int(y)}\n" for c, y in zip(confidence, correct)))
    assert run("fit", path, "--confidence-column", "confidence", "--method", "ts", "--out", tmp_path / "b")[0] == 0
    correct[:50] = np.nan
    (tmp_path / "part.csv").write_text(
        "confidence,correct\n" + "".join(f"{c},{'' if np.isnan(y) else int(y)}\n" for c, y in zip(confidence, correct))
    )
    code, _, err = run("evaluate", tmp_path / "part.csv", "--confidence-column", "confidence", "--bundle", tmp_path / "b")
    assert code == 2 and "stated confidences in answers are not estimated without labels" in err
