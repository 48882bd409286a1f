"""`calib synth gaussian-grid | contaminate | known-ce | large-k | multilabel`: data with known truth (docs/benchmarks.md)."""

from __future__ import annotations

import os
import time
from typing import Annotated

import numpy as np
import typer

from ..api import (
    CIRCLE_RADIUS,
    SIGMA,
    UsageError,
    atomic_directory,
    check_output_path,
    contamination_temperatures,
    dumps,
    known_ce_data,
    large_k_data,
    large_k_errors,
    make_gaussian_grid,
    npz_bytes,
    read_predictions,
    true_calibration_errors,
    write_bytes_atomic,
    write_matrix,
)
from ..api import contaminate as contaminate_logits
from . import options, render

app = typer.Typer(
    help="Generate data with known truth: the Gaussian grid, contamination, known calibration error. "
    "Example: calib synth gaussian-grid --classes 100 --out grid100",
    no_args_is_help=True,
)

Seed = Annotated[int, typer.Option("--seed", help="Seed of every random choice.")]


@app.command("gaussian-grid", cls=options.Command)
def gaussian_grid(
    out: Annotated[
        str, typer.Option("--out", "-o", help="Directory to write cal.npz, test.npz and meta.json.", show_default=False)
    ],
    classes: Annotated[int, typer.Option("--classes", "-k", min=2, help="Number of classes K (up to 10,000).")] = 10,
    n_cal: Annotated[int, typer.Option("--n-cal", min=1, help="Calibration rows.")] = 5000,
    n_test: Annotated[int, typer.Option("--n-test", min=1, help="Test rows.")] = 10000,
    n_train: Annotated[int, typer.Option("--n-train", min=1, help="Rows the classifier is trained on.")] = 50000,
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Training epochs.")] = 15,
    sigma: Annotated[
        float, typer.Option("--sigma", min=0.0, help="Class standard deviation (Kotelevskii et al. 2025's circle: 0.75).")
    ] = SIGMA,
    layout: Annotated[str, typer.Option("--layout", help="auto (circle for K < 10, else square grid) | grid | circle.")] = "auto",
    radius: Annotated[float, typer.Option("--radius", help="Circle radius.")] = CIRCLE_RADIUS,
    model: Annotated[
        str, typer.Option("--model", help="mlp (train the RFF + MLP classifier) | truth (logits = log p(y|x)).")
    ] = "mlp",
    seed: Seed = 0,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing non-empty directory.")] = False,
) -> None:
    """Gaussian-grid task of Kazantsev et al. 2025 with a trained classifier, its logits, and the true p(y|x).

    Example: calib synth gaussian-grid --classes 100 --seed 0 --out grid100
    Kotelevskii et al. 2025's task: calib synth gaussian-grid --classes 10 --layout circle --sigma 0.75 --model truth --out circle
    """
    if sigma <= 0:
        raise UsageError(f"--sigma must be > 0; got {sigma}")
    start = time.perf_counter()
    with render.progress(f"training the K = {classes} classifier", epochs if model == "mlp" else 0, "epochs") as advance:
        try:
            data = make_gaussian_grid(
                classes,
                n_cal,
                n_test,
                n_train=n_train,
                sigma=sigma,
                layout=layout,
                radius=radius,
                model=model,
                epochs=epochs,
                seed=seed,
                progress=lambda epoch, total, loss: advance(f"epoch {epoch}/{total}, loss {loss:.4f}"),
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    data["meta"]["seconds"] = round(time.perf_counter() - start, 1)
    with atomic_directory(out, force=force) as tmp:
        for split in ("cal", "test"):
            with open(os.path.join(tmp, f"{split}.npz"), "wb") as handle:
                handle.write(npz_bytes(data[split]))
        with open(os.path.join(tmp, "meta.json"), "wb") as handle:
            handle.write(dumps({k: v for k, v in data["meta"].items() if k != "seconds"}))
    render.key_values(f"calib synth gaussian-grid -> {out}", data["meta"])


@app.command(cls=options.Command)
def contaminate(
    pred: options.Pred,
    out: Annotated[str, typer.Option("--out", "-o", help="Output file (.npz, .parquet or .npy).", show_default=False)],
    labels: options.Labels = None,
    label_column: options.LabelColumn = None,
    seed: Seed = 0,
    input_kind: options.InputKind = "auto",
) -> None:
    """Kotelevskii et al. 2025's class-group temperature contamination: same argmax, destroyed calibration.

    Classes split by index in three groups; each row draws T from {2, 3, 5}, 1, or {0.25, 0.5, 0.75}
    by the group of its label, and p~ = softmax(log p / T). Other .npz arrays are carried over.
    Example: calib synth contaminate grid/test.npz --seed 0 --out grid/test_contaminated.npz
    """
    check_output_path(out, [pred, labels or "-"])
    preds = read_predictions(pred, labels_path=labels, label_column=label_column, input_kind=input_kind, require_labels=True)
    rng = np.random.default_rng(seed)
    temperatures = contamination_temperatures(preds.labels, preds.k, rng)
    logits = preds.all_logits()
    log_probs = contaminate_logits(logits, temperatures)
    if out.lower().endswith(".npz"):
        arrays = _other_npz_arrays(pred)
        arrays.update(logits=log_probs, labels=preds.labels, temperatures=temperatures)
        write_bytes_atomic(out, npz_bytes(arrays))
    else:
        write_matrix(out, log_probs, "logits", labels=preds.labels, passthrough=preds.passthrough)
    accuracy_kept = bool(np.array_equal(log_probs.argmax(1), logits.argmax(1)))
    render.note(f"contaminated {preds.n} rows (argmax unchanged: {accuracy_kept}); wrote logits to {out}")


def _other_npz_arrays(path: str) -> dict:
    if not path.lower().endswith(".npz"):
        return {}
    with np.load(path, allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files if key not in ("logits", "log_probs", "probs")}


TruthOut = Annotated[
    str,
    typer.Option(
        "--out", "-o", help="Output .npz (scores, labels, true_probs); the truths go to OUT.truth.json.", show_default=False
    ),
]
Rows = Annotated[int, typer.Option("--n", min=1, help="Rows.")]
Classes = Annotated[int, typer.Option("--classes", "-k", min=2, help="Number of classes K.")]


def _check_truth_options(command: str, out: str, temperature: float) -> None:
    """known-ce's and large-k's options, refused before any row is drawn."""
    if temperature <= 0:
        raise UsageError(f"--temperature must be > 0; got {temperature}")
    if not out.lower().endswith(".npz"):
        raise UsageError(f"--out {out}: {command} writes a .npz file")


def _write_truth(command: str, out: str, arrays: dict, report: dict, errors: dict) -> None:
    """Write ``arrays`` to the .npz ``out`` and ``report`` with the exact ``errors`` beside it
    (OUT.truth.json), and print them."""
    write_bytes_atomic(out, npz_bytes(arrays))
    write_bytes_atomic(truth_path(out), dumps({**report, "true_errors": errors}))
    shown = {key: value for key, value in report.items() if key == "accuracy"}
    render.key_values(
        f"calib synth {command} -> {out} (+ {os.path.basename(truth_path(out))})",
        {**shown, **{f"true {key}": value for key, value in errors.items()}},
    )


@app.command("known-ce", cls=options.Command)
def known_ce(
    out: TruthOut,
    classes: Classes = 10,
    temperature: Annotated[
        float, typer.Option("--temperature", "-t", help="f = softmax(log C / T): T < 1 over-confident, T > 1 under-confident.")
    ] = 0.5,
    n: Rows = 10000,
    seed: Seed = 0,
) -> None:
    """Predictions with an exactly known calibration error: C ~ Dirichlet(1), y ~ C, f = softmax(log C / T).

    Writes the TRUE l1, l2, sq, top_l1, over and under errors of f (exact given C and f).
    Example: calib synth known-ce --classes 4 --temperature 0.5 --out known.npz
    """
    _check_truth_options("known-ce", out, temperature)
    probs, labels, truth = known_ce_data(n, classes, temperature, np.random.default_rng(seed))
    report = {"classes": classes, "temperature": temperature, "n": n, "seed": seed}
    arrays = {"probs": probs, "labels": labels, "true_probs": truth}
    _write_truth("known-ce", out, arrays, report, true_calibration_errors(probs, truth))


@app.command("large-k", cls=options.Command)
def large_k(
    out: TruthOut,
    classes: Classes = 1000,
    temperature: Annotated[
        float, typer.Option("--temperature", "-t", help="z = u / T: T < 1 over-confident, T > 1 under-confident.")
    ] = 0.9,
    n: Rows = 50000,
    seed: Seed = 0,
) -> None:
    """Logits at ImageNet's shape with known true probabilities: C = softmax(u), one class lifted per
    row, y ~ C, z = u / T (top-1 accuracy about 0.75 at K = 1,000).

    Writes the TRUE l1, l2, sq, top_l1, over and under errors of softmax(z) (exact given the file).
    Example: calib synth large-k --classes 1000 --n 50000 --out imagenet_like.npz
    """
    _check_truth_options("large-k", out, temperature)
    logits, labels, truth = large_k_data(n, classes, temperature, np.random.default_rng(seed))
    accuracy = float(np.mean(logits.argmax(axis=1) == labels))
    report = {"classes": classes, "temperature": temperature, "n": n, "seed": seed, "accuracy": accuracy}
    arrays = {"logits": logits, "labels": labels, "true_probs": truth}
    _write_truth("large-k", out, arrays, report, large_k_errors(logits, truth))


@app.command("multilabel", cls=options.Command)
def multilabel(
    out: Annotated[
        str, typer.Option("--out", "-o", help="Directory to write cal.npz, test.npz and meta.json.", show_default=False)
    ],
    labels: Annotated[int, typer.Option("--labels", "-l", min=2, help="Number of labels L.")] = 50,
    n_cal: Annotated[int, typer.Option("--n-cal", min=1, help="Calibration rows.")] = 20000,
    n_test: Annotated[int, typer.Option("--n-test", min=1, help="Test rows.")] = 20000,
    correlation: Annotated[
        float,
        typer.Option("--correlation", min=0.0, max=1.0, help="Share of each label's logit spread the labels have in common."),
    ] = 0.5,
    seed: Seed = 0,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing non-empty directory.")] = False,
) -> None:
    """Multi-label predictions with known per-label truth: correlated labels, a temperature and bias per label.

    cal.npz and test.npz hold logits (N, L), labels (N, L) and true_probs (N, L); meta.json the
    per-label temperatures and biases and the true calibration error of every label (test rows).
    Example: calib synth multilabel --labels 50 --out ml
    """
    from ..api import multilabel_data, true_label_errors

    rng = np.random.default_rng(seed)
    logits, label_matrix, truth, temperatures, biases = multilabel_data(n_cal + n_test, labels, rng, correlation=correlation)
    errors = true_label_errors(logits[n_cal:], truth[n_cal:])
    meta = {
        "labels": labels,
        "n_cal": n_cal,
        "n_test": n_test,
        "correlation": correlation,
        "seed": seed,
        "temperatures": [round(float(t), 6) for t in temperatures],
        "biases": [round(float(b), 6) for b in biases],
        "true_l1_errors_test": [round(float(e), 6) for e in errors],
        "true_l1_error_macro_test": round(float(errors.mean()), 6),
    }
    with atomic_directory(out, force=force) as tmp:
        for name, rows in (("cal", slice(0, n_cal)), ("test", slice(n_cal, None))):
            arrays = {"logits": logits[rows], "labels": label_matrix[rows], "true_probs": truth[rows]}
            with open(os.path.join(tmp, f"{name}.npz"), "wb") as handle:
                handle.write(npz_bytes(arrays))
        with open(os.path.join(tmp, "meta.json"), "wb") as handle:
            handle.write(dumps(meta))
    render.key_values(
        f"calib synth multilabel -> {out}",
        {
            "rows (cal / test)": f"{n_cal} / {n_test}",
            "labels": labels,
            "true L1 error, macro (test)": meta["true_l1_error_macro_test"],
        },
    )


def truth_path(out: str) -> str:
    return os.path.splitext(out)[0] + ".truth.json"
