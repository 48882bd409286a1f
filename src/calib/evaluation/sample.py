"""The whole-sample metrics of an evaluation (V-ECE, its in-sample variants, KDE-ECE): they need
every row at once, so they run on one seeded (sub)sample after the streaming pass."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..calibrators.base import Calibrator, calibrator_inputs
from ..estimators import (
    DEFAULT_RECIPE,
    IN_SAMPLE_METRICS,
    KDE_METRICS,
    VECE_METRICS,
    kde_calibration_errors,
    variational_calibration_error,
)
from ..estimators.recalibrators import check_recipe
from ..io.predictions import Predictions
from ..numerics import softmax


@dataclass(frozen=True)
class VeceConfig:
    """V-ECE settings of an evaluation (docs/metrics.md); it needs every row at once, so inputs with more
    than ``max_rows`` rows are subsampled (seeded) and the report says so."""

    recalibrator: str = "ws-catboost"
    seed: int = 0
    max_rows: int = 20_000
    #: WS-CatBoost's recipe (calib.estimators.RECIPES)
    recipe: str = DEFAULT_RECIPE

    def __post_init__(self):
        check_recipe(self.recipe)


def vece_results(
    preds: Predictions,
    keys: list[str],
    config: VeceConfig,
    calibrator: Calibrator | None = None,
    features: np.ndarray | None = None,
    progress=None,
) -> dict:
    """The whole-sample entries (V-ECE, its in-sample variants, KDE-ECE) on one (sub)sample of rows:
    one recalibration serves every key of a family."""
    rows = np.arange(preds.n)
    if preds.n > config.max_rows:
        rows = np.sort(np.random.default_rng(config.seed).choice(preds.n, config.max_rows, replace=False))
    probs = _sample_probs(preds, rows, calibrator, None if features is None else features[rows])
    labels, subsampled = preds.labels[rows], len(rows) < preds.n
    out = {}
    for family, folds in ((VECE_METRICS, None), (IN_SAMPLE_METRICS, 1)):
        wanted = [key for key in keys if key in family]
        if not wanted:
            continue
        estimate = variational_calibration_error(
            probs,
            labels,
            config.recalibrator,
            seed=config.seed,
            progress=progress,
            recipe=config.recipe,
            **({} if folds is None else {"folds": folds}),
        )
        settings = {
            "recalibrator": config.recalibrator,
            **({"recipe": estimate.recipe} if estimate.recipe else {}),
            "folds": estimate.folds,
            "seed": config.seed,
            "rows": len(rows),
            "subsampled": subsampled,
            "coarsened_boosting": estimate.coarsened,
        }
        out.update(
            {
                key: {"value": estimate.values[family[key]], "settings": settings, "unclipped": estimate.unclipped[family[key]]}
                for key in wanted
            }
        )
    wanted = [key for key in keys if key in KDE_METRICS]
    if wanted:
        values, bandwidth = kde_calibration_errors(probs, labels)
        settings = {
            "kernel": "dirichlet",
            "bandwidth": bandwidth,
            "bandwidth_choice": "leave-one-out likelihood",
            "rows": len(rows),
            "subsampled": subsampled,
        }
        out.update({key: {"value": values[KDE_METRICS[key]], "settings": settings} for key in wanted})
    return {key: out[key] for key in keys}


def _sample_probs(preds: Predictions, rows: np.ndarray, calibrator: Calibrator | None, features: np.ndarray | None) -> np.ndarray:
    """The probabilities V-ECE and KDE-ECE score on ``rows`` (the float64 logits are freed on return,
    before the estimators' own copies)."""
    if calibrator is not None:
        logits, given = calibrator_inputs(calibrator, preds, rows)
        return calibrator.transform_probs_with_info(logits, features, **given)[0]
    logits, given = preds.logits_and_given(rows)
    return given if given is not None else softmax(logits)
