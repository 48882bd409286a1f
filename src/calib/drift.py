"""What changed between two batches of predictions of one model (REF, NEW), and what undoes it.

**The decomposition.** For each proper score S (Brier, log loss) of the confidence c_i in each
row's answer against whether it was right y_i (the top label's probability; for K = 2, P(class 1)
against y = 1), the CORP decomposition of Dimitriadis, Gneiting and Jordan (2021):

    S(c) = MCB - DSC + UNC,  MCB = S(c) - S(c_iso),  DSC = S(ybar) - S(c_iso),  UNC = S(ybar),

with c_iso the isotonic (PAV) recalibration of y on c, fitted on the same rows (ties pooled), and
S(.) the mean score of the rows. MCB >= 0 is the miscalibration, DSC >= 0 the discrimination, UNC
the uncertainty of the outcomes. Each term's change NEW - REF gets an interval from independent
seeded bootstraps of REF and NEW (``level``, 99% by default, for the verdict's three tests to hold
a batch without change to few false calls).

**The verdict** (labels on both):

1. ``label shift``: the class shares of the labels differ beyond noise (a chi-square test of
   homogeneity at 1 - ``level``). The prior correction p' ∝ p pi_NEW / pi_REF (calib
   ``prior-shift``) is the remedy; its effect on NEW's miscalibration is reported.
2. ``new concept``: else, the recalibrated score UNC - DSC rose (the lower end of its change
   above 0): the best any post-hoc map of the confidence reaches got worse, which no recalibration
   recovers; the model must learn again. (DSC alone is measured against each batch's own base
   rate, which moves with the accuracy: a noisier model can show more of it.)
3. ``calibration decay``: else, the miscalibration grew (the lower end of the change of MCB of log
   loss above 0; of Brier's with ``decay_score="brier"``).
   Temperature scaling fitted on a seeded half of NEW and measured on the other half is the remedy;
   its recovery is reported.
4. ``none``: nothing moved beyond noise.

The new-concept test reads the Brier decomposition, the decay test log loss's (:data:`DECAY_SCORE`);
both decompositions are reported.

**Without labels on NEW**, only label shift can be told: NEW's class priors are estimated by EM
(Saerens, Latinne and Decaestecker 2002) from its predictions, starting from REF's label shares (the
model's priors), with a bootstrap of NEW's rows for their noise; they moved when some class's
estimate is off REF's share by more than the Bonferroni normal bound at 1 - ``level``. The
calibration error NEW would show under that shift is predicted: the top-label ECE of NEW's
predictions against the EM-adapted probabilities taken as the truth.
"""

from __future__ import annotations

import dataclasses
from statistics import NormalDist

import numpy as np

from .bootstrap import centred_interval
from .core.numerics import PROB_FLOOR, bin_index, isotonic_fit, log_of_probs, softmax
from .errors import InputError, UsageError
from .io.predictions import Predictions
from .metrics.conventions import answer_pairs

#: The verdicts, in the order they are tested
VERDICTS = ("label shift", "new concept", "calibration decay", "none")
#: The proper scores decomposed
SCORES = ("brier", "log_loss")
#: The keys gates on a comparison may name, with the term they read
GATE_KEYS = {
    "miscalibration_increase": "mcb",
    "discrimination_decrease": "dsc",
    "uncertainty_change": "unc",
    "score_change": "score",
    "recalibrated_score_increase": "recalibrated",
}
#: The proper score whose miscalibration term the decay test reads by default: log loss, which
#: weighs a confident wrong answer far more than Brier does, so a sharpened model's MCB rises by
#: many of its standard errors (docs/compare.md, "Measured"); "brier" is the other choice.
DECAY_SCORE = "log_loss"
#: Fewest rows each batch needs for the bootstrap and the isotonic fit to mean anything
MIN_ROWS = 100
#: EM's stopping rule: the largest change of a prior, and the most iterations
EM_TOLERANCE = 1e-8
EM_ITERATIONS = 10_000


@dataclasses.dataclass(frozen=True)
class Terms:
    """One batch's CORP decomposition of one score: ``score`` = ``mcb`` - ``dsc`` + ``unc``, and
    ``recalibrated`` = ``unc`` - ``dsc``, the score of the isotonic recalibration: the best any
    post-hoc map of the confidence reaches on these rows."""

    score: float
    mcb: float
    dsc: float
    unc: float
    recalibrated: float


def _mean_score(p: np.ndarray, y: np.ndarray, score: str) -> float:
    if score == "brier":
        return float(np.mean((p - y) ** 2))
    p = np.clip(p, PROB_FLOOR, 1.0 - PROB_FLOOR)
    return float(-np.mean(y * np.log(p) + (1.0 - y) * np.log1p(-p)))


def corp(confidence: np.ndarray, correct: np.ndarray) -> dict[str, Terms]:
    """The CORP decomposition of each score of :data:`SCORES` of ``confidence`` against the 0/1
    outcomes ``correct``, from one PAV fit with ties pooled (calib.core.numerics.isotonic_fit)."""
    x, level = isotonic_fit(confidence, correct)
    recalibrated = level[np.searchsorted(x, confidence)]
    base = np.full_like(correct, correct.mean())
    out = {}
    for score in SCORES:
        value, iso, unc = (_mean_score(p, correct, score) for p in (confidence, recalibrated, base))
        out[score] = Terms(value, value - iso, unc - iso, unc, iso)
    return out


def em_priors(probs: np.ndarray, old: np.ndarray) -> tuple[np.ndarray, int]:
    """(the new priors, iterations) by EM (Saerens et al. 2002): p'_ik ∝ p_ik pi_k / old_k, pi =
    mean_i p'_i, from pi = old until no prior moves by more than :data:`EM_TOLERANCE`."""
    ratio_base = probs / old
    priors = old.copy()
    for iteration in range(1, EM_ITERATIONS + 1):
        adapted = ratio_base * priors
        adapted /= adapted.sum(axis=1, keepdims=True)
        new = adapted.mean(axis=0)
        if np.max(np.abs(new - priors)) <= EM_TOLERANCE:
            return new, iteration
        priors = new
    return priors, EM_ITERATIONS


def adapted_probs(probs: np.ndarray, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """p'_ik ∝ p_ik new_k / old_k: the probabilities after the priors moved from ``old`` to ``new``."""
    adapted = probs * (new / old)
    return adapted / adapted.sum(axis=1, keepdims=True)


def _label_shares(labels: np.ndarray, k: int) -> np.ndarray:
    return np.bincount(labels, minlength=k) / len(labels)


def _interval(replicates: np.ndarray, value: float, level: float) -> list[float]:
    """The percentile interval of ``replicates`` centred on ``value``: calib's one bootstrap
    interval (calib.bootstrap.centred_interval)."""
    lower, upper, _ = centred_interval(replicates, level, value)
    return [lower, upper]


def _check(ref: Predictions, new: Predictions) -> None:
    if ref.k != new.k:
        raise InputError(f"{ref.name} has {ref.k} classes and {new.name} {new.k}: a comparison is of one model's classes")
    if ref.labels is None:
        raise InputError(f"{ref.name}: the reference needs labels", cli_hint="--labels FILE")
    for preds in (ref, new):
        if preds.n < MIN_ROWS:
            raise InputError(
                f"{preds.name}: {preds.n} rows; a comparison needs at least {MIN_ROWS} in each batch for its bootstrap"
            )
    if new.labels is not None and not np.intersect1d(np.unique(ref.labels), np.unique(new.labels)).size:
        raise InputError(f"{ref.name} and {new.name} share no class among their labels: nothing to compare")
    ref_labels, new_labels = ref.output_layout.n_labels, new.output_layout.n_labels  # None: rows of classes
    if (ref_labels is None) != (new_labels is None):
        multi, single = (ref, new) if ref_labels is not None else (new, ref)
        raise InputError(
            f"{multi.name} is a multi-label input and {single.name} is not: compare two multi-label batches "
            "(scores without labels are read as multi-label with the task multilabel)",
            cli_hint="--task multilabel",
        )
    if ref_labels != new_labels:
        raise InputError(f"{ref.name} has {ref_labels} labels and {new.name} {new_labels}")


def _batch(batch, name: str) -> Predictions:
    """A batch as validated predictions: :class:`~calib.io.Predictions` as it is, a (scores,
    labels) pair, or scores alone (no labels)."""
    from .io.readers import predictions_from_arrays

    if isinstance(batch, Predictions):
        return batch
    scores, labels = batch if isinstance(batch, tuple) else (batch, None)
    return predictions_from_arrays(scores, labels, name=name)


def compare(
    ref, new, *, bootstrap: int = 200, level: float = 0.99, seed: int = 0, gates=(), groups=None, decay_score: str = DECAY_SCORE
) -> dict:
    """What changed from ``ref`` to ``new`` (each validated :class:`~calib.io.Predictions`, a
    (scores, labels) pair, or for ``new`` scores alone), as the module docstring says: the decomposition of each score, its
    changes with intervals, the priors, the verdict and the remedy it implies, and the ``gates``
    ("miscalibration_increase>0.01") checked on the changes' intervals. A JSON-ready dict.

    ``groups`` = (REF's :class:`~calib.evaluation.groups.Groups`, NEW's) adds ``groups``: the same
    analysis within each group both batches hold at least :data:`MIN_ROWS` rows of, each at the
    Bonferroni level 1 - (1 - ``level``) / G over the G groups analysed (so G unchanged groups are
    called a change no more often than one batch is), and the groups left out with the reason.
    ``decay_score`` names the score whose MCB the decay test reads (:data:`DECAY_SCORE`)."""
    from .evaluation.gates import split_condition

    if decay_score not in SCORES:
        raise UsageError(f"decay score must be one of {', '.join(SCORES)}; got {decay_score!r}", cli_hint="--decay-score")
    if not 0.5 < level < 1.0:
        raise UsageError(f"level must be in (0.5, 1); got {level}", cli_hint="--level")
    if bootstrap * (1.0 - level) / 2.0 < 1.0 - 1e-9:
        needed = int(np.ceil(2.0 / (1.0 - level) - 1e-9))
        raise UsageError(
            f"{bootstrap} bootstrap replicates leave no replicate beyond an end of the {level:g} interval; it needs at "
            f"least {needed} (2 / (1 - level)): with fewer its ends understate the noise",
            cli_hint="--bootstrap",
        )
    parsed = [_parse_gate(expr, split_condition) for expr in gates]
    ref, new = _batch(ref, "REF"), _batch(new, "NEW")
    _check(ref, new)
    k = ref.k
    rng = np.random.default_rng(seed)
    report = {
        "ref": {"path": ref.name, "n": ref.n, "k": k},
        "new": {"path": new.name, "n": new.n, "labelled": new.labels is not None},
        "settings": {
            "bootstrap": bootstrap,
            "level": level,
            "seed": seed,
            "outcome": "answer (top label; K = 2: class 1)",
            "decay_score": decay_score,
        },
    }
    if new.labels is None:  # EM takes probabilities calibrated on the reference
        calibrated = _reference_calibration(ref)
        ref_probs, new_probs = (np.exp(calibrated.transform(p.all_logits())) for p in (ref, new))
    else:
        ref_probs, new_probs = softmax(ref.all_logits()), softmax(new.all_logits())

    def analyse(ref_rows, new_rows, at_level: float) -> dict:
        ref_prior = _label_shares(ref.labels[ref_rows], k)
        if new.labels is None:
            return _unlabelled(ref_probs[ref_rows], new_probs[new_rows], ref_prior, bootstrap, at_level, rng)
        labelled = (ref_probs[ref_rows], ref.labels[ref_rows], new_probs[new_rows], new.labels[new_rows])
        return _labelled(*labelled, ref_prior, bootstrap, at_level, rng, seed, decay_score)

    report.update(analyse(slice(None), slice(None), level))
    from .evaluation.groups import label_groups

    by_label = label_groups(ref), label_groups(new)  # None: rows of classes
    if by_label[0] is not None:  # each label a binary problem: the labels are the groups
        if groups is not None:
            raise UsageError("a multi-label comparison is grouped by its labels; other groups do not apply to it")
        groups = by_label
        report["note_pairs"] = (
            "multi-label: the whole-batch analysis pools the (row, label) pairs and resamples them as if independent; "
            "each label's own analysis is under groups"
        )
    if groups is not None:
        report["groups"] = _by_group(*groups, analyse, level)
    report["gates"] = [_check_gate(gate, report) for gate in parsed]
    report["passed"] = all(g["result"] != "fail" for g in report["gates"])
    return report


def _by_group(ref_groups, new_groups, analyse, level: float) -> dict:
    """Each group's analysis at the Bonferroni level over the groups analysed; the rest skipped."""
    ref_rows = {name: np.flatnonzero(ref_groups.codes == i) for i, name in enumerate(ref_groups.names)}
    new_rows = {name: np.flatnonzero(new_groups.codes == i) for i, name in enumerate(new_groups.names)}
    skipped, kept = {}, []
    for name in sorted(set(ref_rows) | set(new_rows)):
        counts = (len(ref_rows.get(name, ())), len(new_rows.get(name, ())))
        if min(counts) < MIN_ROWS:
            skipped[name] = f"{counts[0]} rows in REF and {counts[1]} in NEW; each needs {MIN_ROWS}"
        else:
            kept.append(name)
    group_level = 1.0 - (1.0 - level) / max(len(kept), 1)
    analysed = {}
    for name in kept:
        try:
            found = analyse(ref_rows[name], new_rows[name], group_level)
        except InputError as exc:
            skipped[name] = str(exc)
            continue
        analysed[name] = {"ref_n": len(ref_rows[name]), "new_n": len(new_rows[name]), **found}
    return {"source": ref_groups.source, "level": group_level, "values": analysed, "skipped": skipped}


def _bootstrap_terms(confidence, correct, bootstrap, rng) -> dict[str, np.ndarray]:
    """Replicates of every term of every score: rows resampled with replacement."""
    out = {f"{s}.{t.name}": np.empty(bootstrap) for s in SCORES for t in dataclasses.fields(Terms)}
    n = len(confidence)
    for b in range(bootstrap):
        rows = rng.integers(0, n, n)
        for score, terms in corp(confidence[rows], correct[rows]).items():
            for name, value in dataclasses.asdict(terms).items():
                out[f"{score}.{name}"][b] = value
    return out


def _labelled(ref_probs, ref_labels, new_probs, new_labels, ref_prior, bootstrap, level, rng, seed, decay_score) -> dict:
    from scipy.stats import chi2_contingency

    k = ref_probs.shape[1]
    ref_pairs, new_pairs = answer_pairs(ref_probs, ref_labels), answer_pairs(new_probs, new_labels)
    ref_boot = _bootstrap_terms(*ref_pairs, bootstrap, rng)
    new_boot = _bootstrap_terms(*new_pairs, bootstrap, rng)
    decomposition, changes = {}, {}
    ref_all, new_all = corp(*ref_pairs), corp(*new_pairs)
    for score in SCORES:
        ref_terms, new_terms = ref_all[score], new_all[score]
        decomposition[score] = {"ref": dataclasses.asdict(ref_terms), "new": dataclasses.asdict(new_terms)}
        changes[score] = {}
        for term in (field.name for field in dataclasses.fields(Terms)):
            value = getattr(new_terms, term) - getattr(ref_terms, term)
            replicates = new_boot[f"{score}.{term}"] - ref_boot[f"{score}.{term}"]
            changes[score][term] = {"value": value, "ci": _interval(replicates, value, level)}
    counts = np.stack([np.bincount(ref_labels, minlength=k), np.bincount(new_labels, minlength=k)])
    counts = counts[:, counts.sum(axis=0) > 0]
    p_value = float(chi2_contingency(counts)[1]) if counts.shape[1] > 1 else 1.0
    new_prior = _label_shares(new_labels, k)
    if p_value < 1.0 - level:
        verdict = "label shift"
    elif changes["brier"]["recalibrated"]["ci"][0] > 0.0:
        verdict = "new concept"
    elif changes[decay_score]["mcb"]["ci"][0] > 0.0:
        verdict = "calibration decay"
    else:
        verdict = "none"
    remedies = {
        "prior correction": _prior_correction_effect(new_probs, new_labels, ref_prior, new_prior),
        "recalibration": _recalibration_effect(new_probs, new_labels, seed),
    }
    return {
        "decomposition": decomposition,
        "changes": changes,
        "priors": {
            "ref": ref_prior.tolist(),
            "new": new_prior.tolist(),
            "from": "label shares",
            "l1": float(np.abs(new_prior - ref_prior).sum()),
            "homogeneity_p_value": p_value,
        },
        "remedies": remedies,
        "verdict": verdict,
        "remedy": {"label shift": "prior correction", "calibration decay": "recalibration"}.get(verdict),
    }


def _prior_correction_effect(probs, labels, ref_prior, new_prior) -> dict:
    """NEW's Brier miscalibration before and after the prior correction to its own label shares
    (classes absent from either batch keep their probability)."""
    safe_ref = np.where(ref_prior > 0, ref_prior, 1.0)
    safe_new = np.where((ref_prior > 0) & (new_prior > 0), new_prior, safe_ref)
    corrected = adapted_probs(probs, safe_ref, safe_new)
    before = corp(*answer_pairs(probs, labels))["brier"].mcb
    after = corp(*answer_pairs(corrected, labels))["brier"].mcb
    return {"miscalibration_before": before, "miscalibration_after": after}


def _recalibration_effect(probs, labels, seed) -> dict:
    """Temperature scaling fitted on a seeded half of NEW, measured on the other half: its Brier
    miscalibration before and after."""
    from .calibrators.temperature import fit_inverse_temperature

    order = np.random.default_rng(seed).permutation(len(labels))
    fit, held = np.sort(order[: len(order) // 2]), np.sort(order[len(order) // 2 :])
    log_probs = log_of_probs(probs)
    beta = fit_inverse_temperature(log_probs[fit], labels[fit])
    recalibrated = softmax(beta * log_probs[held])
    before = corp(*answer_pairs(probs[held], labels[held]))["brier"].mcb
    after = corp(*answer_pairs(recalibrated, labels[held]))["brier"].mcb
    return {"temperature": 1.0 / beta, "miscalibration_before": before, "miscalibration_after": after, "rows_measured": len(held)}


def _reference_calibration(ref: Predictions):
    """bcts fitted on the reference rows: EM takes calibrated probabilities (Alexandari et al. 2020
    found bias-corrected calibration then EM hard to beat; on CIFAR-10 it brought EM's median L1
    error from 0.033 to 0.021)."""
    from .calibrators.bias_corrected import BiasCorrectedTemperatureScaling

    return BiasCorrectedTemperatureScaling(BiasCorrectedTemperatureScaling.Options()).fit(ref.all_logits(), ref.labels)


def _unlabelled(ref_probs, new_probs, ref_prior, bootstrap, level, rng) -> dict:
    """EM's priors of NEW against EM's priors of REF itself (the same estimator on the batch whose
    labels are known, so that what calibration is left moves both alike), each bootstrapped; both
    batches' probabilities calibrated on the reference first (:func:`_reference_calibration`)."""
    k = len(ref_prior)
    if (ref_prior == 0).any():
        raise InputError(
            f"the reference's labels miss {int((ref_prior == 0).sum())} of the {k} classes: EM needs every class's prior"
        )
    estimate, iterations = em_priors(new_probs, ref_prior)
    baseline, _ = em_priors(ref_probs, ref_prior)
    difference, resampled = np.empty((bootstrap, k)), np.empty((bootstrap, k))
    for b in range(bootstrap):
        new_rows = rng.integers(0, len(new_probs), len(new_probs))
        ref_rows = rng.integers(0, len(ref_probs), len(ref_probs))
        resampled[b] = em_priors(new_probs[new_rows], ref_prior)[0]
        difference[b] = resampled[b] - em_priors(ref_probs[ref_rows], ref_prior)[0]
    sd = difference.std(axis=0, ddof=1)
    bound = NormalDist().inv_cdf(1.0 - (1.0 - level) / (2.0 * k))
    z = np.abs(estimate - baseline) / np.maximum(sd, 1e-12)
    moved = bool((z > bound).any())
    adapted = adapted_probs(new_probs, ref_prior, estimate)
    return {
        "priors": {
            "ref": ref_prior.tolist(),
            "new": estimate.tolist(),
            "from": f"EM on the predictions calibrated by bcts on the reference ({iterations} iterations)",
            "ref_by_em": baseline.tolist(),
            "sd": sd.tolist(),
            "l1_noise": l1_noise(resampled),
            "l1": float(np.abs(estimate - ref_prior).sum()),
            "largest_z": float(z.max()),
            "bound": bound,
        },
        "predicted_ece_under_label_shift": _ece_against(new_probs, adapted),
        "verdict": "label shift" if moved else "none",
        "remedy": "prior correction" if moved else None,
        "note": "without labels on NEW only label shift can be told; calibration decay and a new concept need NEW's labels",
    }


def l1_noise(replicates: np.ndarray) -> float:
    """The L1 distance that EM's priors are expected to lie from the priors NEW's rows were drawn
    from, from the sampling of those rows alone (the calibration fitted on REF adds its own error),
    read off their bootstrap replicates (B, K): sqrt(2 / pi) sum_k sd_k, each class's mean |normal|
    summed. The batch's own label shares lie nearer (they share its draw). With 5,000 rows of
    CIFAR-100's ResNet-110 it is about 0.1, and exactly calibrated probabilities do no better
    (docs/compare.md)."""
    return float(np.sqrt(2.0 / np.pi) * replicates.std(axis=0, ddof=1).sum())


def _ece_against(probs: np.ndarray, truth: np.ndarray, bins: int = 15) -> float:
    """Top-label ECE of ``probs`` with the accuracy of each bin taken from ``truth``'s probability
    of the top label (equal-width bins, calib's edge rule: calib.core.numerics.bin_index)."""
    top = probs.argmax(axis=1)
    confidence = probs[np.arange(len(probs)), top]
    expected = truth[np.arange(len(probs)), top]
    index = bin_index(confidence, bins)
    gaps = np.bincount(index, weights=expected - confidence, minlength=bins)
    return float(np.abs(gaps).sum() / len(probs))


#: The aggregates a comparison's gate may take: the worst group (or label)
GROUP_AGGREGATES = ("max_group", "max_label")


def _parse_gate(expr: str, split_condition):
    aggregate, key, op, number = split_condition(expr, "miscalibration_increase>0.01")
    if key not in GATE_KEYS or (aggregate is not None and aggregate not in GROUP_AGGREGATES):
        raise UsageError(
            f"gate {expr!r}: a comparison gates on {', '.join(GATE_KEYS)}, of the whole batches or as "
            f"{' or '.join(a + ':KEY' for a in GROUP_AGGREGATES)}",
            cli_hint="--fail-if",
        )
    try:
        return expr, key, op, float(number), aggregate
    except ValueError:
        raise UsageError(f"gate {expr!r}: {number!r} is not a number", cli_hint="--fail-if") from None


def _check_gate(gate, report: dict) -> dict:
    """A gate on a change of the Brier decomposition: fail when the whole interval holds the
    condition, pass when none of it does, else inconclusive (counted as a pass). A decrease of the
    discrimination is the negative of its change. ``max_group:`` (``max_label:``) checks every
    group compared, each on its own interval (at the groups' Bonferroni level): it fails when some
    group fails and passes when every group passes."""
    expr, key, op, threshold, aggregate = gate
    entry = {"expr": expr, "key": key, "op": op, "threshold": threshold}
    if aggregate is None:
        if "changes" not in report:
            return {**entry, "result": "fail", "why": "the gates on the decomposition need labels on NEW"}
        return {**entry, **_gate_outcome(report["changes"], key, op, threshold, report["settings"]["level"])}
    groups = (report.get("groups") or {}).get("values") or {}
    if not groups or any("changes" not in found for found in groups.values()):
        return {**entry, "result": "fail", "why": "a gate on the groups needs groups compared with labels on NEW"}
    level = report["groups"]["level"]
    per_group = {name: _gate_outcome(found["changes"], key, op, threshold, level) for name, found in groups.items()}
    results = [found["result"] for found in per_group.values()]
    result = "fail" if "fail" in results else "pass" if all(r == "pass" for r in results) else "inconclusive"
    worst = max(per_group, key=lambda name: per_group[name]["value"])
    return {
        **entry,
        "result": result,
        "value": per_group[worst]["value"],
        "ci": per_group[worst]["ci"],
        "group": worst,
        "per_group": per_group,
    }


def _gate_outcome(changes: dict, key: str, op: str, threshold: float, level: float) -> dict:
    """value, interval and outcome of one batch's (or group's) change of ``key``."""
    from .evaluation.gates import Spread, outcome

    change = changes["brier"][GATE_KEYS[key]]
    value, (lo, hi) = change["value"], change["ci"]
    if key == "discrimination_decrease":
        value, lo, hi = -value, -hi, -lo
    spread = Spread(lo, hi, 0.0, 0, level, "bootstrap")
    return {"value": value, "ci": [lo, hi], "result": outcome(value, spread, op, threshold)}


def remedy(ref, new, report: dict):
    """The calibrator that undoes what ``report`` (of :func:`compare` on ``ref`` and ``new``, in
    any form :func:`compare` takes) found, fitted, as a :class:`calib.api.Calibration`: for label shift with NEW's labels,
    ``prior-shift`` fitted on them; without them, ``bcts`` fitted on the reference with the EM
    priors' correction added to its biases (softmax(z / T + b + w), one map); for calibration decay,
    ``ts`` fitted on NEW. None for "none"; a new concept is refused: no map of the outputs restores
    the discrimination it lost."""
    from .api import Calibration
    from .calibrators.bias_corrected import PriorShift

    ref, new = _batch(ref, "REF"), _batch(new, "NEW")
    verdict = report["verdict"]
    if verdict == "none":
        return None
    if verdict == "new concept":
        raise UsageError(
            "the verdict is a new concept: no post-hoc map recovers the discrimination it lost; retrain the model "
            "(a recalibration of NEW would still fix its calibration: calib fit NEW --method ts)"
        )
    if verdict == "calibration decay":
        return Calibration("ts").fit(new)
    if new.labels is not None:
        return Calibration("prior-shift").fit(new)
    fitted = Calibration("bcts").fit(ref)
    old, estimate = np.array(report["priors"]["ref"]), np.array(report["priors"]["new"])
    weights = PriorShift.from_priors(old, estimate).log_weights_
    fitted.fitted.bias_ = fitted.fitted.bias_ + weights
    fitted.fitted_on = {"n": ref.n, "sha256": ref.sha256, "prior correction from": new.name}
    return fitted
