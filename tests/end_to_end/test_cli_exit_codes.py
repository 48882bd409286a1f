"""Exit codes as CI reads them: 0 ok, 1 a gate failed, 2 usage or input error, 3 an internal error.
Every command on inputs of 1 to 20 rows ends in 0 or 2 with no traceback (V-ECE below the rows it
needs is reported undefined, saying why), and an internal error anywhere exits 3, never 1."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SAMPLE

import calib.io.readers


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Files of the first n sample test rows, n = 1..20, and a TS bundle fitted on the sample."""
    import calib

    folder = tmp_path_factory.mktemp("tiny")
    data = np.load(SAMPLE / "cifar10_test.npz")
    for n in range(1, 21):
        np.savez(folder / f"n{n}.npz", logits=data["logits"][:n], labels=data["labels"][:n])
    val = np.load(SAMPLE / "cifar10_val.npz")
    calib.calibrator("ts").fit(val["logits"], val["labels"]).save(str(folder / "ts_bundle"))
    return folder


def _commands(folder, n):
    path = folder / f"n{n}.npz"
    return [
        ("evaluate", path),
        ("evaluate", path, "--no-vece", "--bootstrap", "200", "--emit-state", folder / f"s{n}.npz"),
        ("fit", path, "--method", "ts", "--out", folder / f"ts{n}", "--force"),
        ("fit", path, "--method", "mr", "--out", folder / f"mr{n}", "--force"),
        ("fit", path, "--method", "isotonic", "--out", folder / f"iso{n}", "--force"),
        ("apply", folder / "ts_bundle", path, "--out", folder / f"x{n}.npz"),
        ("evaluate", path, "--bundle", folder / "ts_bundle", "--bootstrap", "200", "--fail-if", "ece>0.9"),
        ("diagnose", path, "--out", folder / f"d{n}", "--force"),
        ("diagnose", path, "--compare", "ts,isotonic", "--out", folder / f"c{n}", "--force"),
        ("merge-states", folder / f"s{n}.npz"),
    ]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 20])
def test_every_command_on_1_to_20_rows_exits_0_or_2(run, tiny, n):
    """The reproducers: evaluate and diagnose on files of 1 row (ZeroDivisionError) and 2 to 13 rows
    (CatBoostError) printed a traceback and exited 1, the code of a failed gate."""
    for args in _commands(tiny, n):
        code, out, err = run(*args)
        assert code in (0, 2), (args, code, err[-400:])
        assert "Traceback" not in out + err and "internal error" not in err, args
        if code == 2:
            assert err.strip().splitlines()[-1].startswith("calib: error: "), (args, err)


def test_vece_below_its_rows_is_undefined_and_says_why(run, tiny):
    code, out, _ = run("evaluate", tiny / "n13.npz")
    line = next(line for line in out.splitlines() if line.startswith("vece_l1"))
    assert code == 0 and "n/a" in line and "needs at least 27 rows" in line and "13 here" in line


@pytest.mark.parametrize(
    "args",
    [
        ("evaluate", SAMPLE / "cifar10_test.npz", "--no-vece"),
        ("fit", SAMPLE / "cifar10_val.npz", "--method", "ts", "--out", "{tmp}/b"),
        ("diagnose", SAMPLE / "cifar10_test.npz", "--out", "{tmp}/d"),
        ("evaluate", SAMPLE / "cifar10_test.npz", "--no-vece", "--fail-if", "ece>0.5"),
    ],
    ids=["evaluate", "fit", "diagnose", "evaluate-gated"],
)
def test_an_internal_error_exits_3_in_one_line(run, tmp_path, monkeypatch, args):
    """A bug anywhere (here: the reader raises a RuntimeError) exits 3 with one line naming it as
    calib's, never 1; CALIB_DEBUG=1 lets it through with its traceback."""

    def broken(*_args, **_kwargs):
        raise RuntimeError("injected\nacross two lines")

    monkeypatch.setattr(calib.io.readers, "read_predictions", broken)
    args = [str(a).replace("{tmp}", str(tmp_path)) for a in args]
    code, _, err = run(*args)
    assert code == 3, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("calib: error: internal error: RuntimeError: injected across two lines")
    assert "a bug in calib" in lines[-1] and "Traceback" not in err
    monkeypatch.setenv("CALIB_DEBUG", "1")
    with pytest.raises(RuntimeError, match="injected"):
        run(*args)


def test_one_overwrite_rule_for_every_command_that_writes_an_artifact(run, tiny, tmp_path):
    """fit (a bundle), diagnose (a report directory), synth (a data directory), apply (an output
    file) and export (a model file): an existing output is refused in one line naming --force, exit
    2, left as it was; with --force it is replaced. Run reports (evaluate --json, --junit,
    --emit-state) are rewritten on every run, as CI reruns expect."""
    needs_onnx = __import__("importlib.util").util.find_spec("onnx") is not None
    path = tiny / "n20.npz"
    targets = {
        "fit": (("fit", path, "--method", "ts", "--out"), tmp_path / "bundle", True),
        "diagnose": (("diagnose", path, "--out"), tmp_path / "report", True),
        "synth": (
            ("synth", "gaussian-grid", "--classes", "3", "--n-cal", "100", "--n-test", "100", "--model", "truth", "--out"),
            tmp_path / "grid",
            True,
        ),
        "apply": (("apply", tiny / "ts_bundle", path, "--out"), tmp_path / "out.npz", False),
    }
    if needs_onnx:
        targets["export"] = (("export", tiny / "ts_bundle", "--out"), tmp_path / "model.onnx", False)
    for name, (args, target, directory) in targets.items():
        if directory:
            target.mkdir()
            (target / "keep.txt").write_text("mine")
        else:
            target.write_bytes(b"mine")
        code, _, err = run(*args, target)
        assert code == 2 and "(--force)" in err and "replacing" in err, (name, err)
        assert (target / "keep.txt").read_text() == "mine" if directory else target.read_bytes() == b"mine"
        code, _, err = run(*args, target, "--force")
        assert code == 0, (name, err)
        assert not (target / "keep.txt").exists() if directory else target.read_bytes() != b"mine"
    report = tmp_path / "r.json"
    for _ in range(2):
        assert run("evaluate", path, "--no-vece", "--json", report, "--junit", tmp_path / "g.xml")[0] == 0
