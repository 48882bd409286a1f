"""The entry point: ``calib --version`` answers without loading NumPy or the command line parser."""

import os
import subprocess
import sys


def test_the_version_line_loads_neither_numpy_nor_the_program():
    for kernels, expected in (("numpy", "numpy"), ("auto", None)):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "calib", "--version"],
            capture_output=True,
            text=True,
            env={**os.environ, "CALIB_KERNELS": kernels},
            check=True,
        )
        imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
        assert "numpy" not in imported and "typer" not in imported and "calib.cli.app" not in imported
        line = done.stdout.strip()
        assert line.startswith("calib ") and line.endswith(f"(kernels: {expected})" if expected else ")")


def test_every_other_command_loads_the_program(run):
    code, out, _ = run("--version")  # through the program's own flag: the same line
    from calib._version import version_line

    assert code == 0 and out.strip() == version_line()
