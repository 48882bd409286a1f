"""The quantities compared between REF's and NEW's rows, each with the replicates of its change.

- The registry's metrics (accuracy, top-k accuracy, Brier over all K classes, log loss) come from
  the evaluation engine (:func:`calib.evaluation.build_report`) with bootstrap replicates, of each
  batch.
- ``class_accuracy``: each batch's per-class accuracy a_k averaged at NEW's class shares pi_k,
  sum_k pi_k a_k over the classes both batches hold. NEW's is its accuracy; the change is the
  accuracy change a model shows on rows of the same classes: label shift alone (p(x | y) and the
  model unchanged) leaves it at 0, whatever the per-class accuracies.
- The decompositions (:mod:`calib.drift.decomposition`) of each batch, and every replicate.

Every replicate is the evaluation engine's: the row weights of :func:`calib.bootstrap.row_weights`
for the same rows, seed and count, so a replicate of a decomposition term and of a metric resample
the same rows. REF's and NEW's replicates are independent (NEW's seed is
:func:`calib.bootstrap.independent_seed` of REF's) unless both batches are the same rows (two
models scored on one test set: the same labels in the same order), where they use one seed and
pair. The change's interval is :func:`calib.bootstrap.centred_interval` of its replicates.
"""

from __future__ import annotations

import numpy as np

from ..bootstrap import BootstrapConfig, ReplicateWeights, centred_interval, row_weights
from ..errors import UsageError
from ..evaluation.report_types import EvaluationReport
from ..io.predictions import Predictions
from .decomposition import TERMS, Classwise, top_label
from .report import Change


def interval(replicates: np.ndarray, value: float | None, level: float, floor: float | None = None) -> list[float] | None:
    """The change's interval: calib's one bootstrap interval, centred on the change; its ends at
    least ``floor`` where the quantity cannot lie below it (a distance: 0)."""
    if value is None:
        return None
    found = centred_interval(replicates, level, value)
    if found is None:
        return None
    return [found[0], found[1]] if floor is None else [max(found[0], floor), max(found[1], floor)]


def change_of(ref: float | None, new: float | None, replicates: np.ndarray, level: float) -> Change:
    value = None if ref is None or new is None else new - ref
    return Change(ref, new, value, interval(replicates, value, level))


def _replicate_array(values) -> np.ndarray:
    """A report's replicate list (None where a replicate has no value) as floats (NaN for None)."""
    return np.array([np.nan if value is None else value for value in values], dtype=float)


def metric_changes(ref: EvaluationReport, new: EvaluationReport, keys: list[str], level: float) -> tuple[dict, dict]:
    """({key: Change} of the registry metrics ``keys``, {key: replicate changes}) from the two
    batches' evaluation reports (their replicates pair row for row or are independent draws)."""
    changes, replicates = {}, {}
    if ref.bootstrap is None or new.bootstrap is None:
        raise UsageError("the metrics' changes need both reports' bootstrap replicates")
    for key in keys:
        draws = _replicate_array(new.bootstrap.values[key]) - _replicate_array(ref.bootstrap.values[key])
        changes[key] = change_of(ref.metrics[key].value, new.metrics[key].value, draws, level)
        replicates[key] = draws
    return changes, replicates


def class_accuracies(correct: np.ndarray, labels: np.ndarray, k: int, weights: ReplicateWeights) -> tuple[np.ndarray, np.ndarray]:
    """(R, K) per-class accuracies (NaN for a class without rows) and (R, K) row counts of each
    class, under each of the R row weightings."""
    counts = weights.grouped_totals(labels, k)
    with np.errstate(invalid="ignore", divide="ignore"):
        return weights.grouped_totals(labels, k, correct) / counts, counts


def class_accuracy(ref_acc: np.ndarray, new_acc: np.ndarray, new_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(REF's, NEW's) accuracies at NEW's class shares over the classes both hold rows of, per
    weighting (rows of the (R, K) arrays): sum_k pi_k a_k with pi NEW's shares renormalised."""
    held = np.isfinite(ref_acc) & np.isfinite(new_acc)
    shares = np.where(held, new_counts, 0.0)
    shares = shares / shares.sum(axis=1, keepdims=True)
    return np.sum(shares * np.where(held, ref_acc, 0.0), axis=1), np.sum(shares * np.where(held, new_acc, 0.0), axis=1)


def class_accuracy_change(
    ref_probs, ref_labels, new_probs, new_labels, ref_weights: ReplicateWeights, new_weights: ReplicateWeights, level: float
) -> tuple[Change, np.ndarray]:
    """The class accuracy of both batches (module docstring) and its change, with replicates."""
    k = ref_probs.shape[1]
    ref_correct = (ref_probs.argmax(axis=1) == ref_labels).astype(np.float64)
    new_correct = (new_probs.argmax(axis=1) == new_labels).astype(np.float64)
    ref_acc, _ = class_accuracies(ref_correct, ref_labels, k, ReplicateWeights.once(len(ref_labels)))
    new_acc, new_counts = class_accuracies(new_correct, new_labels, k, ReplicateWeights.once(len(new_labels)))
    ref_value, new_value = (float(v[0]) for v in class_accuracy(ref_acc, new_acc, new_counts))
    ref_draws, _ = class_accuracies(ref_correct, ref_labels, k, ref_weights)
    new_draws, new_draw_counts = class_accuracies(new_correct, new_labels, k, new_weights)
    ref_at, new_at = class_accuracy(ref_draws, new_draws, new_draw_counts)
    draws = new_at - ref_at
    return change_of(ref_value, new_value, draws, level), draws


def decomposition_changes(ref_probs, ref_labels, new_probs, new_labels, ref_weights, new_weights, level, progress=None):
    """({"top_label": {score: {term: Change}}, "classwise": {"brier": {term: Change}}}, {path:
    replicate changes}): both decompositions of both batches, and of each replicate."""
    changes: dict = {}
    replicates: dict = {}
    for problem, build in (("top_label", top_label), ("classwise", Classwise)):
        ref_fit, new_fit = build(ref_probs, ref_labels), build(new_probs, new_labels)
        ref_terms, new_terms = ref_fit.terms(), new_fit.terms()
        ref_draws, new_draws = ref_fit.replicate_terms(ref_weights), new_fit.replicate_terms(new_weights)
        if progress is not None:
            progress(f"{problem} decomposition")
        changes[problem] = {}
        for score in ref_terms:
            changes[problem][score] = {}
            for term in TERMS:
                draws = new_draws[score][term] - ref_draws[score][term]
                ref_value, new_value = getattr(ref_terms[score], term), getattr(new_terms[score], term)
                changes[problem][score][term] = change_of(ref_value, new_value, draws, level)
                replicates[f"{problem}.{score}.{term}"] = draws
    return changes, replicates


def label_shares(labels: np.ndarray, k: int, weights: ReplicateWeights | None = None) -> np.ndarray:
    """The class shares of ``labels`` (K,), or (R, K) under each row weighting of ``weights``."""
    if weights is None:
        return np.bincount(labels, minlength=k) / len(labels)
    counts = weights.grouped_totals(labels, k)
    return counts / counts.sum(axis=1, keepdims=True)


def as_batch(batch, name: str) -> Predictions:
    """A batch as validated predictions: :class:`~calib.io.Predictions` as it is, a (scores,
    labels) pair, or scores alone (no labels)."""
    from ..io.readers import predictions_from_arrays

    if isinstance(batch, Predictions):
        return batch
    scores, labels = batch if isinstance(batch, tuple) else (batch, None)
    return predictions_from_arrays(scores, labels, name=name)


def weights(config: BootstrapConfig, preds: Predictions) -> ReplicateWeights:
    """The replicates' row weights of ``preds`` (:func:`calib.bootstrap.row_weights`): a multi-label
    input's pairs are drawn by row."""
    return row_weights(config, preds.n, preds.output_layout.pairs_per_row)
