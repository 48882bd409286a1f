"""Optional dependencies, imported on first use: a missing one is one clear line naming the extra
that installs it (the command line turns it into exit code 2)."""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import sys
import threading

from ..errors import UsageError

#: module -> (the extra that installs it, what needs it)
EXTRAS = {
    "torch": (
        "torch",
        "adaptive-ts, ats-aq, ats-maq, the adaptive (flow) thresholds and the synthetic classifier",
    ),
    "dask": ("dask", "the dask engine for directories of shards"),
    "onnx": ("onnx", "calib export and Calibration.to_onnx"),
    "distributed": ("dask", "the dask engine for directories of shards"),
    "sklearn": ("sklearn", "calib.sklearn.CalibratedClassifier and the helm_platt_ece_10 metric"),
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


#: Where the torch-trained methods train: "cpu", "auto" or "cuda[:N]" (:func:`training_device`)
DEVICES = ("auto", "cpu", "cuda")
_DEVICE: contextvars.ContextVar[str] = contextvars.ContextVar("calib_training_device", default="cpu")


def check_device_name(name: str) -> str:
    """``name`` if it names a device (:data:`DEVICES`, or cuda:N), else one line; imports nothing."""
    if not isinstance(name, str) or (name not in DEVICES and not (name.startswith("cuda:") and name[5:].isdigit())):
        raise UsageError(f"device must be one of {', '.join(DEVICES)} (or cuda:N); got {name!r}", cli_hint="--device")
    return name


def resolve_device(name: str) -> str:
    """The torch device ``name`` asks for: "auto" is "cuda" where torch sees a GPU, else "cpu";
    "cuda" (or "cuda:N") where torch sees none is refused in one line. Without torch installed,
    "auto" and "cpu" are "cpu" (no method that needs torch can run anyway)."""
    check_device_name(name)
    if name == "cpu":
        return "cpu"
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        if name == "auto":
            return "cpu"
        raise MissingExtra(f"device {name!r} needs torch: pip install 'calib-cli[torch]'") from None
    available = bool(torch.cuda.is_available())
    if name == "auto":
        return "cuda" if available else "cpu"
    index = int(name[5:]) if ":" in name else 0
    if not available or index >= torch.cuda.device_count():
        raise UsageError(
            f"device {name!r}: torch sees no such GPU here (torch.cuda.is_available() is {available}); "
            "train on cpu, or auto to take a GPU where there is one",
            cli_hint="--device cpu",
        )
    return name


@contextlib.contextmanager
def training_device(name: str):
    """Inside the block the torch-trained methods train on device ``name`` (resolved by
    :func:`resolve_device`); yields the resolved name. The trained parameters come back to the CPU
    as NumPy arrays either way, so a bundle fitted on a GPU applies anywhere."""
    resolved = resolve_device(name)
    token = _DEVICE.set(resolved)
    try:
        yield resolved
    finally:
        _DEVICE.reset(token)


def current_device() -> str:
    """The device the torch-trained methods train on now (:func:`training_device`; "cpu" outside)."""
    return _DEVICE.get()


#: Modules whose import has been started on a thread of its own (:func:`import_in_background`).
_started: set[str] = set()
_started_lock = threading.Lock()


def import_in_background(module: str) -> None:
    """Import ``module`` on a thread of its own, once a process, so that its import time (CatBoost's
    0.3-0.5 s, most of it pandas) overlaps the work before its first use.
    That use's own ``import`` waits for it (Python holds a module's import lock until the module is
    complete) and raises any error it met. Not a daemon thread: the process does not exit in the
    middle of it."""
    with _started_lock:
        if module in sys.modules or module in _started:
            return
        _started.add(module)
    threading.Thread(target=_import_quietly, args=(module,), name=f"calib-import-{module}").start()


def _import_quietly(module: str) -> None:
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001 - the use's own import raises it where it can be reported
        pass
