"""The command line end to end, as a user runs it (docs/cli.md)."""

import hashlib
import json
import os
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import reference as ref
from conftest import ROOT, SAMPLE, needs

import calib
from calib.core.numerics import log_softmax


def _json(out):
    return json.loads(out)


def test_done_when_fit_apply_evaluate_cifar100(tmp_path, run, cifar100):
    bundle, out = tmp_path / "B", tmp_path / "p.npy"
    assert run("fit", cifar100["val"], "--method", "ts", "--out", bundle)[0] == 0
    code, _, err = run("apply", bundle, cifar100["test"], "--out", out)
    assert code == 0, err
    code, stdout, err = run("evaluate", "--no-vece", cifar100["test"], "--bundle", bundle, "--json", "-")
    assert code == 0, err
    report = _json(stdout)
    temperature = json.loads((bundle / "params.json").read_text())["temperature"]
    # independent computation of the calibrated metrics from the definitions
    probs = np.exp(log_softmax(cifar100["test_logits"].astype(np.float64) / temperature))
    labels = cifar100["test_labels"]
    assert np.allclose(np.load(out), probs, atol=1e-12, rtol=0)
    m = {k: v["value"] for k, v in report["metrics"].items()}
    assert m["accuracy"] == pytest.approx(np.mean(probs.argmax(1) == labels), abs=1e-12)
    assert m["nll"] == pytest.approx(-np.mean(np.log(probs[np.arange(len(labels)), labels])), abs=1e-6)
    assert m["brier"] == pytest.approx(np.mean(((probs - np.eye(100)[labels]) ** 2).sum(1)), abs=1e-6)
    assert m["ece"] == pytest.approx(ref.ece(probs, labels), abs=1e-6)
    assert m["mce"] == pytest.approx(ref.mce(probs, labels), abs=1e-6)
    subset = slice(0, 400)  # the literal pair-by-pair CMCE is slow: check it on a subset below
    assert m["cw_ece"] == pytest.approx(ref.cw_ece(probs, labels), abs=1e-6)
    assert report["uncalibrated_metrics"]["ece"]["value"] == pytest.approx(
        ref.ece(ref.softmax(cifar100["test_logits"]), labels), abs=1e-6
    )
    np.savez(tmp_path / "sub.npz", probs=probs[subset], labels=labels[subset])
    code, stdout, _ = run("evaluate", "--no-vece", tmp_path / "sub.npz", "--json", "-", "--metrics", "cmce,coverage_0.9_0.92")
    sub = _json(stdout)["metrics"]
    assert sub["cmce"]["value"] == pytest.approx(ref.cmce(probs[subset], labels[subset]), abs=1e-9)
    assert sub["coverage_0.9_0.92"]["value"] == pytest.approx(ref.coverage(probs[subset], labels[subset], 0.9, 0.92), abs=1e-12)
    assert report["input"] == {
        "path": str(cifar100["test"]),
        "kind": "logits",
        "n": 10000,
        "k": 100,
        "sha256": report["input"]["sha256"],
        "labels_sha256": hashlib.sha256(labels.astype(np.int64).tobytes()).hexdigest(),
    }
    assert report["passed"] is True and report["gates"] == []


def test_parquet_and_npy_with_labels_give_the_same_numbers(tmp_path, run, cifar100):
    assert run("fit", cifar100["val"], "--method", "ts", "--out", tmp_path / "B")[0] == 0
    logits, labels = cifar100["test_logits"], cifar100["test_labels"]
    np.save(tmp_path / "t.npy", logits)
    (tmp_path / "y.txt").write_text("\n".join(map(str, labels)))
    fixed = pa.FixedSizeListArray.from_arrays(pa.array(logits.reshape(-1)), 100)
    pq.write_table(pa.table({"row_id": np.arange(len(labels)), "logits": fixed, "label": labels}), tmp_path / "t.parquet")
    reports = [
        _json(run("evaluate", "--no-vece", cifar100["test"], "--bundle", tmp_path / "B", "--json", "-")[1]),
        _json(
            run(
                "evaluate",
                "--no-vece",
                tmp_path / "t.npy",
                "--labels",
                tmp_path / "y.txt",
                "--bundle",
                tmp_path / "B",
                "--json",
                "-",
            )[1]
        ),
        _json(run("evaluate", "--no-vece", tmp_path / "t.parquet", "--bundle", tmp_path / "B", "--json", "-")[1]),
    ]
    assert reports[0]["metrics"] == reports[1]["metrics"] == reports[2]["metrics"]
    # apply carries parquet columns through
    assert run("apply", tmp_path / "B", tmp_path / "t.parquet", "--out", tmp_path / "o.parquet")[0] == 0
    table = pq.read_table(tmp_path / "o.parquet")
    assert table.column("row_id").to_pylist() == list(range(len(labels)))
    assert table.column("label").to_pylist() == labels.tolist()
    assert "probs" in table.column_names


def test_gates_and_exit_codes(tmp_path, run):
    test = SAMPLE / "cifar10_test.npz"
    code, out, err = run("evaluate", "--no-vece", test, "--fail-if", "cmce>0.5", "--json", tmp_path / "r.json")
    assert code == 0 and "gate pass" in out
    gates = ["--fail-if", "cmce>0.0001", "--fail-if", "accuracy<0.5"]
    code, out, err = run("evaluate", "--no-vece", test, *gates, "--ignore-noise", "--json", tmp_path / "r2.json")
    assert code == 1 and "gate failed: cmce = 0.00269 > 0.0001 (the gate fails when cmce > 0.0001)" in err
    assert "gate pass: accuracy = 0.9452 >= 0.5 (fails when < 0.5)" in out
    # by default the gates read the ends of the bootstrap's 95% interval, and say which end decided
    code, out, err = run("evaluate", "--no-vece", test, *gates)
    assert code == 1 and re.search(
        r"gate FAIL: cmce = 0.00269; less its resolution floor 0.00[0-9]+, 0.00[0-9]+ > 0.0001 \(", out
    )
    assert re.search(
        r"gate pass: accuracy = 0.9452, the lower end of its 95% interval 0.9[0-9]+ >= 0.5 \(fails when < 0.5\)", out
    )
    report = json.loads((tmp_path / "r2.json").read_text())  # written even when a gate fails
    assert report["passed"] is False and [g["passed"] for g in report["gates"]] == [False, True]
    # a gate on a metric not in --metrics is computed anyway
    code, out, _ = run("evaluate", "--no-vece", test, "--metrics", "accuracy", "--fail-if", "ece>0.5", "--json", "-")
    assert code == 0 and "ece" in _json(out)["metrics"]


def test_baseline_gate(tmp_path, run):
    val, test = SAMPLE / "cifar10_val.npz", SAMPLE / "cifar10_test.npz"
    assert run("evaluate", "--no-vece", test, "--json", tmp_path / "base.json")[0] == 0
    assert run("fit", val, "--method", "ts", "--out", tmp_path / "B")[0] == 0
    code, out, _ = run(
        "evaluate",
        "--no-vece",
        test,
        "--bundle",
        tmp_path / "B",
        "--baseline",
        tmp_path / "base.json",
        "--max-increase",
        "cmce=0.001",
        "--ignore-noise",
        "--json",
        "-",
    )
    gate = _json(out)["gates"][0]
    base = json.loads((tmp_path / "base.json").read_text())["metrics"]["cmce"]["value"]
    assert gate["baseline"] == base and gate["increase"] == pytest.approx(gate["value"] - base)
    # the expected outcome from the two CMCE values of the plain-Python definition (tests/reference.py),
    # not from the gate's own numbers; far from the edge, which tests/guarantees/test_boundaries.py pins
    test_data = np.load(test)
    before = ref.cmce(ref.softmax(test_data["logits"]), test_data["labels"])
    after = ref.cmce(calib.load(str(tmp_path / "B")).predict_proba(test_data["logits"]), test_data["labels"])
    assert base == pytest.approx(before, rel=1e-9) and gate["value"] == pytest.approx(after, rel=1e-9)
    assert abs((after - before) - 0.001) > 1e-4
    assert code == (1 if after - before > 0.001 else 0)
    # an impossible budget fails: the same file against itself with a negative allowance
    code, _, err = run("evaluate", "--no-vece", test, "--baseline", tmp_path / "base.json", "--max-increase", "cmce=-1")
    assert code == 1
    # different settings are not comparable
    code, _, err = run(
        "evaluate", "--no-vece", test, "--cmce-bins", "10", "--baseline", tmp_path / "base.json", "--max-increase", "cmce=1"
    )
    assert code == 2 and "not comparable" in err


def test_table_output_and_methods(run):
    code, out, _ = run("evaluate", "--no-vece", SAMPLE / "cifar10_test.npz")
    assert code == 0 and "cmce" in out and "coverage_0.99_0.995" in out
    code, out, _ = run("methods")
    assert code == 0
    # every registered calibrator and metric key starts a row of its table (a name inside another
    # name's row, "ts" in "cmce-ts", does not count)
    from calib import CALIBRATORS, METRICS

    first_cells = {line.split("  ")[0].strip() for line in out.splitlines()}
    assert set(CALIBRATORS) <= first_cells and set(METRICS) <= first_cells


@pytest.mark.parametrize("command", ["fit", "apply", "evaluate", "diagnose", "merge-states", "methods", "synth"])
def test_every_command_has_help_with_an_example(run, command):
    code, out, _ = run(command, "--help")
    assert code == 0 and "Example" in out


def test_apply_to_stdout_and_log_probs(tmp_path, run):
    assert run("fit", SAMPLE / "cifar10_val.npz", "--method", "ts", "--out", tmp_path / "B")[0] == 0
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "calib",
            "apply",
            str(tmp_path / "B"),
            str(SAMPLE / "cifar10_test.npz"),
            "--out",
            "-",
            "--what",
            "log-probs",
        ],
        capture_output=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    import io

    log_probs = np.load(io.BytesIO(done.stdout))
    assert log_probs.shape == (10000, 10) and np.allclose(np.exp(log_probs).sum(1), 1)


def test_same_seed_same_bytes(tmp_path, run):
    for name in ("a", "b"):
        assert run("fit", SAMPLE / "cifar10_val.npz", "--method", "ts", "--out", tmp_path / name, "--seed", "3")[0] == 0
        for suffix in ("npy", "npz", "parquet"):
            assert run("apply", tmp_path / name, SAMPLE / "cifar10_test.npz", "--out", tmp_path / f"{name}.{suffix}")[0] == 0
    for suffix in ("npy", "npz", "parquet"):
        assert (tmp_path / f"a.{suffix}").read_bytes() == (tmp_path / f"b.{suffix}").read_bytes()


def test_console_script_starts_without_heavy_imports():
    """Nor the metric stack (calib.evaluation): each command imports what it uses (40 ms when the
    renderers' type annotations loaded it at start)."""
    code = (
        "import sys, calib.cli.app; heavy = {'torch', 'catboost', 'matplotlib', 'pyarrow', 'calib.evaluation'} & set(sys.modules); "
        "print(sorted(heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_an_evaluation_with_a_gate_imports_no_scipy():
    """`calib evaluate X --fail-if ...` on labelled rows: telling the gates on estimates from the
    others imports calib.estimation (12 ms), whose tests of a batch import scipy.stats (0.9 s of a
    3 s start) only when a batch is tested."""
    code = (
        "import sys\n"
        "from calib.cli.app import main\n"
        f"sys.argv = ['calib', 'evaluate', {str(SAMPLE / 'cifar10_test.npz')!r}, '--no-vece', '--fail-if', 'ece>0.5']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


def test_only_the_command_line_sets_the_allocator():
    """The command keeps freed chunk-sized blocks for reuse (glibc's mmap and trim thresholds;
    mallopt says whether it took them); importing the library leaves the allocator alone."""
    import platform

    from calib.core.allocator import keep_freed_memory

    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    code = "import calib, calib.api, calib.pipeline, sys; print(sorted(m for m in sys.modules if 'allocator' in m))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
    assert keep_freed_memory() is glibc


def test_the_command_line_imports_catboost_without_the_notebook_widgets():
    """The command marks IPython and ipywidgets absent before CatBoost's import, which then skips its
    notebook widget and still fits; the library, imported alone, marks nothing."""
    needs("IPython")
    code = (
        "import sys\n"
        "from calib.cli.notebook_imports import skip_notebook_imports\n"
        "marked = skip_notebook_imports()\n"
        "import numpy as np, catboost\n"
        "model = catboost.CatBoostClassifier(iterations=2, verbose=False, allow_writing_files=False)\n"
        "model.fit(np.arange(20.0)[:, None], np.arange(20) % 2)\n"
        "print(marked, sorted(m for m in sys.modules if m.split('.')[0] in ('IPython', 'ipywidgets') and sys.modules[m]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "['IPython', 'ipywidgets'] []", done.stdout + done.stderr
    library = "import calib, calib.api, calib.metrics, sys; print(sys.modules.get('IPython', 'absent'))"
    done = subprocess.run([sys.executable, "-c", library], capture_output=True, text=True)
    assert done.stdout.strip() == "absent", done.stdout + done.stderr


def test_public_api_is_pinned():
    import calib

    assert calib.__all__ == [
        "Bundle",
        "BundleError",
        "CALIBRATORS",
        "CalibError",
        "Calibration",
        "Calibrator",
        "ComparisonReport",
        "ComparisonRequest",
        "EstimationSettings",
        "EvaluationRequest",
        "ExportError",
        "InputError",
        "METRICS",
        "MetricConfig",
        "NotFittedError",
        "Predictions",
        "Report",
        "State",
        "TemperatureScaling",
        "UsageError",
        "__version__",
        "apply_calibrator",
        "calibrator",
        "calibrator_class",
        "compare",
        "estimate",
        "evaluate",
        "fit_calibrator",
        "load",
        "load_calibrator",
        "read_bundle",
        "read_predictions",
        "sample_path",
        "save_calibrator",
        "write_bundle",
    ]
    assert issubclass(calib.InputError, ValueError) and issubclass(calib.UsageError, ValueError)
    # the names load on first use: each resolves, to the object its module defines
    assert all(getattr(calib, name) is not None for name in calib.__all__)
    assert calib.calibrator_class("ts") is calib.TemperatureScaling


def test_brackets_in_paths_are_printed_as_they_are(tmp_path, run, monkeypatch):
    """Printed paths are text, not rich markup: "[red]" or "[x/y]" in a name must not vanish."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a[x").mkdir()
    (tmp_path / "a[x" / "y]").mkdir()
    pred = "a[x/y]/p[red].npz"
    rng = np.random.default_rng(0)
    np.savez(pred, logits=rng.normal(size=(300, 4)), labels=rng.integers(0, 4, 300))
    code, out, err = run("fit", pred, "--method", "ts", "--out", "b[bold]")
    assert code == 0 and "b[bold]" in out
    code, _, err = run("apply", "b[bold]", pred, "--out", "a[x/y]/o[red].npy")
    assert code == 0 and "to a[x/y]/o[red].npy" in err
    code, out, _ = run("evaluate", pred, "--bundle", "b[bold]", "--no-vece", "--metrics", "ece")
    assert code == 0 and "bundle: b[bold]" in out


def test_paths_are_printed_as_they_are_on_a_terminal_too(tmp_path):
    """Where rich styles the output (a terminal; FORCE_COLOR here), "[red]" and emoji codes such as
    ":fire:" in a name are printed as written; without a terminal rich is not even imported."""
    pred = tmp_path / "p[red]:fire:.npz"
    rng = np.random.default_rng(0)
    np.savez(pred, logits=rng.normal(size=(300, 4)), labels=rng.integers(0, 4, 300))
    bundle = tmp_path / "b:smile:[bold]"
    command = [sys.executable, "-m", "calib", "fit", str(pred), "--method", "ts", "--out", str(bundle)]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "FORCE_COLOR": "1"})
    assert done.returncode == 0, done.stderr
    assert "\x1b[" in done.stdout and str(bundle) in done.stdout, done.stdout
    code = (
        "import sys; sys.argv = ['calib', 'evaluate', sys.argv[1], '--no-vece', '--metrics', 'ece']\n"
        "from calib.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('rich loaded' if 'rich' in sys.modules else 'no rich', file=sys.stderr)"
    )
    plain = {key: value for key, value in os.environ.items() if key not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    done = subprocess.run([sys.executable, "-c", code, str(pred)], capture_output=True, text=True, env=plain)
    assert "ece" in done.stdout and done.stderr.strip().endswith("no rich"), done.stdout + done.stderr


def test_calib_evaluate_is_the_function_whatever_was_imported_first():
    """No submodule is named like a public name: importing the evaluation code (as the command line
    and diagnose do) before touching ``calib.evaluate`` must not bind a module there."""
    code = "import calib, calib.evaluation, calib.diagnose, calib.cli.app, inspect\nprint(inspect.isfunction(calib.evaluate))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "True", done.stdout + done.stderr


def test_merged_states_equal_one_run_over_all_rows(tmp_path, run, cifar100):
    keys = "accuracy,nll,brier,ece,mce,cw_ece,cmce,coverage_0.9_0.92,coverage_0.99_0.995,smece,ece_quantile,debiased_ece_sq"
    logits, labels = cifar100["test_logits"], cifar100["test_labels"]
    states = []
    for i, (a, b) in enumerate(((0, 2500), (2500, 7000), (7000, 10000))):
        np.savez(tmp_path / f"p{i}.npz", logits=logits[a:b], labels=labels[a:b])
        states.append(tmp_path / f"s{i}.npz")
        assert (
            run(
                "evaluate",
                "--no-vece",
                tmp_path / f"p{i}.npz",
                "--metrics",
                keys,
                "--emit-state",
                states[-1],
                "--json",
                tmp_path / "x.json",
            )[0]
            == 0
        )
    code, out, err = run("merge-states", *states, "--json", "-")
    assert code == 0, err
    merged = _json(out)
    whole = _json(run("evaluate", "--no-vece", cifar100["test"], "--metrics", keys, "--json", "-")[1])["metrics"]
    assert merged["input"]["n"] == 10000 and len(merged["input"]["merged_from"]) == 3
    for key, entry in whole.items():
        assert merged["metrics"][key]["value"] == pytest.approx(entry["value"], abs=1e-12), key
        assert merged["metrics"][key]["settings"] == entry["settings"]
    run(
        "evaluate",
        "--no-vece",
        tmp_path / "p0.npz",
        "--metrics",
        keys,
        "--bins",
        "10",
        "--emit-state",
        tmp_path / "other.npz",
        "--json",
        tmp_path / "x.json",
    )
    code, _, err = run("merge-states", states[0], tmp_path / "other.npz")
    assert code == 2 and "cannot be merged" in err


def test_evaluate_hashes_its_input_only_for_the_outputs_that_hold_the_digest(tmp_path, run, monkeypatch):
    """The table, a JUnit file and gates show no sha256, so the input is not hashed for them (1 s
    per 200 MB on a CPU without SHA instructions); --json and --emit-state hold it: the file's own
    sha256, from hashlib directly."""
    from calib.io import readers

    rng = np.random.default_rng(0)
    path = tmp_path / "p.npz"
    np.savez(path, logits=rng.normal(size=(300, 4)), labels=rng.integers(0, 4, 300))
    hashed = []
    monkeypatch.setattr(
        readers, "file_sha256", lambda name: hashed.append(name) or readers.hashlib.sha256(open(name, "rb").read()).hexdigest()
    )
    code, _, err = run("evaluate", "--no-vece", path, "--junit", tmp_path / "j.xml", "--fail-if", "ece>1")
    assert code == 0, err
    assert hashed == []
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    code, stdout, err = run("evaluate", "--no-vece", path, "--json", "-")
    assert code == 0, err
    assert json.loads(stdout)["input"]["sha256"] == expected and hashed == [str(path)]
    code, _, err = run("evaluate", "--no-vece", path, "--emit-state", tmp_path / "s.npz")
    assert code == 0, err
    assert len(hashed) == 2


def test_a_fit_on_device_auto_records_the_device_it_trained_on(run, tmp_path):
    """--device auto resolves to the device torch trained on (the CPU here, a GPU where torch sees
    one): the summary never says "auto"."""
    torch = needs("torch")
    data = np.load(SAMPLE / "cifar10_val.npz")
    np.savez(tmp_path / "small.npz", logits=data["logits"][:300], labels=data["labels"][:300])
    code, out, err = run(
        "fit", tmp_path / "small.npz", "--method", "adaptive-ts", "--device", "auto", "--out", tmp_path / "b", "--json", "-"
    )
    assert code == 0, err
    device = json.loads(out)["device"]
    assert device.startswith("cuda") if torch.cuda.is_available() else device == "cpu"


def test_a_device_for_a_method_that_trains_nothing_is_refused(run, tmp_path):
    code, _, err = run("fit", SAMPLE / "cifar10_val.npz", "--method", "ts", "--device", "cuda", "--out", tmp_path / "b")
    assert code == 2 and "method 'ts' trains no model on a device" in err and "--device" in err
    assert len(err.strip().splitlines()) == 1
