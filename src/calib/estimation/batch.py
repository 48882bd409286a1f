"""The estimates of one batch without labels, their intervals and what the checks say of them.

For calibrated probabilities P (n, K) of the batch and the record of the reference rows
(:class:`calib.estimation.reference.ReferenceRows`):

- ``est_<score>`` = mean_i E_{p_i}[s] (:mod:`.expectations`): what the calibrated model expects, as
  calibrated for the reference's priors pi (for accuracy, CBPE's estimate: the mean calibrated
  probability of the predicted class);
- ``est_<score>_shifted``: the expectation of the same score of p_i when the labels follow
  q_i ∝ p_i pi'/pi, pi' the batch's priors by EM (:func:`calib.drift.priors.em_priors`): what the
  same probabilities and predictions score on a batch whose classes come in other shares (label
  shift).

The ``debiased`` estimator (the default) adds the map's mean residual d on its reference rows
(:meth:`~calib.estimation.reference.ReferenceRows.map_error`; for the shifted estimates
:meth:`~calib.estimation.reference.ReferenceRows.shifted_map_error`, the residuals under the adapted
q and the rows weighted by pi'/pi): a map that leaves its own rows a point overconfident leaves the
batch so too.
``cbpe`` takes the mean alone (NannyML's estimate) and counts d^2 in the map's variance instead.
Each estimate has the interval value ± z sqrt(V_batch + V_map [+ V_priors]) at the level (z the
normal's (1 + level) / 2 quantile), clipped to the score's range, for the value the batch will
realise once its labels arrive: V_batch = sum_i V_i / n^2, the batch's own sampling given the
probabilities are right; V_map = var(r) / m, the error of d read on the m reference rows (plus d^2
for ``cbpe``); V_priors, for the shifted estimates, the variance of the estimate over bootstrap
replicates of EM's priors (the rows resampled, the estimate taken on the batch's own rows under each
replicate's priors). EM's priors of a few rows over many classes are biased (they spread to classes
the batch lacks), and so is the mean under them: ``cbpe``'s shifted estimates (and the debiased ones
of a record without probabilities) take off the bootstrap's estimate of that bias,
mean(replicates) - value (Efron and Tibshirani 1993, ch. 10; on CIFAR-100 under label shift at
2,000 rows it is 0.7 accuracy points). The debiased estimate with the residuals under q needs none:
the prior's error moves the batch's mean under q and the reference rows' residuals under q in
opposite directions (on 60 such batches: +0.20 points on average without the correction, +0.86
with it). docs/estimation.md has the coverage
measured.

The checks of :mod:`.checks` say whether the estimate can be trusted at all: a failed check makes
the batch's estimates "unreliable", each reason given.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from ..bootstrap import BootstrapConfig, centred_interval, row_weights
from ..core.validation import MISSING_LABEL
from ..drift.priors import adapted_probs, em_priors, l1_noise
from ..errors import InputError, UsageError
from .checks import Check, absent_classes_check, shift_check, support_check
from .expectations import SCORES, expected, mean_expectations
from .reference import ReferenceRows
from .state import BatchState

#: The estimate keys (gates take them): each score as calibrated and under EM's priors
ESTIMATES = {
    **{f"est_{score}": f"estimated {name}" for score, name in zip(SCORES, ("accuracy", "log loss", "Brier score"))},
    **{
        f"est_{score}_shifted": f"estimated {name} under the batch's priors"
        for score, name in zip(SCORES, ("accuracy", "log loss", "Brier score"))
    },
}
#: Each score's range, which its interval is clipped to
RANGES = {"accuracy": (0.0, 1.0), "nll": (0.0, np.inf), "brier": (0.0, 2.0)}
#: Bootstrap replicates of EM's priors
PRIOR_REPLICATES = 200
#: How an estimate reads the map's mean residual d on its reference rows: added back (``debiased``)
#: or counted as noise (``cbpe``, NannyML's estimate)
ESTIMATORS = ("debiased", "cbpe")


@dataclass(frozen=True)
class Estimate:
    """One estimate, its interval at the level and its standard deviation, with the parts of its variance."""

    value: float
    lower: float
    upper: float
    sd: float
    variances: dict[str, float]
    #: The map's mean residual added to the mean expectation (0 for ``cbpe``)
    bias_correction: float = 0.0
    #: The shifted estimates' bootstrap correction of EM's own bias, -(mean of the replicates - the value)
    em_bias_correction: float = 0.0

    def to_json(self) -> dict:
        return {
            "value": self.value,
            "interval": [self.lower, self.upper],
            "sd": self.sd,
            "variances": self.variances,
            "bias_correction": self.bias_correction,
            **({"em_bias_correction": self.em_bias_correction} if self.em_bias_correction else {}),
        }


@dataclass(frozen=True)
class BatchEstimate:
    """The estimates of a batch (module docstring), EM's priors with their intervals, the checks and
    whether they leave the estimates reliable."""

    n: int
    level: float
    estimates: dict[str, Estimate]
    reference_priors: np.ndarray
    priors: np.ndarray
    prior_intervals: np.ndarray
    prior_shift: dict[str, float]
    checks: list[Check]
    notes: list[str] = field(default_factory=list)

    @property
    def reliable(self) -> bool:
        return not any(check.failed for check in self.checks)

    @property
    def reasons(self) -> list[str]:
        """The findings of the failed checks: why the estimates are unreliable."""
        return [check.finding for check in self.checks if check.failed]

    def to_json(self) -> dict:
        return {
            "rows": self.n,
            "level": self.level,
            "reliable": self.reliable,
            "reasons": self.reasons,
            "estimates": {key: estimate.to_json() for key, estimate in self.estimates.items()},
            "priors": {
                "reference": self.reference_priors.tolist(),
                "estimated": self.priors.tolist(),
                "intervals": self.prior_intervals.tolist(),
                **self.prior_shift,
            },
            "checks": [check.to_json() for check in self.checks],
            "notes": self.notes,
        }


def _estimate(score: str, mean: float, variances: dict[str, float], map_error: tuple[float, float], how: dict) -> Estimate:
    """The estimate of ``score`` from the rows' mean expectation, the variances of the batch (and of
    EM's priors), the map's (d, var(d)) and ``how`` {"estimator", "level"} (module docstring)."""
    bias, noise = map_error
    debiased = how["estimator"] == "debiased"
    variances = {**variances, "map": noise if debiased else noise + bias * bias}
    value = float(mean) + (bias if debiased else 0.0)
    sd = float(np.sqrt(sum(variances.values())))
    reach = NormalDist().inv_cdf((1.0 + how["level"]) / 2.0) * sd
    low, high = RANGES[score]
    return Estimate(value, max(low, value - reach), min(high, value + reach), sd, variances, bias if debiased else 0.0)


def check_estimator(estimator: str) -> None:
    """Refuse an estimator that is not one of :data:`ESTIMATORS`."""
    if estimator not in ESTIMATORS:
        raise UsageError(f"the estimator is one of {', '.join(ESTIMATORS)}; got {estimator!r}", cli_hint="--estimator")


def _prior_interval(replicates: np.ndarray, level: float, prior: float) -> tuple[float, float]:
    """The centred percentile interval of one prior's replicates (calib.bootstrap.centred_interval)."""
    found = centred_interval(replicates, level, prior)
    return (np.nan, np.nan) if found is None else (found[0], found[1])


def estimate_batch(
    calibrated: np.ndarray,
    logits: np.ndarray,
    reference: ReferenceRows | None,
    *,
    level: float = 0.95,
    seed: int = 0,
    predicted: np.ndarray | None = None,
    estimator: str = "debiased",
) -> BatchEstimate:
    """The estimates of a batch without labels (module docstring) from its calibrated probabilities
    (n, K) and its uncalibrated log-space scores (for the checks); ``predicted`` the model's
    predicted classes (default: the argmax of ``calibrated``). Without a record of the reference rows
    (a bundle that kept none) the intervals count the batch's sampling alone and a note says so.
    ``estimator``: one of :data:`ESTIMATORS`."""
    state = BatchState.of(calibrated, logits, None, reference, predicted=predicted)
    return estimate_state(state, level=level, seed=seed, estimator=estimator)


def estimate_state(state: BatchState, *, level: float = 0.95, seed: int = 0, estimator: str = "debiased") -> BatchEstimate:
    """The estimates of the unlabelled rows of ``state`` (one group's, or all rows' as one group):
    the as-calibrated ones from its exact sums, the shifted ones and EM's priors from its sample of
    rows (all the rows below its size; else V_batch is read off the sample's mean variance and the
    sample's own noise var(E) (1 - k / n) / k is added), the checks from its counts and sample."""
    check_estimator(estimator)
    n, k = int(state.sums["unlabelled"].sum()), state.n_classes
    if n < 2:
        raise InputError(f"an estimate needs at least 2 rows without labels; the batch has {n}")
    reference, notes, how = state.reference, [], {"estimator": estimator, "level": level}
    if reference is None:
        reference_priors = np.full(k, 1.0 / k)
        notes.append(
            "the calibration map keeps no record of the rows it was fitted on (refit it with this version): the intervals "
            "count the batch's sampling alone, the priors start from uniform and the support is not checked"
        )
    else:
        if reference.n_classes != k:
            raise InputError(f"the batch has {k} classes; the calibration map's reference rows have {reference.n_classes}")
        reference_priors = reference.priors
        if reference.absent_classes:
            notes.append(
                f"classes absent from the reference rows, which keep the small share the map gives them: {reference.absent_classes}"
            )

    def map_error(score: str) -> tuple[float, float]:
        return (0.0, 0.0) if reference is None else reference.map_error(score)

    estimates = {}
    sums, variances = state.sums["expected_sums"].sum(axis=0), state.sums["variance_sums"].sum(axis=0)
    for j, score in enumerate(SCORES):
        estimates[f"est_{score}"] = _estimate(score, sums[j] / n, {"batch": float(variances[j]) / n**2}, map_error(score), how)
    unlabelled = state.sample["labels"] == MISSING_LABEL
    probs, predicted = state.sample["probs"][unlabelled], state.sample["predicted"][unlabelled]
    kept = len(probs)
    if kept < n:
        notes.append(
            f"EM's priors, the estimates under them and the test beyond label shift read a uniform sample of {kept} of the {n} rows"
        )
    priors, _ = em_priors(probs, reference_priors)
    weights = row_weights(BootstrapConfig(PRIOR_REPLICATES, seed, level), kept).matrix()
    weights = weights[weights.sum(axis=1) > 0]  # a replicate of a few rows may draw none of them
    replicate_priors, _ = em_priors(probs, reference_priors, weights)
    replicates = mean_expectations(probs, predicted, replicate_priors / reference_priors)
    shifted_errors = {score: (0.0, 0.0) for score in SCORES} if reference is None else reference.shifted_map_error(priors)
    if reference is not None and estimator == "debiased":  # the correction d moves with the priors too
        biases = reference.shifted_map_biases(replicate_priors)
        for score in SCORES:
            replicates[score] = replicates[score] + biases[score] - shifted_errors[score][0]
    # EM's bias moves the batch's mean under q and the residuals under q in opposite directions: with
    # the residuals under q (a record that keeps probabilities) their sum needs no bias correction
    corrected = reference is None or estimator != "debiased" or reference.probs is None
    for score, (means, row_variances) in expected(probs, predicted, adapted_probs(probs, reference_priors, priors)).items():
        parts = {"batch": float(row_variances.mean()) / n, "priors": float(np.var(replicates[score], ddof=1))}
        if kept < n:
            parts["sample"] = float(means.var(ddof=1)) * (1.0 - kept / n) / kept
        em_bias = float(replicates[score].mean()) - float(means.mean()) if corrected else 0.0
        shifted = _estimate(score, float(means.mean()) - em_bias, parts, shifted_errors[score], how)
        estimates[f"est_{score}_shifted"] = dataclasses.replace(shifted, em_bias_correction=-em_bias)
    intervals = np.array([_prior_interval(replicate_priors[:, j], level, priors[j]) for j in range(k)])
    shift = {"l1": float(np.abs(priors - reference_priors).sum()), "l1_noise": l1_noise(replicate_priors)}
    checks = []
    if reference is not None:
        checks.append(support_check(int(state.sums["outside"].sum()), n, reference.margins))
        checks.append(
            shift_check(state.sample["margins"][unlabelled], reference.margins, reference.labels, reference.class_weights(priors))
        )
        if reference.absent_classes:
            checks.append(absent_classes_check(reference.absent_classes, priors, reference_priors))
    return BatchEstimate(n, level, estimates, reference_priors, priors, intervals, shift, checks, notes)
