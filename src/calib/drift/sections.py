"""One comparison of REF's and NEW's rows (all of them, or one group's), put together: the
quantities and their changes (:mod:`calib.drift.analysis`), the priors, the verdict's tests
(:mod:`calib.drift.verdict`) and the remedies' held-out evidence (:mod:`calib.drift.remedies`)."""

from __future__ import annotations

import numpy as np

from ..bootstrap import BootstrapConfig
from ..core.numerics import softmax
from ..evaluation.report_types import EvaluationReport
from ..io.predictions import Predictions
from ..metrics.batch import model_batch
from .analysis import class_accuracy_change, decomposition_changes, interval, label_shares, metric_changes, weights
from .priors import em_priors, l1_noise
from .remedies import labelled_evidence, unlabelled_evidence
from .report import ComparisonSection
from .verdict import REMEDIES, bound_of, labelled_findings, unlabelled_findings, verdict_of


def _evaluated(preds: Predictions, keys: list[str], config: BootstrapConfig) -> EvaluationReport:
    """The registry metrics ``keys`` of ``preds`` with ``config``'s replicates, from the evaluation engine."""
    from ..evaluation import build_report
    from ..evaluation.request import BootstrapSettings, EvaluationRequest

    settings = BootstrapSettings(config, config.seed, config.level)
    return build_report(preds, EvaluationRequest(metrics=tuple(keys), bootstrap=settings))


def _replicate_lists(replicates: dict) -> dict[str, list]:
    """Replicates as a report holds them: None (JSON null) where a replicate has no value."""
    return {key: [float(v) if np.isfinite(v) else None for v in values] for key, values in replicates.items()}


def labelled_section(ref: Predictions, new: Predictions, ref_config, new_config, request, step) -> ComparisonSection:
    """The comparison with labels on both batches."""
    from scipy.stats import chi2_contingency

    level = ref_config.level
    keys = ["accuracy", *(f"top{k}_accuracy" for k in request.top_k), "brier", "nll"]
    ref_report, new_report = _evaluated(ref, keys, ref_config), _evaluated(new, keys, new_config)
    step("metrics")
    metrics, replicates = metric_changes(ref_report, new_report, keys, level)
    ref_labels, new_labels = ref.required_labels(), new.required_labels()
    ref_probs, new_probs = model_batch(ref, slice(None)).probs, model_batch(new, slice(None)).probs
    ref_weights, new_weights = weights(ref_config, ref), weights(new_config, new)
    metrics["class_accuracy"], replicates["class_accuracy"] = class_accuracy_change(
        ref_probs, ref_labels, new_probs, new_labels, ref_weights, new_weights, level
    )
    decomposition, drawn = decomposition_changes(
        ref_probs, ref_labels, new_probs, new_labels, ref_weights, new_weights, level, step
    )
    replicates.update(drawn)
    k = ref.k
    ref_shares, new_shares = label_shares(ref_labels, k), label_shares(new_labels, k)
    l1 = float(np.abs(new_shares - ref_shares).sum())
    replicates["prior_shift"] = np.abs(label_shares(new_labels, k, new_weights) - label_shares(ref_labels, k, ref_weights)).sum(
        axis=1
    )
    counts = np.stack([np.bincount(ref_labels, minlength=k), np.bincount(new_labels, minlength=k)])
    counts = counts[:, counts.sum(axis=0) > 0]
    p_value = float(chi2_contingency(counts)[1]) if counts.shape[1] > 1 else 1.0
    priors = {
        "ref": ref_shares.tolist(),
        "new": new_shares.tolist(),
        "from": "label shares",
        "l1": l1,
        "l1_ci": interval(replicates["prior_shift"], l1, level, floor=0.0),
        "homogeneity_p_value": p_value,
    }
    findings = labelled_findings(metrics, decomposition, replicates, p_value, l1, level, request.decay_score)
    verdict = verdict_of(findings)
    remedies = labelled_evidence(new, request.seed)
    step("remedies")
    return ComparisonSection(
        ref.n,
        new.n,
        True,
        level,
        metrics,
        decomposition,
        priors,
        findings,
        verdict,
        REMEDIES.get(verdict),
        remedies,
        _replicate_lists(replicates),
    )


def unlabelled_section(
    ref: Predictions, new: Predictions, calibration, ref_config, new_config, request, step
) -> ComparisonSection:
    """Without labels on NEW: EM's priors of NEW against EM's priors of REF itself (the same
    estimator on the batch whose labels are known, so that what calibration is left moves both
    alike), each bootstrapped, both batches' probabilities calibrated by ``calibration`` (bcts
    fitted on the whole reference) first."""
    from ..errors import InputError

    level, k = ref_config.level, ref.k
    ref_prior = label_shares(ref.required_labels(), k)
    if (ref_prior == 0).any():
        raise InputError(
            f"the reference's labels miss {int((ref_prior == 0).sum())} of the {k} classes: EM needs every class's prior"
        )
    ref_probs = softmax(calibration.transform(ref.all_logits()))
    new_probs = softmax(calibration.transform(new.all_logits()))
    estimate, iterations = em_priors(new_probs, ref_prior)
    baseline, _ = em_priors(ref_probs, ref_prior)
    new_draws, _ = em_priors(new_probs, ref_prior, weights(new_config, new).matrix())
    step("EM on NEW's replicates")
    ref_draws, _ = em_priors(ref_probs, ref_prior, weights(ref_config, ref).matrix())
    step("EM on REF's replicates")
    sd = (new_draws - ref_draws).std(axis=0, ddof=1)
    bound = bound_of(level, k)
    z = np.abs(estimate - baseline) / np.maximum(sd, 1e-12)
    l1 = float(np.abs(estimate - ref_prior).sum())
    shift_draws = np.abs(new_draws - ref_prior).sum(axis=1)
    priors = {
        "ref": ref_prior.tolist(),
        "new": estimate.tolist(),
        "from": f"EM on the predictions calibrated by bcts on the reference ({iterations} iterations)",
        "ref_by_em": baseline.tolist(),
        "sd": sd.tolist(),
        "l1_noise": l1_noise(new_draws),
        "l1": l1,
        "l1_ci": interval(shift_draws, l1, level, floor=0.0),
        "largest_z": float(z.max()),
        "bound": bound,
    }
    findings = unlabelled_findings(priors, level)
    verdict = verdict_of(findings)
    remedies = unlabelled_evidence(new_probs, ref_prior, request.seed)
    return ComparisonSection(
        ref.n,
        new.n,
        False,
        level,
        {},
        {},
        priors,
        findings,
        verdict,
        REMEDIES.get(verdict),
        remedies,
        _replicate_lists({"prior_shift": shift_draws}),
    )
