import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CALIB_SHARED_DATA", ROOT.parent / "shared" / "data"))
SAMPLE = ROOT / "sample_data"
sys.path.insert(0, str(Path(__file__).parent))


def shared_file(name: str) -> Path:
    """A real data file of ../shared/data; skipped outside CI when absent, an error in CI."""
    path = SHARED_DATA / name
    if not path.exists():
        if os.environ.get("CI"):
            raise FileNotFoundError(f"{path} is missing in CI")
        pytest.skip(f"{path} not present")
    return path


@pytest.fixture
def run(capsys, monkeypatch):
    """Run the `calib` entry point in-process: returns (exit code, stdout, stderr)."""
    from calib.cli.app import main

    def _run(*args):
        monkeypatch.setattr(sys, "argv", ["calib", *map(str, args)])
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return _run


@pytest.fixture
def cifar100():
    val = np.load(shared_file("cifar100_resnet110_val.npz"))
    test = np.load(shared_file("cifar100_resnet110_test.npz"))
    return {"val": shared_file("cifar100_resnet110_val.npz"), "test": shared_file("cifar100_resnet110_test.npz"),
            "val_logits": val["logits"], "val_labels": val["labels"],
            "test_logits": test["logits"], "test_labels": test["labels"]}


@pytest.fixture
def small_logits():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(300, 6)) * 2.0
    labels = rng.integers(0, 6, size=300)
    return logits, labels
