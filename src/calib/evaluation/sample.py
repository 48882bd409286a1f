"""The whole-sample metrics of an evaluation (calib.metrics.sample): the probabilities they score, on
one seeded (sub)sample of rows, after the streaming pass."""

from __future__ import annotations

import numpy as np

from ..calibrators.base import CalibrationInputs, Calibrator
from ..io.predictions import Predictions
from ..metrics import METRICS
from ..metrics.sample import SampleConfig, SampledRows, sample_entries, sample_rows


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
    probs_of = None if calibrator is None else _calibrated(preds, calibrator, features)
    metrics = [METRICS[key] for key in keys]
    return sample_entries(
        metrics, SampledRows(preds, rows, probs_of), preds.required_labels()[rows], config, n_total=preds.n, progress=progress
    )


def _calibrated(preds: Predictions, calibrator: Calibrator, features: np.ndarray | None):
    """The calibrated probabilities of file rows (the float64 logits are freed on return, before the
    estimators' own copies)."""
    return lambda rows: calibrator.apply(CalibrationInputs.of(preds, rows, features), "probs")[0]
