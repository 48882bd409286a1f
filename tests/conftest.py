import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Real classifier outputs shipped with the tests (tests/data/README.md has their origin and licences).
DATA = Path(__file__).resolve().parent / "data"
SAMPLE = ROOT / "sample_data"
sys.path.insert(0, str(Path(__file__).parent))


def has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


#: Tests of what needs the torch extra skip without it (CI installs it; README: the CPU build).
NEEDS_TORCH = pytest.mark.skipif(not has_module("torch"), reason="needs torch: pip install 'calib-cli[torch]'")


#: How to install each optional package a test compares against (what a skip says).
INSTALL = {
    "torch": "pip install 'calib-cli[torch]' (the CPU build: README)",
    "numba": "pip install 'calib-cli[fast]'",
    "torchmetrics": "pip install 'calib-cli[test-all]'",
    "netcal": "pip install 'calib-cli[test-all]'",
    "probmetrics": "pip install 'calib-cli[test-all]'",
    "mapie": "pip install 'calib-cli[test-all]'",
    "venn_abers": "pip install venn-abers",
    "junitparser": "pip install 'calib-cli[test-all]'",
    "safetensors": "pip install 'calib-cli[test-all]'",
    "pyspark": "pip install 'calib-cli[spark]' (and Java 17 or later)",
    "ray": "pip install 'calib-cli[ray]'",
    "nannyml": "pip install 'calib-cli[test-all]'",
    "statsmodels": "pip install 'calib-cli[test-all]'",
}


def short_flow_training(monkeypatch, steps: int) -> None:
    """The default flow training (calib.calibrators.thresholds.FLOW_TRAININGS) cut to ``steps``:
    the tests of what any trained flow guarantees need not pay for a well-trained one."""
    import dataclasses

    from calib.calibrators import thresholds

    name = thresholds.DEFAULT_FLOW_TRAINING
    monkeypatch.setitem(thresholds.FLOW_TRAININGS, name, dataclasses.replace(thresholds.FLOW_TRAININGS[name], steps=steps))


def needs(module: str):
    """Import an optional peer or extra, or skip the test with the line that installs it; every
    optional import in a test goes through here, before anything else of the test runs."""
    return pytest.importorskip(module, reason=f"needs {module}: {INSTALL.get(module, 'pip install ' + module)}")


def method_param(method: str, *rest):
    """A pytest parameter for ``method`` that skips when an optional package its fit needs is absent."""
    from calib.registry import calibrator_class

    missing = [m for m in calibrator_class(method).requires if not has_module(m)]
    marks = [pytest.mark.skip(reason=f"{method} needs {', '.join(missing)}: pip install 'calib-cli[torch]'")] if missing else []
    return pytest.param(method, *rest, marks=marks)


def data_file(name: str) -> Path:
    """A real data file of tests/data (part of the repository: never skipped)."""
    path = DATA / name
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: it is part of the repository")
    return path


@pytest.fixture
def run(capsys, monkeypatch):
    """Run the `calib` entry point in-process: returns (exit code, stdout, stderr)."""
    from calib.cli.app import main

    # a test run inside GitHub Actions must not append to the job's own summary and outputs
    for name in ("GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"):
        monkeypatch.delenv(name, raising=False)

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


@pytest.fixture(scope="session")
def spark():
    """One local Spark session (local[2], as calib starts it) for every test that needs one."""
    needs("pyspark")
    import shutil

    if shutil.which("java") is None and not __import__("os").environ.get("JAVA_HOME"):
        pytest.skip("needs Java 17 or later for Spark")
    from calib.spark import start_session

    session = start_session()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def ray_started():
    """One local Ray (two CPUs, as calib starts it) for every test that needs one."""
    needs("ray")
    from calib.ray import started

    with started() as ray:
        yield ray


@pytest.fixture
def cifar100():
    val = np.load(data_file("cifar100_resnet110_val.npz"))
    test = np.load(data_file("cifar100_resnet110_test.npz"))
    return {
        "val": data_file("cifar100_resnet110_val.npz"),
        "test": data_file("cifar100_resnet110_test.npz"),
        "val_logits": val["logits"],
        "val_labels": val["labels"],
        "test_logits": test["logits"],
        "test_labels": test["labels"],
    }


@pytest.fixture
def small_logits():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(300, 6)) * 2.0
    labels = rng.integers(0, 6, size=300)
    return logits, labels


def peaked_logits(n, k=97, seed=0):
    """A peaked model (a language-ID model's shape): each row's logits spread over gaps of 0 to 760
    below a top logit, the top class the label 90% of the time, 0 to 30 above the rest, so the top
    probability is within 1e-13 of 1 on many rows and the other classes' probabilities reach the
    subnormal range and 0."""
    rng = np.random.default_rng(seed)
    z = -rng.uniform(0, 760, (n, k)) * rng.uniform(0.0, 1.0, (n, 1)) ** 2
    labels = rng.integers(0, k, n)
    top = np.where(rng.random(n) < 0.9, labels, rng.integers(0, k, n))
    z[np.arange(n), top] = z.max(axis=1) + rng.uniform(0, 30, n)
    return z, labels


def torchcp_modules():
    """TorchCP's classification scores and predictors, without its package __init__, which imports
    its graph and language-model modules (torch_geometric, transformers). TorchCP is installed with
    `pip install --no-deps torchcp` (its declared torchsort is a source-only C++ extension that
    these modules never import)."""
    import importlib.util
    import sys
    import types

    needs("torch")
    if "torchcp.classification.score" not in sys.modules:  # not loaded by an earlier call
        spec = importlib.util.find_spec("torchcp")
        if spec is None:
            pytest.skip("torchcp is not installed (pip install --no-deps torchcp)")
        root = spec.submodule_search_locations[0]
        for name, path in (("torchcp", root), ("torchcp.classification", f"{root}/classification")):
            if name not in sys.modules:
                package = types.ModuleType(name)
                package.__path__ = [path]
                sys.modules[name] = package
    from torchcp.classification import predictor, score

    return score, predictor
