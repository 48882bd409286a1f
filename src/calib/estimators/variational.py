"""V-ECE, the cross-validated variational calibration error (V-ECE paper; docs/metrics.md).

CE(f) = E[l_f(f(X), Y)] - inf_g E[l_f(g(f(X)), Y)] for a proper loss that may depend on f. A
recalibration map g is fitted out of fold (m = 5 shuffled folds), its inputs mixed with the uniform
distribution, P = (1 - lam) p + lam / K with lam = 1 / (n_train + 1); the losses are evaluated at the
original p. The estimate is -(1/N) sum_i l_i, clipped at 0 once at the end; any g gives a lower bound
in expectation. With d = g - f and o = one-hot(y):
  l1:  l = sum_j sign(d_j) (f_j - o_j)          l2: l = <d / ||d||_2, f - o>  (0 where d = 0)
  sq:  l = sum_j (g_j - o_j)^2 - (f_j - o_j)^2  kl: l = -log g_y + log f_y
  K = 2 uses the class-1 probability only: l = sign(g1 - f1)(f1 - y) and (g1 - y)^2 - (f1 - y)^2.
Top class j* = argmax f, F = f_j*, G = g_j*, Y = 1{y = j*}:
  over = (1/N) sum 1{G < F}(F - Y),  under = (1/N) sum 1{G > F}(Y - F),  over + under = top_l1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..numerics import PROB_FLOOR, row_chunks
from .recalibrators import DEFAULT_RECIPE, MAX_BOOSTED_CLASSES, RECALIBRATORS, WarmStartBoosting, fit_inner_folds, kfold

OUTER_FOLDS = 5
LOSSES = ("l1", "l2", "sq", "kl", "top_l1", "over", "under")
#: ||d||_2 floor of the L2 loss (docs/metrics.md).
NORM_FLOOR = 1e-300


@dataclass
class VariationalEstimate:
    """Estimates clipped at 0 once at the end, and the raw values (over + under = top_l1 exactly)."""

    values: dict
    unclipped: dict
    recalibrator: str
    coarsened: bool
    folds: int
    seed: int
    #: WS-CatBoost's recipe (None for the other recalibrators)
    recipe: str | None = None


def out_of_fold_losses(
    probs: np.ndarray,
    labels: np.ndarray,
    recalibrator: str = "ws-catboost",
    *,
    folds: int = OUTER_FOLDS,
    seed: int = 0,
    progress=None,
    max_classes: int = MAX_BOOSTED_CLASSES,
    recipe: str = DEFAULT_RECIPE,
) -> dict:
    """l_i of every loss of the module docstring for every row, g fitted on the other folds' mixed
    probabilities and applied to the row's own fold. ``folds=1`` is the in-sample variant (the
    V-ECE paper's "IS" estimators): g fitted on every row and applied to them.

    Memory: besides ``probs``, one training fold's mixed copy and what its fit needs (WS-CatBoost:
    every fold's boosting inputs, at most 10 columns each, are kept until the fits of all folds,
    fitted one after another); g(f) is never held for all rows (each fold's losses are taken
    from its own rows), and the mixture is made per fold, not for all rows (the same values: lam
    depends on the fold size only).
    """
    n, n_classes = probs.shape
    fit = RECALIBRATORS[recalibrator]
    rng = np.random.default_rng(seed)
    n_train = n if folds == 1 else (n * (folds - 1)) // folds
    lam = 1.0 / (n_train + 1)
    kwargs = {"progress": progress, "max_classes": max_classes, "recipe": recipe} if recalibrator == "ws-catboost" else {}

    def mixed(rows: np.ndarray) -> np.ndarray:
        """(1 - lam) P + lam / K of ``rows``, in a new array."""
        part = probs[rows] * (1.0 - lam)
        part += lam / n_classes
        return part

    if folds == 1:
        every = mixed(np.arange(n))
        return per_sample_losses(probs, fit(every, labels, rng, **kwargs)(every), labels)
    outer = [(held_out, np.setdiff1d(np.arange(n), held_out, assume_unique=True)) for held_out in kfold(n, folds, rng)]
    if recalibrator == "ws-catboost":
        # Every fold's warm start and inner folds first (the same random draws, in the same order, as
        # fitting fold by fold), then all folds' CatBoost fits one after another: the same g.
        plans = [WarmStartBoosting(mixed(train), labels[train], rng, max_classes, recipe) for _, train in outer]
        models = iter(fit_inner_folds(plans, progress))
        maps = [plan.recalibrator([next(models) for _ in plan.folds]) for plan in plans]
    else:
        maps = [fit(mixed(train), labels[train], rng) for _, train in outer]
    losses: dict = {}
    for (held_out, _), g in zip(outer, maps):
        part = per_sample_losses(probs[held_out], g(mixed(held_out)), labels[held_out])
        for key, values in part.items():
            losses.setdefault(key, np.empty(n))[held_out] = values
    return losses


def per_sample_losses(probs: np.ndarray, recalibrated: np.ndarray, labels: np.ndarray) -> dict:
    """l_i of every loss of the module docstring (the estimate is minus their mean), a chunk of rows
    at a time: the N x K temporaries (one-hot, residual, difference) stay chunk-sized."""
    parts = [_chunk_losses(probs[rows], recalibrated[rows], labels[rows]) for rows in row_chunks(*probs.shape)]
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


def _chunk_losses(probs: np.ndarray, recalibrated: np.ndarray, labels: np.ndarray) -> dict:
    """l_i of every loss of the module docstring for one chunk of rows."""
    rows = np.arange(len(labels))
    onehot = np.zeros_like(probs)
    onehot[rows, labels] = 1.0
    residual = probs - onehot
    diff = recalibrated - probs
    if probs.shape[1] == 2:
        y = labels.astype(np.float64)
        l1 = np.sign(diff[:, 1]) * residual[:, 1]
        losses = {"l1": l1, "l2": l1, "sq": (recalibrated[:, 1] - y) ** 2 - residual[:, 1] ** 2}
    else:
        norm = np.maximum(np.sqrt((diff**2).sum(axis=1)), NORM_FLOOR)
        losses = {
            "l1": (np.sign(diff) * residual).sum(axis=1),
            "l2": np.where(norm > NORM_FLOOR, (diff * residual).sum(axis=1) / norm, 0.0),
            "sq": ((recalibrated - onehot) ** 2 - residual**2).sum(axis=1),
        }
    losses["kl"] = -np.log(np.maximum(recalibrated[rows, labels], PROB_FLOOR)) + np.log(
        np.maximum(probs[rows, labels], PROB_FLOOR)
    )
    top = probs.argmax(axis=1)
    f_top, g_top = probs[rows, top], recalibrated[rows, top]
    y_top = (labels == top).astype(np.float64)
    losses["over"] = -np.where(g_top < f_top, f_top - y_top, 0.0)
    losses["under"] = -np.where(g_top > f_top, y_top - f_top, 0.0)
    losses["top_l1"] = losses["over"] + losses["under"]
    return losses


def variational_calibration_error(
    probs: np.ndarray,
    labels: np.ndarray,
    recalibrator: str = "ws-catboost",
    *,
    folds: int = OUTER_FOLDS,
    seed: int = 0,
    progress=None,
    max_classes: int = MAX_BOOSTED_CLASSES,
    recipe: str = DEFAULT_RECIPE,
) -> VariationalEstimate:
    """V-ECE of ``probs`` (N, K) against ``labels``: every loss from one out-of-fold recalibration
    (WS-CatBoost's by ``recipe``)."""
    probs = np.asarray(probs, dtype=np.float64)
    losses = out_of_fold_losses(
        probs, labels, recalibrator, folds=folds, seed=seed, progress=progress, max_classes=max_classes, recipe=recipe
    )
    raw = {key: float(-np.mean(value)) for key, value in losses.items()}
    values = {key: max(value, 0.0) + 0.0 for key, value in raw.items()}  # + 0.0: no -0.0
    boosted = recalibrator == "ws-catboost"
    coarsened = boosted and probs.shape[1] > max_classes
    return VariationalEstimate(values, raw, recalibrator, coarsened, folds, seed, recipe if boosted else None)
