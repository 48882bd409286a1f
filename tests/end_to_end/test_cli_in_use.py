"""The command line as people use it: label columns from pandas exports, CI-log renderings, file
modes under the umask, gate messages, usage errors, `fit --json`."""

import json
import os
import re
import stat
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import SAMPLE

from calib.reporting.text import format_change, format_value

TEST = SAMPLE / "cifar10_test.npz"


@pytest.fixture(scope="module")
def rows():
    data = np.load(TEST)
    return data["logits"][:600], data["labels"][:600]


def _parquet(path, logits, **columns):
    table = pa.table({"logits": pa.array(list(logits.astype(np.float32))), **columns})
    pq.write_table(table, path)
    return path


def _accuracy(run, *args):
    code, out, err = run("evaluate", *args, "--no-vece", "--metrics", "accuracy", "--json", "-")
    assert code == 0, err
    return json.loads(out)["metrics"]["accuracy"]["value"]


# labels ------------------------------------------------------------------------------------------


def test_label_column_names_in_parquet_and_npz(tmp_path, run, rows):
    logits, labels = rows
    expected = float(np.mean(logits.argmax(1) == labels))
    for name in ("label", "labels"):
        assert _accuracy(run, _parquet(tmp_path / f"{name}.parquet", logits, **{name: labels})) == expected
        np.savez(tmp_path / f"{name}.npz", logits=logits, **{name: labels})
        assert _accuracy(run, tmp_path / f"{name}.npz") == expected
    target = _parquet(tmp_path / "target.parquet", logits, target=labels, id=np.arange(600))
    code, _, err = run("evaluate", target, "--no-vece")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "found logits, target, id" in err and "--label-column NAME" in err
    assert _accuracy(run, target, "--label-column", "target") == expected
    code, _, err = run("evaluate", target, "--no-vece", "--label-column", "y")
    assert code == 2 and "no array or column named 'y' (found logits, target, id)" in err
    np.savez(tmp_path / "target.npz", logits=logits, target=labels)
    assert _accuracy(run, tmp_path / "target.npz", "--label-column", "target") == expected
    both = _parquet(tmp_path / "both.parquet", logits, label=labels, labels=labels)
    code, _, err = run("evaluate", both, "--no-vece")
    assert code == 2 and "both 'label' and 'labels'" in err


def test_pandas_float_labels_are_accepted_and_bad_ones_name_their_row(tmp_path, run, rows):
    """pandas stores an integer column as float64 once it held a NaN: 1.0, 2.0 are labels."""
    logits, labels = rows
    expected = float(np.mean(logits.argmax(1) == labels))
    floats = _parquet(tmp_path / "floats.parquet", logits, label=labels.astype(np.float64))
    assert _accuracy(run, floats) == expected
    missing = labels.astype(np.float64)
    missing[17] = np.nan
    code, _, err = run("evaluate", _parquet(tmp_path / "nan.parquet", logits, label=missing), "--no-vece")
    assert code == 2 and "row 17 has no label" in err
    nulls = pa.array([None if i == 5 else int(v) for i, v in enumerate(labels)], type=pa.int64())
    code, _, err = run("evaluate", _parquet(tmp_path / "null.parquet", logits, label=nulls), "--no-vece")
    assert code == 2 and "row 5 has no label" in err
    fractional = labels.astype(np.float64)
    fractional[3] = 2.5
    code, _, err = run("evaluate", _parquet(tmp_path / "frac.parquet", logits, label=fractional), "--no-vece")
    assert code == 2 and "row 3 has label 2.5, not a class index" in err


def test_labels_file_in_every_format(tmp_path, run, rows):
    logits, labels = rows
    expected = float(np.mean(logits.argmax(1) == labels))
    np.save(tmp_path / "scores.npy", logits)
    scores = tmp_path / "scores.npy"
    (tmp_path / "plain.txt").write_text("".join(f"{v}\n" for v in labels))
    (tmp_path / "header.csv").write_text("label\n" + "".join(f"{v}.0\n" for v in labels))
    (tmp_path / "wide.csv").write_text("id,target\n" + "".join(f"{i},{v}\n" for i, v in enumerate(labels)))
    pq.write_table(pa.table({"y": labels}), tmp_path / "one.parquet")
    pq.write_table(pa.table({"id": np.arange(600), "target": labels}), tmp_path / "two.parquet")
    np.savez(tmp_path / "labels.npz", labels=labels)
    for labels_file, extra in [
        ("plain.txt", []),
        ("header.csv", []),
        ("wide.csv", ["--label-column", "target"]),
        ("one.parquet", []),
        ("two.parquet", ["--label-column", "target"]),
        ("labels.npz", []),
    ]:
        assert _accuracy(run, scores, "--labels", tmp_path / labels_file, *extra) == expected, labels_file
    code, _, err = run("evaluate", scores, "--no-vece", "--labels", tmp_path / "wide.csv")
    assert code == 2 and "which array or column holds the labels? (found id, target)" in err
    code, _, err = run("evaluate", scores, "--no-vece", "--labels", tmp_path / "two.parquet")
    assert code == 2 and "(found id, target)" in err and "--label-column NAME" in err
    (tmp_path / "bad.csv").write_text("label\n1\n\n2\ncat\n")
    code, _, err = run("evaluate", scores, "--no-vece", "--labels", tmp_path / "bad.csv")
    assert code == 2 and "line 4: label 'cat' is not a class index" in err


# renderings ----------------------------------------------------------------------------------------


def _cli(*args, env=None, stdin=None):
    """The installed command in a child process: stdout is a pipe (not a terminal) unless
    FORCE_COLOR is set in ``env``."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS", "TTY_COMPATIBLE")}
    full_env.update(env or {})
    done = subprocess.run(
        [sys.executable, "-m", "calib", *map(str, args)], capture_output=True, text=True, env=full_env, input=stdin, timeout=300
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    path = tmp_path_factory.mktemp("bundle") / "ts"
    code, _, err = _cli("fit", SAMPLE / "cifar10_val.npz", "--method", "ts", "--out", path)
    assert code == 0, err
    return path


def _cells(report):
    """Every value cell the table must show in full, from the JSON report."""
    cells = []
    for key, entry in report["metrics"].items():
        old = report["uncalibrated_metrics"][key]["value"]
        cells += [format_value(old), format_value(entry["value"]), format_change(entry["value"] - old)]
        if "ci" in entry:
            cells.append(f"[{format_value(entry['ci'][0])}, {format_value(entry['ci'][1])}]")
    return cells


@pytest.mark.parametrize("columns", ["60", "80"])
def test_ci_log_rendering_keeps_every_digit(tmp_path, bundle, columns):
    args = ["evaluate", TEST, "--bundle", bundle, "--bootstrap", "50", "--vece-recalibrator", "ts"]
    code, out, err = _cli(*args, "--json", tmp_path / "r.json", env={"COLUMNS": columns})
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    lines = out.splitlines()
    assert lines[0] == f"calib evaluate: {TEST} (10000 x 10, logits)"  # the title is one line, never wrapped
    assert all(line == line.rstrip() for line in lines) and "…" not in out and "│" not in out
    for key in report["metrics"]:
        row = next(line for line in lines if line.split("  ")[0] == key)
        cells = _cells({**report, "metrics": {key: report["metrics"][key]}})
        assert all(cell in row for cell in cells), (row, cells)
    assert "15 bins" in out and "mass in [0.99, 0.995]" in out  # settings too


@pytest.mark.parametrize("columns", ["60", "80", "140"])
def test_terminal_rendering_never_cuts_a_number(tmp_path, bundle, columns):
    args = ["evaluate", TEST, "--bundle", bundle, "--bootstrap", "50", "--vece-recalibrator", "ts"]
    code, out, err = _cli(*args, "--json", tmp_path / "r.json", env={"COLUMNS": columns, "FORCE_COLOR": "1"})
    assert code == 0, err
    text = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= max(int(columns), 110)
    report = json.loads((tmp_path / "r.json").read_text())
    for cell in _cells(report):
        assert cell in text, cell
    assert "15 bins" in text


def test_markdown_format(bundle):
    code, out, _ = _cli("evaluate", TEST, "--no-vece", "--bundle", bundle, "--metrics", "ece,cmce", "--format", "md")
    assert code == 0
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| metric"))
    assert lines[header] == "| metric | uncalibrated | calibrated | change | settings |"
    assert lines[header + 1] == "|---|---:|---:|---:|---|"
    assert lines[header + 2].startswith("| ece | 0.02564 | 0.01294 | -0.0127 | 15 bins |")
    code, _, err = _cli("evaluate", TEST, "--no-vece", "--format", "html")
    assert code == 2 and "--format must be one of auto, table, text, md" in err


def test_one_precision_rule_in_every_table(bundle):
    """4 significant digits in evaluate, fit and diagnose alike."""
    code, out, _ = _cli("fit", SAMPLE / "cifar10_val.npz", "--method", "ts", "--out", bundle, "--force")
    assert code == 0 and re.search(r"^temperature\s+1\.171$", out, re.M)
    code, out, _ = _cli("diagnose", TEST)
    assert code == 0
    numbers = re.findall(r"(?<![\w.\[])[-+]?\d+\.\d+(?:e[-+]\d+)?", out.split("worst classes")[1])
    assert numbers and all(len(re.sub(r"[-+.]|e.*|^0\.0*", "", n)) <= 4 for n in numbers)


def test_vece_split_is_marked_when_clipped(tmp_path, run):
    """Over-confident rows (T = 0.9) with the beta recalibrator: the raw under-confidence estimate
    is below 0, so vece_over (clipped from nothing) exceeds vece_top_l1; the table says why."""
    rng = np.random.default_rng(0)
    truth = rng.dirichlet(np.ones(5), size=2000)
    labels = np.array([rng.choice(5, p=p) for p in truth])
    np.savez(tmp_path / "over.npz", logits=np.log(truth) / 0.9, labels=labels)
    args = ["evaluate", tmp_path / "over.npz", "--metrics", "vece_top_l1,vece_over,vece_under", "--vece-recalibrator", "beta"]
    code, json_out, _ = run(*args, "--json", "-")
    metrics = json.loads(json_out)["metrics"]
    raw = {key: entry["unclipped"] for key, entry in metrics.items()}
    assert raw["vece_over"] + raw["vece_under"] == pytest.approx(raw["vece_top_l1"], abs=1e-12)
    assert raw["vece_under"] < 0 and metrics["vece_under"]["value"] == 0.0
    assert metrics["vece_over"]["value"] > metrics["vece_top_l1"]["value"]  # what looked wrong
    code, out, _ = run(*args)
    row = next(line for line in out.splitlines() if line.startswith("vece_under"))
    assert row.split()[1] == "0" and f"clipped at 0 from raw {format_value(raw['vece_under'])}" in row
    assert "the raw vece_over + vece_under = the raw vece_top_l1" in out
    for key in ("vece_top_l1", "vece_over"):
        assert "clipped" not in next(line for line in out.splitlines() if line.startswith(key + " "))
    code, out, _ = run("evaluate", TEST, "--metrics", "vece_over,vece_under", "--vece-recalibrator", "ts")
    assert "clipped" not in out  # raw under-confidence -0.0 on CIFAR-10: nothing to mark


# files ---------------------------------------------------------------------------------------------


#: Runs each command of argv[1] (JSON) in one process under umask 022.
UMASK_SCRIPT = """
import json, os, sys
os.umask(0o022)
from calib.cli.app import main
for args in json.loads(sys.argv[1]):
    sys.argv = ["calib", *args]
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, (args, exc.code)
"""


def test_output_files_honour_the_umask(tmp_path, bundle):
    outputs = tmp_path / "out"
    outputs.mkdir()
    val = SAMPLE / "cifar10_val.npz"
    commands = [
        ["apply", bundle, TEST, "--out", outputs / "p.npz"],
        ["apply", bundle, TEST, "--out", outputs / "p.npy"],
        ["evaluate", TEST, "--no-vece", "--json", outputs / "r.json", "--emit-state", outputs / "s.npz"],
        ["diagnose", TEST, "--out", outputs / "diag"],
        ["fit", val, "-m", "ts", "--out", outputs / "bundle", "--json", outputs / "f.json"],
    ]
    script = UMASK_SCRIPT
    argv = json.dumps([[str(a) for a in command] for command in commands])
    done = subprocess.run([sys.executable, "-c", script, argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    modes = {}
    for folder, _, files in os.walk(outputs):
        for name in files:
            modes[name] = stat.S_IMODE(os.stat(os.path.join(folder, name)).st_mode)
        modes[os.path.basename(folder)] = stat.S_IMODE(os.stat(folder).st_mode)
    assert {"p.npz", "p.npy", "r.json", "s.npz", "report.html", "manifest.json", "f.json"} <= set(modes)
    files = {name: mode for name, mode in modes.items() if "." in name}
    assert set(files.values()) == {0o644}, files
    assert modes["bundle"] == 0o755 and modes["diag"] == 0o755


def test_binary_output_to_a_terminal_is_refused(run, bundle, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    code, _, err = run("apply", bundle, TEST, "--out", "-")
    assert code == 2 and "which is a terminal here" in err


# gates ---------------------------------------------------------------------------------------------


def test_gate_messages_give_value_threshold_and_what_failed(tmp_path, run):
    common = ["--no-vece", "--metrics", "ece,cmce", "--ignore-noise"]
    code, _, _ = run("evaluate", TEST, *common, "--json", tmp_path / "base.json")
    assert code == 0
    np.savez(tmp_path / "worse.npz", logits=np.load(TEST)["logits"] * 1.6, labels=np.load(TEST)["labels"])
    code, out, err = run(
        "evaluate", tmp_path / "worse.npz", *common, "--baseline", tmp_path / "base.json", "--max-increase", "cmce=0.001"
    )
    assert code == 1
    failed = next(line for line in out.splitlines() if line.startswith("gate FAIL"))
    assert re.fullmatch(
        r"gate FAIL: cmce rose by [0-9.]+ \(\+[0-9.]+%\) \(0\.00269 -> [0-9.]+\), more than the allowed 0\.001", failed
    )
    assert err.strip().splitlines()[-1] == "calib: error: gate failed: " + failed.removeprefix("gate FAIL: ")
    code, out, _ = run("evaluate", TEST, *common, "--fail-if", "cmce>=0.002689")
    assert code == 1 and "gate FAIL: cmce = 0.00269 >= 0.002689 (the gate fails when cmce >= 0.002689)" in out
    # cmce = 0.0026899...: as many digits as it takes to tell the value from the threshold
    code, out, _ = run("evaluate", TEST, *common, "--fail-if", "cmce>=0.00269")
    assert code == 0 and "gate pass: cmce = 0.0026899 < 0.00269 (fails when >= 0.00269)" in out


def test_gates_on_vece_contradict_no_vece(run):
    code, _, err = run("evaluate", TEST, "--no-vece", "--fail-if", "vece_l1>0.01")
    assert code == 2 and "vece_l1 is a V-ECE value, which is switched off; drop one of the two (--no-vece)" in err
    code, _, err = run("evaluate", TEST, "--no-vece", "--metrics", "ece,vece_over")
    assert code == 2 and "vece_over" in err


def test_baseline_from_other_input(tmp_path, run):
    common = ["--no-vece", "--metrics", "ece", "--bootstrap", "20"]
    code, _, _ = run("evaluate", TEST, *common, "--json", tmp_path / "base.json")
    data = np.load(TEST)
    np.savez(tmp_path / "half.npz", logits=data["logits"][:5000], labels=data["labels"][:5000])
    gate = ["--baseline", tmp_path / "base.json", "--max-increase", "ece=0.01"]
    code, out, err = run("evaluate", tmp_path / "half.npz", *common, *gate)
    assert code == 0 and "the baseline report covers 10000 rows" in err and "this run 5000 rows" in err
    code, _, err = run("evaluate", tmp_path / "half.npz", *common, *gate, "--paired")
    assert code == 2 and "a paired comparison needs the same rows" in err
    shuffled = np.random.default_rng(0).permutation(10000)
    np.savez(tmp_path / "other.npz", logits=data["logits"], labels=data["labels"][shuffled])
    code, out, err = run("evaluate", tmp_path / "other.npz", *common, *gate)
    assert "as many rows but other labels" in err


# usage ---------------------------------------------------------------------------------------------


def test_usage_errors_are_one_line_exit_2():
    for args, words in [
        (["fit"], ["Missing argument 'PRED'", "calib fit --help"]),
        (["evaluate", TEST, "--bogus"], ["No such option: --bogus"]),
        (["evaluate", TEST, "--bins", "x"], ["positive number of bins or 'auto'; got 'x'", "--bins auto"]),
        (["frobnicate"], ["No such command 'frobnicate'"]),
    ]:
        code, out, err = _cli(*args)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (args, err)
        assert err.startswith("calib: error: ") and all(word in err for word in words), err
    code, out, _ = _cli("fit", "--help")
    assert code == 0 and "Usage: calib fit [OPTIONS] PRED" in out and "{" not in out.split("Usage:")[1].splitlines()[0]
    code, out, _ = _cli("apply", "--help")
    assert "Usage: calib apply [OPTIONS] BUNDLE PRED" in out
    code, out, _ = _cli("--version")
    assert code == 0 and out.startswith("calib ")


def test_fit_json_and_summary_on_stdout(tmp_path, run):
    code, out, err = run("fit", SAMPLE / "cifar10_val.npz", "--method", "ts", "--out", tmp_path / "b", "--json", "-")
    assert code == 0
    summary = json.loads(out)
    assert summary["method"] == "ts" and summary["input"]["n"] == 5000 and summary["bundle"] == str(tmp_path / "b")
    assert summary["fit_report"]["temperature"] == pytest.approx(1.1714, abs=1e-4)
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["fit_report"] == summary["fit_report"]
    code, out, _ = run("fit", SAMPLE / "cifar10_val.npz", "--method", "ts", "--out", tmp_path / "b", "--force")
    assert code == 0 and out.startswith("calib fit: ts\n") and "temperature" in out
    code, _, err = run(
        "fit", SAMPLE / "cifar10_val.npz", "-m", "ts", "--out", tmp_path / "c", "--json", SAMPLE / "cifar10_val.npz"
    )
    assert code == 2 and "is an input of this command" in err


def test_progress_line_without_a_terminal(tmp_path):
    code, _, err = _cli("evaluate", TEST, "--metrics", "vece_l1", "--vece-max-rows", "800")
    assert code == 0
    assert re.search(r"^V-ECE: 20 boosted fits, about \d+ s$", err, re.M), err
    code, _, err = _cli("evaluate", SAMPLE / "cifar10_val.npz", "--vece-max-rows", "800")
    assert re.search(r"^V-ECE: 20 boosted fits, about \d+ s; --no-vece skips V-ECE$", err, re.M), err
