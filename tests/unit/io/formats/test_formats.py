"""Text on pipes and confidence-and-correctness files: CSV, TSV and JSON lines on stdin give the
numbers their files give; --input-format names a format whatever the name; a confidence column
against a 0/1 (or true/false) correctness column is a binary problem."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import SAMPLE

METRICS = "accuracy,ece,nll,cmce"


def _cifar_rows(n=300):
    data = np.load(SAMPLE / "cifar10_test.npz")
    from scipy.special import softmax

    return softmax(data["logits"][:n].astype(np.float64), axis=1), data["labels"][:n]


def _write(tmp_path, suffix: str) -> bytes:
    probs, labels = _cifar_rows()
    path = tmp_path / f"p{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps({"probs": p.tolist(), "label": int(y)}) + "\n" for p, y in zip(probs, labels)))
    else:
        sep = "\t" if suffix == ".tsv" else ","
        header = sep.join([*(f"prob_{k}" for k in range(10)), "label"])
        lines = [sep.join([*(repr(float(v)) for v in p), str(int(y))]) for p, y in zip(probs, labels)]
        path.write_text("\n".join([header, *lines]) + "\n")
    return path.read_bytes()


def _evaluate(source, stdin=None, *extra):
    done = subprocess.run(
        [sys.executable, "-m", "calib", "evaluate", source, "--no-vece", "--metrics", METRICS, "--json", "-", *extra],
        input=stdin,
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".tsv"])
def test_text_on_stdin_gives_the_numbers_of_the_file(tmp_path, suffix):
    """`cat x.jsonl | calib evaluate -` (and a CSV, a TSV): sniffed, the same metrics and sha256."""
    stream = _write(tmp_path, suffix)
    from_file, from_stdin = _evaluate(str(tmp_path / f"p{suffix}")), _evaluate("-", stream)
    assert from_stdin["metrics"] == from_file["metrics"]
    assert from_stdin["input"]["sha256"] == from_file["input"]["sha256"]


def test_input_format_names_the_format_of_a_stream_or_a_misnamed_file(tmp_path):
    stream = _write(tmp_path, ".tsv")
    (tmp_path / "p.txt").write_bytes(stream)
    reference = _evaluate(str(tmp_path / "p.tsv"))
    assert _evaluate("-", stream, "--input-format", "tsv")["metrics"] == reference["metrics"]
    assert _evaluate(str(tmp_path / "p.txt"), None, "--input-format", "TSV")["metrics"] == reference["metrics"]


def test_an_unknown_input_format_is_one_line(run, tmp_path):
    _write(tmp_path, ".csv")
    code, _, err = run("evaluate", tmp_path / "p.csv", "--input-format", "xlsx", "--no-vece")
    assert code == 2 and "unknown input format 'xlsx'; expected one of npy, npz" in err and len(err.strip().splitlines()) == 1


def test_sniffing_by_the_first_line():
    from calib.io.formats import DELIMITED, JSON_LINES
    from calib.io.formats import format_of_bytes as sniff

    assert sniff(b'  {"probs": [0.5, 0.5]}\n', "s") == (JSON_LINES, ".jsonl")
    assert sniff(b"prob_0\tprob_1\tlabel\n", "s") == (DELIMITED, ".tsv")
    assert sniff(b"prob_0,prob_1\tx,label\n", "s") == (DELIMITED, ".csv")  # a comma: CSV, whatever else
    assert sniff(b"\xef\xbb\xbfprob_0,label\n", "s") == (DELIMITED, ".csv")  # a byte-order mark
    assert sniff("confiance,corrigé\n".encode()[:12], "s") == (DELIMITED, ".csv")  # cut inside a character


CONFIDENCE = [0.9, 0.8, 0.7, 0.95, 0.3, 0.55]
CORRECT = [1, 0, 1, 1, 0, 1]


def _by_hand(metric: str) -> float:
    """The answers' conventions by hand: P(correct) against correct, each row's answer being class 1
    whatever its confidence (0.3 included): accuracy the share of right answers, the top-label ECE
    that of the stated confidence (15 bins, each row alone in its bin here)."""
    p, y = np.array(CONFIDENCE), np.array(CORRECT)
    if metric == "brier_pos":
        return float(np.mean((p - y) ** 2))
    if metric == "accuracy":
        return float(np.mean(y))
    if metric == "ece":
        return float(np.mean(np.abs(p - y)))
    raise KeyError(metric)


@pytest.mark.parametrize("layout", ["csv", "jsonl-bool", "jsonl-int"])
def test_a_confidence_column_against_a_correct_column_is_a_binary_problem(run, tmp_path, layout):
    if layout == "csv":
        path = tmp_path / "judge.csv"
        path.write_text(
            "question,confidence,correct\n" + "".join(f"q{i},{c},{y}\n" for i, (c, y) in enumerate(zip(CONFIDENCE, CORRECT)))
        )
    else:
        path = tmp_path / "judge.jsonl"
        value = bool if layout == "jsonl-bool" else int
        path.write_text(
            "".join(
                json.dumps({"q": i, "confidence": c, "correct": value(y)}) + "\n"
                for i, (c, y) in enumerate(zip(CONFIDENCE, CORRECT))
            )
        )
    code, out, err = run(
        "evaluate", path, "--confidence-column", "confidence", "--metrics", "accuracy,brier_pos,ece", "--json", "-"
    )
    assert code == 0, err
    metrics = json.loads(out)["metrics"]
    for key in ("accuracy", "brier_pos", "ece"):
        assert metrics[key]["value"] == pytest.approx(_by_hand(key), abs=1e-15)
    assert "confidence column 'confidence' read as P(correct), column 'correct' as correct (1) or not (0)" in err


def test_the_correct_column_is_named_by_correct_column(run, tmp_path):
    path = tmp_path / "judge.csv"
    path.write_text("conf,right\n0.9,1\n0.2,0\n0.6,1\n")
    code, out, err = run(
        "evaluate", path, "--confidence-column", "conf", "--correct-column", "right", "--metrics", "accuracy", "--json", "-"
    )
    assert code == 0, err
    assert json.loads(out)["metrics"]["accuracy"]["value"] == pytest.approx(2 / 3, abs=1e-15)  # the share of right answers
    code, _, err = run("evaluate", path, "--confidence-column", "conf", "--metrics", "accuracy")
    assert code == 2 and "which array or column holds the 0/1 correctness" in err


@pytest.mark.parametrize(
    "rows, says",
    [
        ("90,1\n80,0\n", "holds values up to 90, above 1; if they are percentages, divide them by 100"),
        ("1.5,1\n0.2,0\n", "holds values up to 1.5, above 1"),
        ("-0.5,1\n0.2,0\n", "probabilities must lie in [0, 1]"),
        ("0.9,2\n0.2,0\n", "label"),
    ],
)
def test_a_bad_confidence_file_is_one_line(run, tmp_path, rows, says):
    path = tmp_path / "judge.csv"
    path.write_text("confidence,correct\n" + rows)
    code, _, err = run("evaluate", path, "--confidence-column", "confidence", "--no-vece")
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_the_library_reads_a_confidence_column_as_the_command_line_does(tmp_path):
    from calib.io.readers import read_predictions

    path = tmp_path / "judge.csv"
    path.write_text("confidence,correct\n0.9,1\n0.2,0\n")
    preds = read_predictions(str(path), confidence_column="confidence")
    assert preds.kind == "probs" and preds.k == 2 and preds.labels.tolist() == [1, 0]
