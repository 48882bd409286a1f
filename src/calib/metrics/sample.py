"""Whole-sample metrics: estimators that need every row at once, so they run on one seeded
(sub)sample after the streaming pass, and one estimation serves every key of its family.

Families (V-ECE paper): the cross-validated variational errors (``vece_*``), their in-sample variants
(``vece_is_*``: g fitted and scored on the same rows, so they can overfit upwards) and KDE-ECE
(``kde_ece_*``, Popordanoska, Sayer & Blaschko 2022). A metric key of a family is an ordinary entry of
``calib.metrics.METRICS`` naming its family and the field of the estimate it reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..core.numerics import softmax
from ..estimators import OUTER_FOLDS, RECIPES, kde_calibration_errors, variational_calibration_error
from ..estimators.recalibrators import DEFAULT_RECIPE, check_recalibrator, check_recipe
from ..estimators.variational import as_rows


@dataclass(frozen=True)
class SampleConfig:
    """Settings of the whole-sample metrics (docs/metrics.md); inputs with more than ``max_rows``
    rows are subsampled (seeded) and the report says so. ``recipe``: WS-CatBoost's
    (calib.estimators.RECIPES)."""

    recalibrator: str = "ws-catboost"
    seed: int = 0
    max_rows: int = 20_000
    recipe: str = DEFAULT_RECIPE

    def __post_init__(self):
        check_recalibrator(self.recalibrator)
        check_recipe(self.recipe)


@dataclass(frozen=True)
class SampleFamily:
    """One estimation that yields several metric keys.

    ``estimate(probs, labels, config, sample, progress)`` returns ({field: value}, {field: unclipped
    value} or None, settings), the settings including ``sample`` (the rows scored and whether they
    were subsampled); ``boosted_fits(config)`` is how many CatBoost models it trains."""

    name: str
    estimate: Callable[..., tuple[dict, dict | None, dict]]
    boosted_fits: Callable[[SampleConfig], int]
    #: The fewest rows it estimates on (fewer: its keys are undefined, and the report says why).
    min_rows: Callable[[SampleConfig], int]
    #: What it needs the rows for, said when there are too few.
    needs: str


#: The fewest rows a WS-CatBoost fit of an inner fold trains on: below it CatBoost's row subsampling
#: (Bernoulli, 0.5) can draw no row of a tree and fail. Measured on random logits (8 seeds, K = 2, 10
#: and 100, each recipe): fits failed at 20 rows (paper, quick) and 25 (quick), none from 30 up; the
#: rule below puts the least input at 27 rows for the default recipe, 23 for paper, 40 for quick.
MIN_BOOSTED_ROWS = 16
#: The fewest rows of an outer training fold for the other recalibrators (a temperature, a binning).
MIN_FIT_ROWS = 2


def _variational(folds: int):
    def estimate(probs, labels, config: SampleConfig, sample: dict, progress):
        result = variational_calibration_error(
            probs, labels, config.recalibrator, folds=folds, seed=config.seed, progress=progress, recipe=config.recipe
        )
        settings = {
            "recalibrator": config.recalibrator,
            **({"recipe": result.recipe} if result.recipe else {}),
            "folds": result.folds,
            "seed": config.seed,
            **sample,
            "coarsened_boosting": result.coarsened,
        }
        return result.values, result.unclipped, settings

    def boosted_fits(config: SampleConfig) -> int:
        """folds x the recipe's inner folds (0 for recalibrators other than WS-CatBoost)."""
        return 0 if config.recalibrator != "ws-catboost" else RECIPES[config.recipe].inner_folds * folds

    def min_rows(config: SampleConfig) -> int:
        """n such that every fit trains on enough rows: a fold's training rows are n (F - 1) / F
        (F = ``folds``; all n in sample), and WS-CatBoost's inner folds train on (k - 1) / k of
        those, at least :data:`MIN_BOOSTED_ROWS`; other recalibrators need :data:`MIN_FIT_ROWS`."""
        share = 1.0 if folds == 1 else (folds - 1) / folds
        if config.recalibrator == "ws-catboost":
            inner = RECIPES[config.recipe].inner_folds
            share *= (inner - 1) / inner
            return max(math.ceil(MIN_BOOSTED_ROWS / share - 1e-9), folds)
        return max(math.ceil(MIN_FIT_ROWS / share - 1e-9), folds)

    return estimate, boosted_fits, min_rows


def _kde(probs, labels, config: SampleConfig, sample: dict, progress):
    values, bandwidth = kde_calibration_errors(as_rows(probs).full(), labels)
    return values, None, {"kernel": "dirichlet", "bandwidth": bandwidth, "bandwidth_choice": "leave-one-out likelihood", **sample}


#: V-ECE: out-of-fold recalibration (OUTER_FOLDS folds)
VARIATIONAL = SampleFamily("variational", *_variational(OUTER_FOLDS), "its recalibrator's fits on each fold")
#: The in-sample variants: the recalibrator fitted and scored on the same rows
IN_SAMPLE = SampleFamily("in-sample variational", *_variational(1), "its recalibrator's fit")
KDE = SampleFamily("kde", _kde, lambda config: 0, lambda config: 2, "its leave-one-out bandwidth")
#: The order the families run in
FAMILIES = (VARIATIONAL, IN_SAMPLE, KDE)


def sample_rows(n: int, config: SampleConfig) -> np.ndarray:
    """The rows the whole-sample metrics score: all of them, or ``max_rows`` drawn without
    replacement by ``seed`` (sorted)."""
    if n <= config.max_rows:
        return np.arange(n)
    return np.sort(np.random.default_rng(config.seed).choice(n, config.max_rows, replace=False))


def model_probs(preds, rows: np.ndarray) -> np.ndarray:
    """The model's own probabilities of ``rows`` of ``preds`` (calib.io.Predictions): as given, or
    the softmax of the logits."""
    logits, given = preds.logits_and_given(rows)
    return given if given is not None else softmax(logits)


class SampledRows:
    """The probabilities of the sampled rows ``selected`` of a predictions file, computed on demand by
    ``probs_of(file rows)`` (the model's by default): whole, once, for the estimators that need every
    row at once, or a few rows at a time for V-ECE's large-K path
    (calib.estimators.variational.ProbabilityRows)."""

    def __init__(self, preds, selected: np.ndarray, probs_of: Callable[[np.ndarray], np.ndarray] | None = None):
        self.selected, self.n_classes = selected, preds.k
        self.probs_of = probs_of or (lambda rows: model_probs(preds, rows))
        self._full = None

    def rows(self, indices: np.ndarray) -> np.ndarray:
        return self.probs_of(self.selected[indices])

    def full(self) -> np.ndarray:
        if self._full is None:
            self._full = self.probs_of(self.selected)
        return self._full


def sample_entries(metrics: list, probs, labels: np.ndarray, config: SampleConfig, *, n_total: int, progress=None) -> dict:
    """Report entries {key: {"value", "settings"[, "unclipped"]}} of the whole-sample ``metrics``
    (Metric entries) on ``probs`` (an (n, K) array or :class:`SampledRows`) and ``labels``, the rows
    :func:`sample_rows` chose of ``n_total``."""
    out = {}
    for family in FAMILIES:
        wanted = [metric for metric in metrics if metric.family is family]
        if not wanted:
            continue
        sample = {"rows": len(labels), "subsampled": len(labels) < n_total}
        least = family.min_rows(config)
        if len(labels) < least:
            skipped = {"skipped": f"needs at least {least} rows for {family.needs}; {len(labels)} here", **sample}
            out.update({metric.key: {"value": None, "settings": skipped} for metric in wanted})
            continue
        values, unclipped, settings = family.estimate(probs, labels, config, sample, progress)
        for metric in wanted:
            out[metric.key] = {"value": values[metric.field], "settings": settings}
            if unclipped is not None:
                out[metric.key]["unclipped"] = unclipped[metric.field]
    return {metric.key: out[metric.key] for metric in metrics}


def boosted_fit_count(metrics: list, config: SampleConfig) -> int:
    """CatBoost models one whole-sample pass over ``metrics`` (Metric entries) trains."""
    families = {metric.family for metric in metrics if metric.family is not None}
    return sum(family.boosted_fits(config) for family in FAMILIES if family in families)
