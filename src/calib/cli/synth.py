"""`calib synth gaussian-grid | contaminate | known-ce | large-k | multilabel`: data with known truth (docs/benchmarks.md)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from .. import operations
from . import options, render

app = typer.Typer(
    help="Generate data with known truth: the Gaussian grid, contamination, known calibration error. "
    "Example: calib synth gaussian-grid --classes 100 --out grid100",
    no_args_is_help=True,
)


def _default(kind: str, name: str):
    """The library's default of setting ``name`` of the datasets of ``kind`` (calib.synth.files.DEFAULTS)."""
    return operations.Synthesis.default(kind, name)


Seed = Annotated[int, typer.Option("--seed", help="Seed of every random choice.")]


@app.command("gaussian-grid", cls=options.Command)
def gaussian_grid(
    out: Annotated[
        str, typer.Option("--out", "-o", help="Directory to write cal.npz, test.npz and meta.json.", show_default=False)
    ],
    classes: Annotated[int, typer.Option("--classes", "-k", min=2, help="Number of classes K (up to 10,000).")] = _default(
        "gaussian-grid", "classes"
    ),
    n_cal: Annotated[int, typer.Option("--n-cal", min=1, help="Calibration rows.")] = _default("gaussian-grid", "n_cal"),
    n_test: Annotated[int, typer.Option("--n-test", min=1, help="Test rows.")] = _default("gaussian-grid", "n_test"),
    n_train: Annotated[int, typer.Option("--n-train", min=1, help="Rows the classifier is trained on.")] = _default(
        "gaussian-grid", "n_train"
    ),
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Training epochs.")] = _default("gaussian-grid", "epochs"),
    sigma: Annotated[
        float, typer.Option("--sigma", min=0.0, help="Class standard deviation (Kotelevskii et al. 2025's circle: 0.75).")
    ] = _default("gaussian-grid", "sigma"),
    layout: Annotated[
        str, typer.Option("--layout", help="auto (circle for K < 10, else square grid) | grid | circle.")
    ] = _default("gaussian-grid", "layout"),
    radius: Annotated[float, typer.Option("--radius", help="Circle radius.")] = _default("gaussian-grid", "radius"),
    model: Annotated[
        str, typer.Option("--model", help="mlp (train the RFF + MLP classifier) | truth (logits = log p(y|x)).")
    ] = _default("gaussian-grid", "model"),
    seed: Seed = 0,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing non-empty directory.")] = False,
) -> None:
    """Gaussian-grid task of Kazantsev et al. 2025 with a trained classifier, its logits, and the true p(y|x).

    Example: calib synth gaussian-grid --classes 100 --seed 0 --out grid100
    Kotelevskii et al. 2025's task: calib synth gaussian-grid --classes 10 --layout circle --sigma 0.75 --model truth --out circle
    """
    synthesis = operations.Synthesis(
        "gaussian-grid",
        seed=seed,
        classes=classes,
        n_cal=n_cal,
        n_test=n_test,
        n_train=n_train,
        epochs=epochs,
        sigma=sigma,
        layout=layout,
        radius=radius,
        model=model,
    )
    with render.progress(f"training the K = {classes} classifier", epochs if model == "mlp" else 0, "epochs") as advance:
        meta = operations.synthesize(
            synthesis,
            out,
            force=force,
            progress=lambda epoch, total, loss: advance(f"epoch {epoch}/{total}, loss {loss:.4f}"),
        )
    render.key_values(f"calib synth gaussian-grid -> {out}", meta)


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
    source = operations.Source(pred, options.reading(locals(), require_labels=True))
    done = operations.synthesize(operations.Synthesis("contaminate", seed=seed), out, pred=source)
    render.note(f"contaminated {done['rows']} rows (argmax unchanged: {done['argmax unchanged']}); wrote logits to {out}")


TruthOut = Annotated[
    str,
    typer.Option(
        "--out", "-o", help="Output .npz (scores, labels, true_probs); the truths go to OUT.truth.json.", show_default=False
    ),
]
Rows = Annotated[int, typer.Option("--n", min=1, help="Rows.")]
Classes = Annotated[int, typer.Option("--classes", "-k", min=2, help="Number of classes K.")]


def _write_truth(synthesis, out: str) -> None:
    """Write the .npz ``out`` with its exact errors beside it (OUT.truth.json), and show them."""
    shown = operations.synthesize(synthesis, out)
    truth = os.path.basename(operations.Synthesis.truth_path(out))
    render.key_values(f"calib synth {synthesis.kind} -> {out} (+ {truth})", shown)


@app.command("known-ce", cls=options.Command)
def known_ce(
    out: TruthOut,
    classes: Classes = _default("known-ce", "classes"),
    temperature: Annotated[
        float, typer.Option("--temperature", "-t", help="f = softmax(log C / T): T < 1 over-confident, T > 1 under-confident.")
    ] = _default("known-ce", "temperature"),
    n: Rows = _default("known-ce", "n"),
    seed: Seed = 0,
) -> None:
    """Predictions with an exactly known calibration error: C ~ Dirichlet(1), y ~ C, f = softmax(log C / T).

    Writes the TRUE l1, l2, sq, top_l1, over and under errors of f (exact given C and f).
    Example: calib synth known-ce --classes 4 --temperature 0.5 --out known.npz
    """
    _write_truth(operations.Synthesis("known-ce", seed=seed, classes=classes, temperature=temperature, n=n), out)


@app.command("large-k", cls=options.Command)
def large_k(
    out: TruthOut,
    classes: Classes = _default("large-k", "classes"),
    temperature: Annotated[
        float, typer.Option("--temperature", "-t", help="z = u / T: T < 1 over-confident, T > 1 under-confident.")
    ] = _default("large-k", "temperature"),
    n: Rows = _default("large-k", "n"),
    seed: Seed = 0,
) -> None:
    """Logits at ImageNet's shape with known true probabilities: C = softmax(u), one class lifted per
    row, y ~ C, z = u / T (top-1 accuracy about 0.75 at K = 1,000).

    Writes the TRUE l1, l2, sq, top_l1, over and under errors of softmax(z) (exact given the file).
    Example: calib synth large-k --classes 1000 --n 50000 --out imagenet_like.npz
    """
    _write_truth(operations.Synthesis("large-k", seed=seed, classes=classes, temperature=temperature, n=n), out)


@app.command("multilabel", cls=options.Command)
def multilabel(
    out: Annotated[
        str, typer.Option("--out", "-o", help="Directory to write cal.npz, test.npz and meta.json.", show_default=False)
    ],
    labels: Annotated[int, typer.Option("--labels", "-l", min=2, help="Number of labels L.")] = _default("multilabel", "labels"),
    n_cal: Annotated[int, typer.Option("--n-cal", min=1, help="Calibration rows.")] = _default("multilabel", "n_cal"),
    n_test: Annotated[int, typer.Option("--n-test", min=1, help="Test rows.")] = _default("multilabel", "n_test"),
    correlation: Annotated[
        float,
        typer.Option("--correlation", min=0.0, max=1.0, help="Share of each label's logit spread the labels have in common."),
    ] = _default("multilabel", "correlation"),
    seed: Seed = 0,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing non-empty directory.")] = False,
) -> None:
    """Multi-label predictions with known per-label truth: correlated labels, a temperature and bias per label.

    cal.npz and test.npz hold logits (N, L), labels (N, L) and true_probs (N, L); meta.json the
    per-label temperatures and biases and the true calibration error of every label (test rows).
    Example: calib synth multilabel --labels 50 --out ml
    """
    synthesis = operations.Synthesis("multilabel", seed=seed, labels=labels, n_cal=n_cal, n_test=n_test, correlation=correlation)
    render.key_values(f"calib synth multilabel -> {out}", operations.synthesize(synthesis, out, force=force))
