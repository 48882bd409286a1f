"""Fit a calibrator to a bundle, load it back with its compatibility checks, apply it in chunks."""

from __future__ import annotations

import dataclasses
from typing import Iterator

import numpy as np

from ._version import __version__
from .bundle import RECORD_KEY, Bundle, State, read_bundle, write_bundle
from .calibrators.base import (
    CalibrationInputs,
    Calibrator,
    TrainingRows,
    absent_classes,
    add_counts,
    builds_sets,
    warning_entries,
)
from .calibrators.label_pairs import fit_pairs
from .calibrators.per_label import PerLabel
from .core.numerics import map_in_order
from .errors import InputError, UsageError
from .io.predictions import PER_ROW_ONLY, Predictions
from .io.readers import Reading
from .registry import CALIBRATORS, calibrator_class


def fit_calibrator(
    preds: Predictions,
    method: str,
    options: dict | None = None,
    *,
    seed: int = 0,
    features: np.ndarray | None = None,
    train: Predictions | None = None,
    train_features: np.ndarray | None = None,
    per_label: bool = False,
    joint: bool = False,
) -> Calibrator:
    """Fit ``method`` with ``options`` (names -> values or strings) on every row of ``preds``;
    ``train`` (with ``train_features`` when ``features`` are given): separate labelled rows for the
    method's own model (:class:`calib.calibrators.base.TrainingRows`). A multi-label input's pairs
    are fitted by :func:`calib.calibrators.label_pairs.fit_pairs`: shared by all labels,
    ``per_label`` or ``joint``."""
    cls = calibrator_class(method)
    if preds.labels is None:
        raise InputError(f"{preds.name}: fitting needs labels; none in the file and none given", cli_hint="--labels FILE")
    parsed = cls.parse_options(options or {})
    n_labels = preds.output_layout.n_labels  # a multi-label input's L; None for rows of classes
    if n_labels is not None:
        if train is not None or features is not None or train_features is not None:
            raise UsageError(PER_ROW_ONLY, cli_hint="drop --features and --train")
        return fit_pairs(
            cls, parsed, CalibrationInputs.of(preds), preds.labels, n_labels, per_label=per_label, joint=joint, seed=seed
        )
    if per_label or joint:
        raise UsageError(
            f"{'a calibrator per label' if per_label else 'joint coverage'} needs a multi-label input "
            "(labels a (N, L) 0/1 matrix)"
        )
    calibrator = cls(parsed)
    if train is None and train_features is not None:
        raise UsageError("features of training rows were given without the training rows", cli_hint="--train FILE")
    rows = None if train is None else training_rows(calibrator, preds, train, train_features)
    fitted = calibrator.fit_inputs(CalibrationInputs.of(preds, features=features, train=rows), preds.labels, seed=seed)
    fitted.absent_classes_ = absent_classes(preds.labels, preds.k)
    return fitted


#: The fit report's key for the classes without a calibration row (kept in the bundle, restored on load).
ABSENT_CLASSES_KEY = "classes without calibration rows"


def full_fit_report(calibrator: Calibrator) -> dict:
    """What the bundle keeps and ``calib fit --json`` prints: the method's :meth:`fit_report`, the
    classes without a calibration row when there are any, and the fit's warnings ("warning", or
    "warning 1", "warning 2", ...)."""
    report = dict(calibrator.fit_report())
    if calibrator.absent_classes_:
        report[ABSENT_CLASSES_KEY] = list(calibrator.absent_classes_)
    return {**report, **warning_entries(calibrator.fit_warnings())}


def training_rows(calibrator: Calibrator, preds: Predictions, train: Predictions, features: np.ndarray | None) -> TrainingRows:
    """``train`` as the :class:`TrainingRows` of ``calibrator`` fitted on ``preds``: refused for a
    method without a model of its own, without labels, or with another class count or input kind."""
    if not calibrator.trains_a_model():
        raise UsageError(
            f"{calibrator.name} fits no model of its own with these options, so training rows have no use; "
            "they train the models of ats-aq, ats-maq and the adaptive threshold (threshold=adaptive)"
        )
    if train.labels is None:
        raise InputError(f"{train.name}: the training rows need labels; none in the file")
    if train.k != preds.k or train.kind != preds.kind:
        raise InputError(
            f"{train.name}: the training rows are {train.k} classes of {train.kind}; the calibration rows are "
            f"{preds.k} classes of {preds.kind}"
        )
    inputs = CalibrationInputs.of(train)
    return TrainingRows(
        inputs.logits, train.labels, features=features, probs=inputs.probs if calibrator.scores_given_probs else None
    )


def bundle_manifest(
    calibrator: Calibrator, *, n_classes: int, input_kind: str, fitted_on: dict, seed: int = 0, n_labels: int | None = None
) -> dict:
    """The manifest of a bundle of ``calibrator`` fitted on ``fitted_on`` ({"n", "sha256"}) rows of
    ``n_classes`` scores of ``input_kind`` (without its "files", which writing fills in); fitted
    on the pairs of a multi-label input of ``n_labels`` labels, it says so ("task", "n_labels",
    "per_label" for a calibrator per label, "coverage": "joint" for joint-coverage sets)."""
    task = {} if n_labels is None else {"task": "multilabel", "n_labels": n_labels}
    if isinstance(calibrator, PerLabel):
        task["per_label"] = True
    if getattr(calibrator, "joint_", None) is not None:
        task["coverage"] = "joint"
    return {
        **task,
        "calib_version": __version__,
        "method": calibrator.name,
        "options": {**dataclasses.asdict(calibrator.options), "seed": seed},
        "n_classes": n_classes,
        "input_kind": input_kind,
        "fitted_on": fitted_on,
        "fit_report": full_fit_report(calibrator),
    }


def save_calibrator(
    calibrator: Calibrator,
    path: str,
    *,
    n_classes: int,
    input_kind: str,
    fitted_on: dict,
    seed: int = 0,
    force: bool = False,
    n_labels: int | None = None,
    record: tuple[dict, dict[str, np.ndarray]] | None = None,
) -> dict:
    """Write the bundle directory of :func:`bundle_parts`; returns the manifest."""
    manifest, state = bundle_parts(
        calibrator, n_classes=n_classes, input_kind=input_kind, fitted_on=fitted_on, seed=seed, n_labels=n_labels, record=record
    )
    write_bundle(path, manifest=manifest, state=state, force=force)
    return manifest


def bundle_parts(
    calibrator: Calibrator,
    *,
    n_classes: int,
    input_kind: str,
    fitted_on: dict,
    seed: int = 0,
    n_labels: int | None = None,
    record: tuple[dict, dict[str, np.ndarray]] | None = None,
) -> tuple[dict, State]:
    """(the manifest of :func:`bundle_manifest`, the state) of the bundle of ``calibrator``, with the
    ``record`` of the rows it was fitted on when given ((its manifest entry, listing its arrays under
    "arrays"; the arrays), kept beside the calibrator's: calib.estimation.reference)."""
    manifest = bundle_manifest(
        calibrator, n_classes=n_classes, input_kind=input_kind, fitted_on=fitted_on, seed=seed, n_labels=n_labels
    )
    state = calibrator.to_state()
    if record is not None:
        manifest[RECORD_KEY] = record[0]
        state = State(state.params, {**state.arrays, **record[1]}, state.blobs)
    return manifest, state


def export_onnx(calibrator: Calibrator, manifest: dict, bundle_sha256: str, dtype: str = "float32") -> bytes:
    """The ONNX model (serialised) of a fitted calibrator with its bundle's ``manifest`` and hash
    in the model's metadata (:mod:`calib.onnx_export`)."""
    from .onnx_export import OPSET, onnx_model

    metadata = {
        "method": calibrator.name,
        "options": manifest["options"],
        "n_classes": manifest["n_classes"],
        "input_kind": manifest["input_kind"],
        "bundle_sha256": bundle_sha256,
        "calib_version": __version__,
        "opset": OPSET,
        "dtype": dtype,
        **({"n_labels": manifest["n_labels"]} if manifest.get("task") == "multilabel" else {}),
    }
    return onnx_model(
        calibrator,
        n_classes=manifest["n_classes"],
        input_kind=manifest["input_kind"],
        metadata=metadata,
        dtype=dtype,
        n_labels=manifest.get("n_labels") if manifest.get("task") == "multilabel" else None,
    )


def load_calibrator(path: str) -> tuple[Calibrator, Bundle]:
    """Read and verify a bundle and rebuild its fitted calibrator."""
    bundle = read_bundle(path, CALIBRATORS)
    recorded = set(bundle.manifest.get(RECORD_KEY, {}).get("arrays", ()))
    own = State(bundle.state.params, {k: v for k, v in bundle.state.arrays.items() if k not in recorded}, bundle.state.blobs)
    cls = CALIBRATORS[bundle.method]
    options = dict(bundle.manifest["options"])
    options.pop("seed", None)
    try:
        if bundle.manifest.get("per_label"):
            calibrator = PerLabel.restore(cls, cls.parse_options(options), own)
        else:
            calibrator = cls.from_state(cls.parse_options(options), own)
        calibrator.absent_classes_ = tuple(int(c) for c in bundle.manifest.get("fit_report", {}).get(ABSENT_CLASSES_KEY, ()))
    except (KeyError, TypeError, ValueError, UsageError) as exc:
        from .errors import BundleError

        raise BundleError(f"{path}: the saved state of {bundle.method!r} is incomplete or invalid ({exc})") from None
    return calibrator, bundle


def check_fits(
    preds: Predictions,
    n_classes: int,
    input_kind: str,
    what: str,
    n_labels: int | None = None,
    calibrator: Calibrator | None = None,
) -> None:
    """A fitted calibrator (``what``: "bundle B", ...) applies only to inputs with its class count,
    and, fitted on a multi-label input's pairs (``n_labels``), to a multi-label input with as many
    labels. Another input kind than the fit's applies when the map reads the logits only through
    their softmax (:meth:`Calibrator.softmax_only`): probabilities through log p, log-probabilities
    as logits, the same numbers; ``preds.kind_reason`` then says so. Otherwise it is refused, with a
    way out that reads the file correctly (refitting on its kind; declaring log-probabilities as
    logits, which they are)."""
    labels_here = preds.output_layout.n_labels  # None: rows of classes
    if n_labels is not None and labels_here != n_labels:
        found = "not multi-label" if labels_here is None else f"of {labels_here} labels"
        raise InputError(f"{preds.name}: {what} was fitted on a multi-label input of {n_labels} labels; this input is {found}")
    if n_labels is None and labels_here is not None:
        raise InputError(
            f"{preds.name}: is a multi-label input ({labels_here} labels); {what} was fitted on rows of {n_classes} classes"
        )
    if preds.k != n_classes:
        raise InputError(f"{preds.name}: has K = {preds.k} classes but {what} was fitted for K = {n_classes}")
    if preds.kind == input_kind:
        return
    if calibrator is not None and calibrator.softmax_only():
        through = "log p" if preds.kind == "probs" else "the softmax of its scores"
        preds.kind_reason += (
            f"; {what} was fitted on {input_kind} and applies through {through} (it reads logits only through their softmax)"
        )
        return
    if preds.kind == "log-probs" and input_kind == "logits":  # log-probabilities are logits: declaring so is right
        raise InputError(
            f"{preds.name}: input kind is log-probs ({preds.kind_reason}) but {what} was fitted on logits and reads "
            "their values, not only their softmax; log-probabilities are logits of the same probabilities: declare them so",
            cli_hint="--input-kind logits",
        )
    raise InputError(
        f"{preds.name}: input kind is {preds.kind} ({preds.kind_reason}) but {what} was fitted on {input_kind} and "
        f"reads the {input_kind} themselves, not only the probabilities they give; fit it on {preds.kind} to apply it here"
    )


def read_with_bundle(pred: str, bundle_path: str | None, reading: Reading = Reading()) -> tuple[Predictions, Calibrator | None]:
    """Load and verify the bundle (if any) first, then read the predictions as ``reading`` says
    and check that the bundle fits them (K and input kind): the shared start of apply, evaluate and
    diagnose. A bundle fitted on a multi-label input reads the scores as (row, label) pairs."""
    calibrator = saved = None
    n_labels = None
    if bundle_path is not None:
        calibrator, saved = load_calibrator(bundle_path)
        n_labels = saved.manifest.get("n_labels")
        if n_labels is not None and reading.task == "auto":
            reading = dataclasses.replace(reading, task="multilabel")  # (row, label) pairs, labels or not
    preds = reading.read(pred)
    if saved is not None:
        check_fits(preds, saved.n_classes, saved.input_kind, f"bundle {bundle_path}", n_labels, calibrator)
    return preds, calibrator


def calibrated_blocks(
    calibrator: Calibrator, preds: Predictions, what: str = "probs", features: np.ndarray | None = None
) -> Iterator[tuple[slice, np.ndarray, dict]]:
    """Yield (rows, block, counts) chunk by chunk: calibrated probabilities (``what="probs"``),
    log-probabilities, or the boolean conformal-set mask (``what="sets"``), with the method's row counts."""
    if what == "sets" and not builds_sets(calibrator):
        raise UsageError(f"method {calibrator.name!r} builds no conformal sets; only conformal methods do")

    def block(rows: slice):
        return rows, *calibrator.apply(CalibrationInputs.of(preds, rows, features), what)

    yield from map_in_order(block, preds.chunks(), values=preds.n * preds.k)


def apply_calibrator(
    calibrator: Calibrator, preds: Predictions, what: str = "probs", features: np.ndarray | None = None
) -> tuple[np.ndarray, dict]:
    """Every row of :func:`calibrated_blocks` in one array laid out as the input's output is
    (:attr:`Predictions.output_layout`: (N, K), or a multi-label input's (N, L)), with the summed
    row counts."""
    layout = preds.output_layout
    out = np.empty((preds.n, layout.width), dtype=layout.dtype(what))
    counts: dict = {}
    for rows, block, info in calibrated_blocks(calibrator, preds, what, features):
        out[rows] = layout.block(block, what)
        add_counts(counts, info)
    return out.reshape(layout.shape), counts


def write_applied(
    calibrator: Calibrator, preds: Predictions, target, what: str = "probs", features: np.ndarray | None = None
) -> dict:
    """Apply ``calibrator`` to ``preds`` and write ``what`` (probs, log-probs or sets) to ``target``,
    a path in a writable format (atomically) or a binary stream (.npy); returns the summed row
    counts. A .npy (or a stream) is written a chunk of rows at a time; the other formats are
    assembled first, then written with the labels and the carried-through columns."""
    from .io import write_matrix, write_npy_stream

    layout = preds.output_layout
    if not isinstance(target, str) or target.lower().endswith(".npy"):
        counts: dict = {}

        def blocks():
            for _, block, info in calibrated_blocks(calibrator, preds, what, features):
                add_counts(counts, info)
                yield layout.block(block, what)  # rows in order: the bytes of the (N, K) or (N, L) matrix

        write_npy_stream(target, layout.shape, layout.dtype(what), blocks())
        return counts
    result, counts = apply_calibrator(calibrator, preds, what, features)
    write_matrix(target, result, what, labels=layout.labels(preds.labels), passthrough=preds.passthrough)
    return counts
