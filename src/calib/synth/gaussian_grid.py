"""The Gaussian-grid task (CMCE paper, appendix E; docs/benchmarks.md).

K classes with equal priors; class k draws x ~ N(mu_k, sigma^2 I) in 2-d. Centres sit on a
ceil(sqrt K) x ceil(sqrt K) square grid with spacing 1 centred at the origin (the first K points in
row-major order), or for K < 10 on a circle of radius 2.25. The posterior is exact:
p(y = k | x) = softmax_k(-||x - mu_k||^2 / (2 sigma^2)).
"""

from __future__ import annotations

import math

import numpy as np

from ..core.numerics import log_softmax, row_chunks

SIGMA = 0.35
CIRCLE_RADIUS = 2.25
LAYOUTS = ("auto", "grid", "circle")


def grid_centres(n_classes: int, layout: str = "auto", radius: float = CIRCLE_RADIUS) -> np.ndarray:
    """(K, 2) class centres; ``auto`` is a circle for K < 10 and the square grid otherwise."""
    if layout == "auto":
        layout = "circle" if n_classes < 10 else "grid"
    if layout == "circle":
        angles = 2.0 * np.pi * np.arange(n_classes) / n_classes
        return radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    side = math.ceil(math.sqrt(n_classes))
    coords = np.arange(side) - (side - 1) / 2.0
    xx, yy = np.meshgrid(coords, coords, indexing="xy")
    return np.stack([xx.ravel(), yy.ravel()], axis=1)[:n_classes]


def sample_points(centres: np.ndarray, sigma: float, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Labels uniform over the K classes, then x ~ N(mu_y, sigma^2 I)."""
    labels = rng.integers(0, len(centres), size=n)
    points = centres[labels] + sigma * rng.standard_normal((n, 2))
    return points, labels


def true_log_posterior(points: np.ndarray, centres: np.ndarray, sigma: float) -> np.ndarray:
    """log p(y | x) for every row, computed in row chunks (K may be 10,000)."""
    out = np.empty((len(points), len(centres)))
    sq_centres = (centres**2).sum(axis=1)
    for rows in row_chunks(len(points), len(centres)):
        x = points[rows]
        # ||x - mu||^2 = ||x||^2 - 2 x.mu + ||mu||^2; the ||x||^2 term cancels in the softmax
        energy = -(sq_centres[None, :] - 2.0 * x @ centres.T) / (2.0 * sigma**2)
        out[rows] = log_softmax(energy)
    return out


def true_posterior(points: np.ndarray, centres: np.ndarray, sigma: float) -> np.ndarray:
    return np.exp(true_log_posterior(points, centres, sigma))


MODELS = ("mlp", "truth")


def make_gaussian_grid(
    n_classes: int,
    n_cal: int,
    n_test: int,
    *,
    n_train: int = 50_000,
    sigma: float = SIGMA,
    layout: str = "auto",
    radius: float = CIRCLE_RADIUS,
    model: str = "mlp",
    epochs: int = 15,
    seed: int = 0,
    progress=None,
) -> dict:
    """Calibration and test splits of the Gaussian-grid task with a model's logits and the truth.

    model ``mlp``: the RFF + MLP classifier of :mod:`calib.synth.classifier`, trained on n_train
    fresh points; ``truth``: logits = log p(y | x) exactly (ATS-CP paper contaminates these).
    Returns {"cal": arrays, "test": arrays, "meta": dict}; arrays are logits (float32), labels
    (int64), true_probs (float32) and points (float32, usable as --features).
    """
    if model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}; got {model!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")
    rng = np.random.default_rng(seed)
    centres = grid_centres(n_classes, layout, radius)
    train_points, train_labels = sample_points(centres, sigma, n_train if model == "mlp" else 0, rng)
    splits = {name: sample_points(centres, sigma, n, rng) for name, n in (("cal", n_cal), ("test", n_test))}
    meta = {
        "task": "gaussian-grid",
        "classes": n_classes,
        "sigma": sigma,
        "layout": layout,
        "radius": radius,
        "model": model,
        "seed": seed,
        "n_cal": n_cal,
        "n_test": n_test,
    }
    network = None
    if model == "mlp":
        from .classifier import TrainConfig, train_classifier

        network = train_classifier(
            train_points, train_labels, n_classes, seed=seed, config=TrainConfig(epochs=epochs), progress=progress
        )
        meta.update(n_train=n_train, epochs=epochs)
    out = {"meta": meta}
    for name, (points, labels) in splits.items():
        log_truth = true_log_posterior(points, centres, sigma)
        if network is not None:
            from .classifier import predict_logits

            logits = predict_logits(network, points)
        else:
            logits = log_truth.astype(np.float32)
        truth = np.exp(log_truth)
        out[name] = {
            "logits": logits,
            "labels": labels.astype(np.int64),
            "true_probs": truth.astype(np.float32),
            "points": points.astype(np.float32),
        }
        meta[f"{name}_accuracy"] = float(np.mean(logits.argmax(axis=1) == labels))
        meta[f"{name}_bayes_accuracy"] = float(np.mean(truth.argmax(axis=1) == labels))
    return out
