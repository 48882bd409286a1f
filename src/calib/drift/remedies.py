"""The remedy a verdict implies, its evidence on held-out rows, and the fitted calibrator.

Each remedy is fitted on a seeded half of NEW and measured on the other half, so its evidence is
not the fit's own optimism. With labels on NEW:

- the prior correction: ``prior-shift`` (softmax(z + w), the maximum-likelihood class weights);
- the recalibration: ``ts`` (temperature scaling);

each measured by NEW's log loss and ECE on the held-out half before and after (the registry's
``nll`` and ``ece``); a remedy improves NEW when its held-out log loss falls. Without labels on NEW
the prior correction is ``bcts`` fitted on REF followed by the correction to EM's priors of NEW
(:meth:`calib.calibrators.bias_corrected.BiasCorrectedTemperatureScaling.followed_by`), and its
evidence is the held-out rows' log-likelihood gain under EM's priors of the other half
(:func:`calib.drift.priors.marginal_log_likelihood_gain`): positive when the shift is real.

A remedy is written (:func:`remedy`) only where its evidence says it improves NEW; otherwise one
sentence says why not.
"""

from __future__ import annotations

import copy

import numpy as np

from ..io.predictions import Predictions
from .priors import em_priors, marginal_log_likelihood_gain
from .report import ComparisonReport, RemedyEvidence

#: The calibration method of each remedy fitted on NEW's labels
METHODS = {"prior correction": "prior-shift", "recalibration": "ts"}
#: The method of the prior correction without labels on NEW
UNLABELLED_METHOD = "bcts followed by prior-shift"


def halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(the rows a remedy is fitted on, the rows it is measured on): seeded random halves, sorted."""
    order = np.random.default_rng([seed, 5]).permutation(n)
    return np.sort(order[: n // 2]), np.sort(order[n // 2 :])


def _scored(preds: Predictions, log_probs: np.ndarray | None = None) -> dict:
    """NEW's log loss and ECE (the registry's ``nll``, ``ece``), as given or of ``log_probs``."""
    from ..metrics.functional import metric_value

    if log_probs is None:
        scores, kind = preds.scores, preds.kind
    else:
        scores, kind = log_probs, "log-probs"
    return {key: metric_value(key, scores, preds.labels, kind=kind) for key in ("nll", "ece")}


def labelled_evidence(new: Predictions, seed: int) -> dict[str, RemedyEvidence]:
    """{remedy: its held-out evidence} of each remedy fitted on NEW's labels."""
    from ..api import Calibration

    fit, held = halves(new.n, seed)
    fitted_on, measured = new.take(fit), new.take(held)
    before = _scored(measured)
    out = {}
    for name, method in METHODS.items():
        calibrated = Calibration(method).fit(fitted_on, seed=seed).predict_log_proba(measured)
        after = _scored(measured, calibrated)
        out[name] = RemedyEvidence(name, method, len(held), before, after, after["nll"] < before["nll"])
    return out


def unlabelled_evidence(new_probs: np.ndarray, ref_priors: np.ndarray, seed: int) -> dict[str, RemedyEvidence]:
    """{"prior correction": its held-out evidence} without labels: EM's priors from one half of
    NEW's probabilities (calibrated on REF), the log-likelihood gain of the other half."""
    fit, held = halves(len(new_probs), seed)
    priors, _ = em_priors(new_probs[fit], ref_priors)
    gain = marginal_log_likelihood_gain(new_probs[held], ref_priors, priors)
    measured = {"log_likelihood_gain": 0.0}, {"log_likelihood_gain": gain}
    return {"prior correction": RemedyEvidence("prior correction", UNLABELLED_METHOD, len(held), *measured, gain > 0.0)}


def _evidence_text(evidence: RemedyEvidence) -> str:
    if "nll" in evidence.before:
        return (
            f"NEW's held-out log loss {evidence.before['nll']:.4g} -> {evidence.after['nll']:.4g}, "
            f"ECE {evidence.before['ece']:.4g} -> {evidence.after['ece']:.4g} ({evidence.rows} rows)"
        )
    return f"the held-out rows' log-likelihood gain under the estimated priors {evidence.after['log_likelihood_gain']:+.4g} ({evidence.rows} rows)"


def remedy(ref, new, report: ComparisonReport):
    """(the calibrator that undoes what ``report`` found, fitted on all rows, or None; one sentence
    saying what it is, or why there is none). Label shift: the prior correction; calibration decay:
    the recalibration; each only where its held-out evidence improves NEW. A performance loss has
    none: no map of the outputs restores lost accuracy."""
    from ..api import Calibration
    from ..calibrators.bias_corrected import BiasCorrectedTemperatureScaling, PriorShift
    from .analysis import as_batch

    ref, new = as_batch(ref, "REF"), as_batch(new, "NEW")
    section = report.whole
    verdict, name = section.verdict, section.remedy
    if name is None:
        why = {
            "performance loss": "no post-hoc map restores lost accuracy: retrain the model",
            "performance gain": "NEW performs better: nothing to undo",
            "calibration improvement": "NEW is better calibrated: nothing to undo",
            "other change": "no remedy is known for this change",
            "none": "nothing moved beyond noise",
        }[verdict]
        recalibration = section.remedies.get("recalibration")
        if verdict == "performance loss" and recalibration is not None and recalibration.improves:
            why += (
                f" (a recalibration would still help its calibration: {_evidence_text(recalibration)}; calib fit NEW --method ts)"
            )
        return None, f"no remedy written: {why}"
    evidence = section.remedies[name]
    if not evidence.improves:
        return None, f"no remedy written: the {name} would not improve NEW ({_evidence_text(evidence)})"
    if new.labels is not None:
        fitted = Calibration(evidence.method).fit(new, seed=report.settings["seed"])
        return fitted, f"the {name} ({evidence.method}, fitted on NEW): {_evidence_text(evidence)}"
    reference = Calibration("bcts").fit(ref)
    shift = PriorShift.from_priors(np.array(section.priors["ref"]), np.array(section.priors["new"]))
    composed = copy.copy(reference)
    bcts = reference.fitted
    assert isinstance(bcts, BiasCorrectedTemperatureScaling)  # fitted by that name just above
    composed.fitted = bcts.followed_by(shift)
    composed.fitted_on = {"n": ref.n, "sha256": ref.sha256, "prior correction from": new.name}
    return composed, f"the {name} ({UNLABELLED_METHOD}: bcts fitted on REF, EM's priors of NEW): {_evidence_text(evidence)}"
