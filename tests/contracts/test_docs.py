"""The documentation's examples run, and the Python API gives the command line's numbers."""

import doctest
import json

import numpy as np
import pytest
from conftest import ROOT, SAMPLE

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def test_docs_api_md_runs():
    result = doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False, optionflags=FLAGS)
    assert result.attempted > 20 and result.failed == 0


@pytest.mark.parametrize(
    "module", ["calib.api", "calib.metrics.functional", "calib.shards", "calib.io.readers", "calib.evaluation.request"]
)
def test_module_examples_run(module):
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=FLAGS)
    assert result.attempted > 0 and result.failed == 0


def test_the_api_reproduces_the_readme_cli_numbers(tmp_path, run):
    import calib

    assert run("fit", SAMPLE / "cifar10_val.npz", "--method", "ts", "--out", tmp_path / "b")[0] == 0
    code, out, _ = run(
        "evaluate", SAMPLE / "cifar10_test.npz", "--bundle", tmp_path / "b", "--vece-recalibrator", "ts", "--json", "-"
    )
    assert code == 0
    cli = json.loads(out)
    val, test = np.load(SAMPLE / "cifar10_val.npz"), np.load(SAMPLE / "cifar10_test.npz")
    ts = calib.calibrator("ts").fit(val["logits"], val["labels"])
    api = calib.evaluate(
        test["logits"], test["labels"], calibrator=ts, request=calib.EvaluationRequest.of(vece=True, vece_recalibrator="ts")
    ).to_dict()
    assert list(api["metrics"]) == list(cli["metrics"]) and len(api["metrics"]) > 10
    for side in ("metrics", "uncalibrated_metrics"):
        for key, entry in cli[side].items():
            assert api[side][key]["value"] == pytest.approx(entry["value"], abs=1e-12), (side, key)
            assert api[side][key]["settings"] == entry["settings"]
    # the same bundle bytes from Python as from the command line (same rows, same seed)
    ts.save(str(tmp_path / "py"))
    manifest_cli = json.loads((tmp_path / "b" / "manifest.json").read_text())
    manifest_py = json.loads((tmp_path / "py" / "manifest.json").read_text())
    assert manifest_py["fit_report"] == manifest_cli["fit_report"] and manifest_py["files"] == manifest_cli["files"]


def test_every_public_api_function_has_an_example():
    import calib.api
    import calib.metrics.functional

    for function in (calib.api.evaluate, calib.api.Calibration, calib.metrics.functional):
        assert ">>>" in (function.__doc__ or ""), function


def test_library_messages_name_no_command_line_flag():
    """Library errors read in a notebook: a flag belongs in the command line's hint only."""
    import re

    offenders = []
    for path in (ROOT / "src" / "calib").rglob("*.py"):
        if "cli" in path.parts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"(Error|Extra)\(f?[\"'][^\"']*--[a-z]", line):
                offenders.append(f"{path.name}:{number}")
    assert offenders == []


def test_the_readme_and_the_cli_page_list_every_input_format():
    """Each suffix of the format table (calib.io.formats.FORMATS) is named in the README's input
    paragraph and in docs/cli.md's Inputs, so a new format is documented where users look."""
    from calib.io.formats import BY_SUFFIX

    readme = (ROOT / "README.md").read_text()
    paragraph = readme[readme.index("Inputs: ") :].split("\n\n")[0]
    cli = (ROOT / "docs" / "cli.md").read_text()
    inputs = cli[cli.index("## Inputs") :].split("\n## ")[0]
    missing = [suffix for suffix in BY_SUFFIX if f"`{suffix}`" not in paragraph or f"`{suffix}`" not in inputs]
    assert missing == []


def test_the_generated_lists_are_what_the_registries_hold():
    """README's metric, method and suffix lists and docs/metrics.md's key table are written from
    the registries by tools/docs_tables.py; a registry changed without rerunning it fails here."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "tools" / "docs_tables.py"), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_fit_help_lists_every_value_of_the_options_with_fixed_values(run, monkeypatch):
    """`calib fit --help` names every score, threshold, variant, flow, aggregate and model the
    library accepts (calib.registry.OPTION_CHOICES), margin included."""
    from calib.registry import OPTION_CHOICES

    monkeypatch.setenv("COLUMNS", "400")
    code, out, _ = run("fit", "--help")
    assert code == 0
    flat = " ".join(out.split())
    missing = [(option, value) for option, values in OPTION_CHOICES.items() for value in values if value not in flat]
    assert missing == [] and "msp | aps | raps | saps | topk | margin" in flat
