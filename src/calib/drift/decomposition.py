"""The CORP decomposition of proper scores (Dimitriadis, Gneiting and Jordan 2021), of one batch's
predictions against its labels, under any row weights (a bootstrap replicate's).

For a score S of forecasts c_i of 0/1 outcomes y_i, with c_iso the isotonic (PAV) recalibration of
y on c fitted on the same rows (ties in c pooled) and S(.) the mean score of the rows:

    S(c) = MCB - DSC + UNC,  MCB = S(c) - S(c_iso),  DSC = S(ybar) - S(c_iso),  UNC = S(ybar).

MCB >= 0 is the miscalibration, DSC >= 0 the discrimination, UNC the uncertainty of the outcomes,
and UNC - DSC = S(c_iso) the recalibrated score: the best any non-decreasing map of c reaches.

Two problems are decomposed:

- **top label** (:func:`top_label`): c_i the top class's probability, y_i whether it is the label
  (for K = 2, P(class 1) against y = 1), for S the Brier score and the log loss. Its UNC = a (1 - a)
  for Brier moves with the accuracy a: a much worse model can show a smaller top-label score.
- **class-wise** (:func:`classwise`): the multiclass Brier score sum_k (p_ik - 1{y_i = k})^2 is the
  sum over classes of the binary Brier scores of p_ik against 1{y_i = k}, so the sum of the K
  one-vs-rest decompositions is a decomposition of it: MCB = sum_k MCB_k, DSC = sum_k DSC_k,
  UNC = sum_k pi_k (1 - pi_k) = 1 - sum_k pi_k^2 with pi the class shares of the labels. Its UNC
  depends on the labels alone (it moves with label shift only), so a worse model shows as lost
  discrimination, whatever its accuracy.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..bootstrap import ReplicateWeights
from ..core.numerics import PROB_FLOOR, IsotonicProblem
from ..metrics.conventions import answer_pairs

#: The proper scores of the top-label decomposition
SCORES = ("brier", "log_loss")
#: The terms of a decomposition, in the order tables show them
TERMS = ("score", "mcb", "dsc", "unc", "recalibrated")


@dataclasses.dataclass(frozen=True)
class Terms:
    """One decomposition: ``score`` = ``mcb`` - ``dsc`` + ``unc``, and ``recalibrated`` = ``unc`` -
    ``dsc``, the score of the isotonic recalibration."""

    score: float
    mcb: float
    dsc: float
    unc: float
    recalibrated: float

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def _clipped(forecast: np.ndarray) -> np.ndarray:
    return np.clip(forecast, PROB_FLOOR, 1.0 - PROB_FLOOR)


def _row_scores(forecast: np.ndarray, outcome: np.ndarray, score: str) -> np.ndarray:
    """Each row's ``score`` of a forecast of a 0/1 outcome; log loss clips the forecast to
    [PROB_FLOOR, 1 - PROB_FLOOR] (a recalibrated 0 or 1 beside its own outcome costs nothing)."""
    if score == "brier":
        return (forecast - outcome) ** 2
    return -(outcome * np.log(_clipped(forecast)) + (1.0 - outcome) * np.log1p(-_clipped(forecast)))


def _summed_scores(level: np.ndarray, weight: np.ndarray, hits: np.ndarray, score: str) -> np.ndarray:
    """sum over rows of ``score`` of a forecast ``level`` shared by rows of total ``weight``, of
    which ``hits`` are outcomes 1 (the arrays per run or per base rate; summed over the last axis)."""
    if score == "brier":  # sum w (l - y)^2 = l^2 W - 2 l S + S for 0/1 outcomes
        return np.sum(level**2 * weight - 2.0 * level * hits + hits, axis=-1)
    return -np.sum(hits * np.log(_clipped(level)) + (weight - hits) * np.log1p(-_clipped(level)), axis=-1)


class OutcomeFit:
    """Forecasts of 0/1 outcomes decomposed under many row weightings at once: the rows reduced once
    to runs for the isotonic fit (:class:`calib.core.numerics.IsotonicProblem`), each weighting's
    fit and scores summed per run."""

    def __init__(self, forecast: np.ndarray, outcome: np.ndarray):
        self.forecast = np.asarray(forecast, dtype=np.float64)
        self.outcome = np.asarray(outcome, dtype=np.float64)
        self.problem = IsotonicProblem(self.forecast, self.outcome)
        self._rows = np.stack([_row_scores(self.forecast, self.outcome, score) for score in SCORES], axis=1)

    def replicate_terms(self, weights: ReplicateWeights, scores=SCORES) -> dict[str, dict[str, np.ndarray]]:
        """{score: {term: (R,) values}} under each of the R row weightings of ``weights``."""
        problem = self.problem
        run_weight = weights.grouped_totals(problem.row_runs, problem.n_runs)
        run_hits = weights.grouped_totals(problem.row_runs, problem.n_runs, self.outcome)
        level = problem.run_levels(run_weight, run_hits)
        total, hits, raw = weights.totals(), weights.totals(self.outcome), weights.totals(self._rows)
        base = (hits / total)[:, None]
        out = {}
        for index, score in enumerate(SCORES):
            if score not in scores:
                continue
            value = raw[:, index] / total
            recalibrated = _summed_scores(level, run_weight, run_hits, score) / total
            uncertainty = _summed_scores(base, total[:, None], hits[:, None], score) / total
            out[score] = {
                "score": value,
                "mcb": value - recalibrated,
                "dsc": uncertainty - recalibrated,
                "unc": uncertainty,
                "recalibrated": recalibrated,
            }
        return out

    def terms(self, scores=SCORES) -> dict[str, Terms]:
        """{score: its decomposition} of the rows, each once."""
        return _single(self.replicate_terms(ReplicateWeights.once(len(self.outcome)), scores))


def _single(found: dict[str, dict[str, np.ndarray]]) -> dict[str, Terms]:
    """The decompositions of a single weighting."""
    return {score: Terms(**{term: float(values[0]) for term, values in terms.items()}) for score, terms in found.items()}


def top_label(probs: np.ndarray, labels: np.ndarray) -> OutcomeFit:
    """The top-label problem of ``probs`` (N, K) and ``labels`` as an :class:`OutcomeFit`: the
    confidence in each row's answer against whether it was right
    (:func:`calib.metrics.conventions.answer_pairs`)."""
    return OutcomeFit(*answer_pairs(probs, labels))


class Classwise:
    """The class-wise decomposition of the multiclass Brier score (module docstring): one
    :class:`OutcomeFit` per class, summed."""

    def __init__(self, probs: np.ndarray, labels: np.ndarray):
        self.fits = [OutcomeFit(probs[:, k], labels == k) for k in range(probs.shape[1])]

    def replicate_terms(self, weights: ReplicateWeights) -> dict[str, dict[str, np.ndarray]]:
        """{"brier": {term: (R,) sums over the classes}} under each row weighting."""
        total: dict[str, np.ndarray] = {}
        for fit in self.fits:
            for term, values in fit.replicate_terms(weights, ("brier",))["brier"].items():
                total[term] = total.get(term, 0.0) + values
        return {"brier": total}

    def terms(self) -> dict[str, Terms]:
        return _single(self.replicate_terms(ReplicateWeights.once(len(self.fits[0].outcome))))
