"""The whole-sample metrics of an evaluation (calib.metrics.sample): the probabilities they score, on
one seeded (sub)sample of rows, after the streaming pass."""

from __future__ import annotations

import numpy as np

from ..calibrators.base import CalibrationInputs, Calibrator
from ..io.predictions import Predictions
from ..metrics import METRICS
from ..metrics.sample import SampleConfig, model_probs, sample_entries, sample_rows


def sample_results(
    preds: Predictions,
    keys: list[str],
    config: SampleConfig,
    calibrator: Calibrator | None = None,
    features: np.ndarray | None = None,
    progress=None,
) -> dict:
    """Report entries of the whole-sample ``keys`` on one (sub)sample of rows of ``preds`` (after
    ``calibrator`` when given): one estimation serves every key of a family."""
    rows = sample_rows(preds.n, config)
    probs = _sample_probs(preds, rows, calibrator, features)
    metrics = [METRICS[key] for key in keys]
    return sample_entries(metrics, probs, preds.labels[rows], config, n_total=preds.n, progress=progress)


def _sample_probs(preds: Predictions, rows: np.ndarray, calibrator: Calibrator | None, features: np.ndarray | None) -> np.ndarray:
    """The probabilities V-ECE and KDE-ECE score on ``rows`` (the float64 logits are freed on return,
    before the estimators' own copies)."""
    if calibrator is not None:
        return calibrator.apply(CalibrationInputs.of(preds, rows, features), "probs")[0]
    return model_probs(preds, rows)
