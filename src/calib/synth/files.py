"""The synthetic datasets written to files, as `calib synth` writes them (docs/synth.md): a
directory of cal.npz, test.npz and meta.json (the Gaussian grid, multi-label data), a .npz with its
exact errors beside it in OUT.truth.json (known calibration error, ImageNet's shape), or a copy of
an input with its calibration destroyed (contamination)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UsageError
from .gaussian_grid import CIRCLE_RADIUS, SIGMA

#: Each kind's settings and their defaults (a setting left None takes its kind's).
DEFAULTS: dict[str, dict[str, Any]] = {
    "gaussian-grid": {
        "classes": 10, "n_cal": 5000, "n_test": 10000, "n_train": 50000, "epochs": 15,
        "sigma": SIGMA, "layout": "auto", "radius": CIRCLE_RADIUS, "model": "mlp",
    },
    "contaminate": {},
    "known-ce": {"classes": 10, "temperature": 0.5, "n": 10000},
    "large-k": {"classes": 1000, "temperature": 0.9, "n": 50000},
    "multilabel": {"labels": 50, "n_cal": 20000, "n_test": 20000, "correlation": 0.5},
}  # fmt: skip


@dataclass(frozen=True)
class Synthesis:
    """One synthetic dataset: its ``kind`` (a key of :data:`DEFAULTS`), its ``seed``, and the
    settings its kind reads (each left None takes its kind's default): ``classes`` K, rows ``n``
    (or ``n_cal`` / ``n_test``, and ``n_train`` for the grid's classifier), the grid's ``epochs``,
    ``sigma``, ``layout``, ``radius`` and ``model``, the ``temperature`` of known-ce and large-k,
    the multi-label ``labels`` and their ``correlation``."""

    kind: str
    seed: int = 0
    classes: int | None = None
    n: int | None = None
    n_cal: int | None = None
    n_test: int | None = None
    n_train: int | None = None
    epochs: int | None = None
    sigma: float | None = None
    layout: str | None = None
    radius: float | None = None
    model: str | None = None
    temperature: float | None = None
    labels: int | None = None
    correlation: float | None = None

    def __post_init__(self):
        if self.kind not in DEFAULTS:
            raise UsageError(f"unknown synthetic dataset {self.kind!r}; one of {', '.join(DEFAULTS)}")
        for name, value in DEFAULTS[self.kind].items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)

    def settings(self) -> dict[str, Any]:
        """The settings its kind reads, each set (given, or its kind's default)."""
        return {name: getattr(self, name) for name in DEFAULTS[self.kind]}

    @staticmethod
    def truth_path(out: str) -> str:
        """Where known-ce and large-k write the exact errors of the .npz ``out`` (:func:`truth_path`)."""
        return truth_path(out)

    @staticmethod
    def default(kind: str, name: str) -> Any:
        """The default of setting ``name`` for datasets of ``kind``."""
        return DEFAULTS[kind][name]


def truth_path(out: str) -> str:
    """Where the exact errors of the .npz ``out`` are written: OUT.truth.json."""
    return os.path.splitext(out)[0] + ".truth.json"


def synthesize(synthesis: Synthesis, out: str, *, pred=None, force: bool = False, progress=None) -> dict:
    """Write the dataset ``synthesis`` describes to ``out`` (a directory replaced only with ``force``,
    or a file), and return what a summary shows of it. ``pred``: the source
    (calib.operations.Source) contamination reads; ``progress(epoch, total, loss)``: the grid's
    classifier's training."""
    if synthesis.kind == "gaussian-grid":  # its classifier and draws take the seed itself
        return _gaussian_grid(synthesis, out, force, progress)
    rng = np.random.default_rng(synthesis.seed)
    if synthesis.kind == "contaminate":
        return _contaminate(pred, out, rng)
    if synthesis.kind == "multilabel":
        return _label_splits(synthesis, out, rng, force)
    return _truth(synthesis, out, rng)


def _write_splits(out: str, force: bool, splits: dict, meta: dict) -> None:
    from ..bundle import dumps
    from ..io.atomic import atomic_directory
    from ..io.formats.npz import npz_bytes

    with atomic_directory(out, force=force) as tmp:
        for split, arrays in splits.items():
            with open(os.path.join(tmp, f"{split}.npz"), "wb") as handle:
                handle.write(npz_bytes(arrays))
        with open(os.path.join(tmp, "meta.json"), "wb") as handle:
            handle.write(dumps(meta))


def _gaussian_grid(s: Synthesis, out: str, force: bool, progress) -> dict:
    import time

    from .gaussian_grid import make_gaussian_grid

    settings = s.settings()
    if settings["sigma"] <= 0:
        raise UsageError(f"the class standard deviation must be > 0; got {s.sigma}", cli_hint="--sigma")
    start = time.perf_counter()
    sizes = [settings.pop(name) for name in ("classes", "n_cal", "n_test")]
    try:
        data = make_gaussian_grid(*sizes, **settings, seed=s.seed, progress=progress)
    except ValueError as exc:  # a setting the task refuses (a layout, a model): the message says which
        raise UsageError(str(exc)) from None
    data["meta"]["seconds"] = round(time.perf_counter() - start, 1)
    _write_splits(
        out, force, {"cal": data["cal"], "test": data["test"]}, {k: v for k, v in data["meta"].items() if k != "seconds"}
    )
    return data["meta"]


def _contaminate(pred, out: str, rng) -> dict:
    from ..io.atomic import write_bytes_atomic
    from ..io.formats.npz import npz_bytes
    from ..io.writers import check_output_path, write_matrix
    from .contamination import contaminate, contamination_temperatures

    check_output_path(out, pred.files())
    preds = pred.reading.read(pred.path)
    temperatures = contamination_temperatures(preds.labels, preds.k, rng)
    logits = preds.all_logits()
    log_probs = contaminate(logits, temperatures)
    if out.lower().endswith(".npz"):
        arrays = _other_npz_arrays(pred.path)
        arrays.update(logits=log_probs, labels=preds.labels, temperatures=temperatures)
        write_bytes_atomic(out, npz_bytes(arrays))
    else:
        write_matrix(out, log_probs, "logits", labels=preds.labels, passthrough=preds.passthrough)
    return {"rows": preds.n, "argmax unchanged": bool(np.array_equal(log_probs.argmax(1), logits.argmax(1)))}


def _other_npz_arrays(path: str) -> dict:
    if not path.lower().endswith(".npz"):
        return {}
    with np.load(path, allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files if key not in ("logits", "log_probs", "probs")}


def _truth(s: Synthesis, out: str, rng) -> dict:
    """known-ce and large-k: the .npz ``out`` and its exact errors in OUT.truth.json."""
    from ..bundle import dumps
    from ..io.atomic import write_bytes_atomic
    from ..io.formats.npz import npz_bytes

    settings = s.settings()
    if settings["temperature"] <= 0:
        raise UsageError(f"the temperature must be > 0; got {s.temperature}", cli_hint="--temperature")
    if not out.lower().endswith(".npz"):
        raise UsageError(f"{out}: {s.kind} writes a .npz file")
    report = {**settings, "seed": s.seed}
    shape = (settings["n"], settings["classes"], settings["temperature"])
    if s.kind == "known-ce":
        from .known_ce import known_ce_data, true_calibration_errors

        probs, labels, truth = known_ce_data(*shape, rng)
        arrays = {"probs": probs, "labels": labels, "true_probs": truth}
        errors = true_calibration_errors(probs, truth)
    else:
        from .large_k import large_k_data, large_k_errors

        logits, labels, truth = large_k_data(*shape, rng)
        report["accuracy"] = float(np.mean(logits.argmax(axis=1) == labels))
        arrays = {"logits": logits, "labels": labels, "true_probs": truth}
        errors = large_k_errors(logits, truth)
    write_bytes_atomic(out, npz_bytes(arrays))
    write_bytes_atomic(truth_path(out), dumps({**report, "true_errors": errors}))
    shown = {key: value for key, value in report.items() if key == "accuracy"}
    return {**shown, **{f"true {key}": value for key, value in errors.items()}}


def _label_splits(s: Synthesis, out: str, rng, force: bool) -> dict:
    from .multilabel import split_files

    settings = s.settings()
    splits, meta, shown = split_files(**settings, seed=s.seed, rng=rng)
    _write_splits(out, force, splits, meta)
    return shown
