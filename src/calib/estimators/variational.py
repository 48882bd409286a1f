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
from typing import Protocol

import numpy as np

from ..core.numerics import CHUNK_ELEMENTS, PROB_FLOOR, row_chunks
from .coarse import coarsen, refine, top_classes
from .recalibrators import (
    DEFAULT_RECIPE,
    MAX_BOOSTED_CLASSES,
    RECALIBRATORS,
    WarmStartBoosting,
    fit_beta,
    fit_inner_folds,
    kfold,
    logits_of,
    start_catboost_import,
    tempered,
)

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


class ProbabilityRows(Protocol):
    """Probabilities of N rows, readable whole or some rows at a time (the large-K path reads rows
    a chunk at a time and never holds the (N, K) matrix)."""

    n_classes: int

    def rows(self, indices: np.ndarray) -> np.ndarray:
        """The float64 probabilities of rows ``indices``."""

    def full(self) -> np.ndarray:
        """The (N, K) float64 probabilities."""


@dataclass(frozen=True)
class ArrayRows:
    """:class:`ProbabilityRows` of an array in memory."""

    probs: np.ndarray

    @property
    def n_classes(self) -> int:
        return self.probs.shape[1]

    def rows(self, indices: np.ndarray) -> np.ndarray:
        return self.probs[indices]

    def full(self) -> np.ndarray:
        return self.probs


def as_rows(probs: np.ndarray | ProbabilityRows) -> ProbabilityRows:
    """``probs`` as :class:`ProbabilityRows` (an array becomes float64 :class:`ArrayRows`)."""
    return probs if hasattr(probs, "full") else ArrayRows(np.asarray(probs, dtype=np.float64))


def mixture(probs: np.ndarray, lam: float) -> np.ndarray:
    """(1 - lam) P + lam / K, in a new array."""
    part = probs * (1.0 - lam)
    part += lam / probs.shape[1]
    return part


#: Above this many numbers (training rows x K) the large-K warm start's temperature is fitted on a
#: seeded subsample of the training rows (2^23 doubles: 64 MiB per copy).
TS_SAMPLE_ELEMENTS = 1 << 23


class TopClassCache:
    """Each row's top ``kept`` classes of its mixed probabilities (:func:`calib.estimators.coarse.top_classes`),
    found once and shared by every outer fold: lam, and so each row's mixture, is the same in every
    fold, and a row is in four folds' training rows and one's held-out rows (five partitions of the
    row instead of one)."""

    def __init__(self, n: int, kept: int):
        self.kept = kept
        self.order = np.empty((n, kept), dtype=np.intp)
        self.known = np.zeros(n, dtype=bool)

    def of(self, rows: np.ndarray, mixed: np.ndarray) -> np.ndarray:
        """The top classes of rows ``rows`` (indices), whose mixed probabilities are ``mixed``."""
        missing = ~self.known[rows]
        if missing.any():
            new_rows = rows[missing]
            self.order[new_rows] = top_classes(mixed[missing], self.kept)
            self.known[new_rows] = True
        return self.order[rows]


class CoarseBoosting:
    """WS-CatBoost of one outer fold above MAX_BOOSTED_CLASSES classes (docs/vece.md, "Large K"): the
    TS warm start on all K classes (its temperature fitted on the training rows, or on a seeded
    subsample of TS_SAMPLE_ELEMENTS / K of them), the boosting on each row's top (max_classes - 1)
    classes by P and the rest (:func:`calib.estimators.coarse.coarsen`, for both the features and the
    warm start), and g mapped back to K classes by :func:`calib.estimators.coarse.refine` in
    proportion to the warm start. Rows are read from ``source`` a chunk at a time, so no (N, K)
    array is held."""

    #: about how many numbers one chunk of rows holds
    chunk_elements = CHUNK_ELEMENTS

    def __init__(self, source: ProbabilityRows, labels, train, lam, tops: TopClassCache, rng, recipe):
        self.source, self.labels, self.lam, self.tops = source, labels, lam, tops
        k = source.n_classes
        fitted_on = (
            train if len(train) * k <= TS_SAMPLE_ELEMENTS else np.sort(rng.choice(train, TS_SAMPLE_ELEMENTS // k, replace=False))
        )
        self.beta = fit_beta(logits_of(mixture(source.rows(fitted_on), lam)), labels[fitted_on])
        # only the coarse arrays of each chunk are kept: its (chunk, K) arrays go at once
        parts = [self._coarse(chunk, source.rows(chunk))[:3] for chunk in self._chunks(train)]
        features, warm, fit_labels = (np.concatenate(part) for part in zip(*parts))
        self.boosting = WarmStartBoosting(features, fit_labels, rng, recipe, warm=warm)

    def _chunks(self, indices: np.ndarray):
        return (indices[rows] for rows in row_chunks(len(indices), self.source.n_classes, self.chunk_elements))

    def _coarse(self, rows: np.ndarray, probs: np.ndarray):
        """(coarse P, coarse warm start, coarse labels, order, warm start) of rows ``rows`` (indices)
        whose probabilities are ``probs`` (f, before the mixture)."""
        new = mixture(probs, self.lam)
        warm = tempered(logits_of(new), self.beta)
        order = self.tops.of(rows, new)
        hit = order == self.labels[rows][:, None]
        coarse_labels = np.where(hit.any(axis=1), hit.argmax(axis=1), self.tops.kept)
        return coarsen(new, order), coarsen(warm, order), coarse_labels, order, warm

    def losses(self, held_out: np.ndarray, models: list) -> dict:
        """The losses of rows ``held_out`` under g (the boosting's ``models``), a chunk at a time."""
        boost = self.boosting.boosted(models)
        parts = []
        for chunk in self._chunks(held_out):
            probs = self.source.rows(chunk)  # each chunk read once
            features, warm_coarse, _, order, warm = self._coarse(chunk, probs)
            recalibrated = refine(warm, boost(features, warm_coarse), order)
            parts.append(per_sample_losses(probs, recalibrated, self.labels[chunk]))
        return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


def out_of_fold_losses(
    probs: np.ndarray | ProbabilityRows,
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
    every fold's boosting inputs are kept until the fits of all folds, fitted one after another);
    g(f) is never held for all rows (each fold's losses are taken from its own rows), and the
    mixture is made per fold, not for all rows (the same values: lam depends on the fold size only).
    WS-CatBoost above ``max_classes`` classes (:class:`CoarseBoosting`) reads ``probs`` a chunk of
    rows at a time and holds no (N, K) array.
    """
    if recalibrator == "ws-catboost":
        start_catboost_import()  # while the folds' warm starts are fitted
    source = as_rows(probs)
    n = len(labels)
    rng = np.random.default_rng(seed)
    lam = 1.0 / ((n if folds == 1 else (n * (folds - 1)) // folds) + 1)
    if folds == 1:
        outer = [(np.arange(n), np.arange(n))]
    else:
        outer = [(held_out, np.setdiff1d(np.arange(n), held_out, assume_unique=True)) for held_out in kfold(n, folds, rng)]
    losses: dict = {}

    def keep(held_out, part):
        for key, values in part.items():
            losses.setdefault(key, np.empty(n))[held_out] = values

    if recalibrator == "ws-catboost" and source.n_classes > max_classes:
        # Every fold's warm start and inner folds first (the same random draws, in the same order, as
        # fitting fold by fold), then all folds' CatBoost fits one after another: the same g.
        tops = TopClassCache(n, max_classes - 1)
        coarse = [CoarseBoosting(source, labels, train, lam, tops, rng, recipe) for _, train in outer]
        models = iter(fit_inner_folds([plan.boosting for plan in coarse], progress))
        for (held_out, _), plan in zip(outer, coarse):
            keep(held_out, plan.losses(held_out, [next(models) for _ in plan.boosting.folds]))
        return losses
    probs = source.full()
    if recalibrator == "ws-catboost":
        plans = [WarmStartBoosting(mixture(probs[train], lam), labels[train], rng, recipe) for _, train in outer]
        models = iter(fit_inner_folds(plans, progress))
        maps = [plan.recalibrator([next(models) for _ in plan.folds]) for plan in plans]
    else:
        maps = [RECALIBRATORS[recalibrator](mixture(probs[train], lam), labels[train], rng) for _, train in outer]
    for (held_out, _), g in zip(outer, maps):
        keep(held_out, per_sample_losses(probs[held_out], g(mixture(probs[held_out], lam)), labels[held_out]))
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
    probs: np.ndarray | ProbabilityRows,
    labels: np.ndarray,
    recalibrator: str = "ws-catboost",
    *,
    folds: int = OUTER_FOLDS,
    seed: int = 0,
    progress=None,
    max_classes: int = MAX_BOOSTED_CLASSES,
    recipe: str = DEFAULT_RECIPE,
) -> VariationalEstimate:
    """V-ECE of ``probs`` (N, K, or :class:`ProbabilityRows`) against ``labels``: every loss from one
    out-of-fold recalibration (WS-CatBoost's by ``recipe``)."""
    source = as_rows(probs)
    losses = out_of_fold_losses(
        source, labels, recalibrator, folds=folds, seed=seed, progress=progress, max_classes=max_classes, recipe=recipe
    )
    raw = {key: float(-np.mean(value)) for key, value in losses.items()}
    values = {key: max(value, 0.0) + 0.0 for key, value in raw.items()}  # + 0.0: no -0.0
    boosted = recalibrator == "ws-catboost"
    coarsened = boosted and source.n_classes > max_classes
    return VariationalEstimate(values, raw, recalibrator, coarsened, folds, seed, recipe if boosted else None)
