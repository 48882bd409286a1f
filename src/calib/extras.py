"""Optional dependencies, imported on first use: a missing one is one clear line naming the extra
that installs it (the command line turns it into exit code 2)."""

from __future__ import annotations

import contextlib
import importlib

from .errors import UsageError

#: module -> (the extra that installs it, what needs it)
EXTRAS = {
    "torch": (
        "torch",
        "adaptive-ts, ats-aq, ats-maq, the adaptive (flow) thresholds and the synthetic classifier",
    ),
    "dask": ("dask", "the dask engine for directories of shards"),
    "onnx": ("onnx", "calib export and Calibration.to_onnx"),
    "distributed": ("dask", "the dask engine for directories of shards"),
    "sklearn": ("sklearn", "calib.sklearn.CalibratedClassifier"),
}
#: Where the CPU build of PyTorch comes from (PyPI's default torch wheel on Linux is the CUDA build).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


class MissingExtra(UsageError):
    """An optional dependency is not installed."""


def require(module: str):
    """``import module``, or :class:`MissingExtra` naming the ``calib-cli[extra]`` to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        extra, users = EXTRAS[module.split(".")[0]]
        hint = f" (the CPU build: pip install torch --index-url {TORCH_CPU_INDEX})" if extra == "torch" else ""
        raise MissingExtra(f"{users} need {module.split('.')[0]}: pip install 'calib-cli[{extra}]'{hint}") from None


def torch():
    """The torch module, or :class:`MissingExtra`."""
    return require("torch")


@contextlib.contextmanager
def torch_on_one_thread():
    """torch with one intra-op thread inside the block, its setting restored after. Small models
    (the calibrators' MLPs, batches of a few hundred rows) spend more time waking and spinning
    threads than computing: adaptive-ts on 1,000 CIFAR-100 rows took 5.2 s of CPU on two threads
    and 1.3 s on one, mr with an adaptive threshold 33 s against 4.2 s, with the same fitted
    values (docs/benchmarks.md, "Small models on one thread")."""
    torch = require("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield torch
    finally:
        torch.set_num_threads(before)
