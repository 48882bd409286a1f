"""The conformal core shared by MR, conformal TS and ATS-CP (docs/calibrators.md, "Conformal core").

Nonconformity scores V(x, y) on p = softmax(z) (or the probabilities as given), with r(x, y) the
1-based rank of y by non-increasing p (ties to the lower index), one module each in
:mod:`calib.calibrators.scores`:
  msp:  V = 1 - p_y  (MAPIE's LAC, TorchCP's THR);
  aps:  V = A(x, y) = sum of p over the classes ranked at or above y (Romano et al. 2020);
  raps: V = A(x, y) + lambda max(0, r(x, y) - k_reg)  (Angelopoulos et al. 2021);
  saps: V = p_max if r(x, y) = 1, else p_max + (r(x, y) - 1) lambda  (Huang et al. 2024);
  topk: V = r(x, y)  (the sets are the top-q classes).
Randomised (``randomize``; not for msp): u in [0, 1) per row, a function of the seed and of the
row's probabilities (the same row gets the same u at fit and apply, in any chunk or thread):
aps/raps V - (1 - u) p_y; saps u p_max at rank 1, else p_max + (r - 2 + u) lambda; topk r - 1 + u.
Split-conformal quantile of n calibration scores: k = ceil((n + 1)(1 - alpha)), q = k-th smallest;
k > n is an error naming the smallest workable n. Sets: C(x) = {y : V(x, y) <= q(x)}, exactly as
defined (possibly empty), a score within a rounding error above q counted as on it
(:func:`in_conformal_set`); for both scores a top set of the probability ranking.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..core import kernels
from ..core.kernels import EMPTY, FULL, TOO_LARGE, UNREACHABLE
from ..core.kernels import FEASIBLE as FEASIBLE  # re-exported: the category of a feasible row
from ..core.numerics import UNIT_ROUNDOFF, edge_slack, map_in_order, row_chunks, softmax
from ..errors import InputError, UsageError
from .scores import SCORES as SCORE_REGISTRY

#: The scores' names (calib.calibrators.scores.SCORES holds the scores)
SCORES = tuple(SCORE_REGISTRY)
#: The options that belong to a score rather than to a method (reported only with the score using them)
SCORE_PARAMETERS = (*dict.fromkeys(p for score in SCORE_REGISTRY.values() for p in score.parameters), "randomize")


@dataclasses.dataclass(frozen=True)
class ScoreOptions:
    """The nonconformity score and its parameters, taken by every conformal method."""

    score: str = "msp"
    raps_lambda: float = 0.01
    raps_kreg: int = 5
    saps_lambda: float = 0.2
    randomize: bool = False

    def __post_init__(self):
        check_choice("score", self.score, SCORES)
        if self.randomize and not SCORE_REGISTRY[self.score].randomizable:
            randomizable = [name for name, score in SCORE_REGISTRY.items() if score.randomizable]
            raise UsageError(
                f"'randomize' applies to the {', '.join(randomizable[:-1])} and {randomizable[-1]} scores; "
                f"{self.score} has nothing to randomise"
            )
        if self.raps_lambda < 0 or self.raps_kreg < 0:
            raise UsageError(f"'raps_lambda' and 'raps_kreg' must be >= 0; got {self.raps_lambda}, {self.raps_kreg}")
        if self.saps_lambda <= 0:
            raise UsageError(f"'saps_lambda' must be > 0; got {self.saps_lambda}")

    def score_settings(self) -> dict:
        """The score and the parameters it uses (for fit reports)."""
        used = SCORE_REGISTRY[self.score].parameters
        return {
            "score": self.score,
            **{name: getattr(self, name) for name in used},
            **({"randomize": True} if self.randomize else {}),
        }


#: Multipliers of the row hash behind randomised scores (odd 64-bit constants: golden ratio, splitmix64).
_HASH_STEP, _MIX_1, _MIX_2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def row_uniforms(probs: np.ndarray, seed: int) -> np.ndarray:
    """u in [0, 1) per row from the bits of the row's float64 probabilities and the seed (a
    polynomial hash of the row, then splitmix64's finaliser): uniform in practice, the same for
    the same row and seed wherever and whenever it is computed."""
    bits = np.ascontiguousarray(probs, dtype=np.float64).view(np.uint64)
    with np.errstate(over="ignore"):
        weights = (np.arange(1, bits.shape[1] + 1, dtype=np.uint64) * _HASH_STEP) | np.uint64(1)
        h = (bits * weights[None, :]).sum(axis=1, dtype=np.uint64) + np.uint64(seed) * _HASH_STEP
        h ^= h >> np.uint64(30)
        h *= _MIX_1
        h ^= h >> np.uint64(27)
        h *= _MIX_2
        h ^= h >> np.uint64(31)
    return (h >> np.uint64(11)).astype(np.float64) * 2.0**-53


# Row categories of the infeasible-row rule (docs/calibrators.md, "Infeasible rows"), counted in fit and
# apply reports. EMPTY / FULL: the row is left unchanged; TOO_LARGE: even tau = 1e6 leaves >= 1 - alpha
# in the set (e.g. |C|/K > 1 - alpha); UNREACHABLE: even tau = 1e-4 leaves < 1 - alpha (a score
# outside the set ties the top one); TINY_MASS: P_in or P_out < 1e-12 (MR leaves the row unchanged).
# (the first five are the codes SelectTau's kernels write, defined with them)
TINY_MASS = UNREACHABLE + 1
CATEGORY_NAMES = {
    EMPTY: "empty_set",
    FULL: "full_set",
    TOO_LARGE: "set_too_large",
    UNREACHABLE: "target_unreachable",
    TINY_MASS: "mass_below_1e-12",
}
#: (n + 1)(1 - alpha) is a product of floats: 10 * 0.9 may come out a hair above 9. Values within
#: this of an integer are taken as that integer before the ceiling.
QUANTILE_SLACK = 1e-9


def check_alpha(alpha: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise UsageError(f"'alpha' must be in (0, 1); got {alpha}")
    return float(alpha)


def check_choice(name: str, value: str, choices) -> str:
    if value not in choices:
        raise UsageError(f"'{name}' must be one of {', '.join(choices)}; got {value!r}")
    return value


def nonconformity(probs: np.ndarray, options: ScoreOptions | str, seed: int = 0) -> np.ndarray:
    """V(x, y) for every class of every row, (N, K), from probabilities, by ``options.score`` (a
    score's name alone takes its default parameters); randomised with :func:`row_uniforms` of
    ``seed`` when ``options.randomize``."""
    options = ScoreOptions(options) if isinstance(options, str) else options
    score = SCORE_REGISTRY[options.score]
    direct = score.direct(probs, options)
    if direct is not None:
        return direct
    probs = np.ascontiguousarray(probs, dtype=np.float64)
    base, table = score.rank_terms(options, probs.shape[1])
    scores, misranked = np.empty_like(probs), np.empty(len(probs), dtype=np.uint8)
    kernels.rank_scores(probs, *_ranking(probs), base, table, scores, misranked)
    again = np.flatnonzero(misranked)
    if len(again):  # near-ties the packed keys could not tell apart, or values outside [0, 1]
        stable = np.argsort(-probs[again], axis=1, kind="stable").view(np.uint64)
        rescored = np.empty((len(again), probs.shape[1]))
        kernels.rank_scores(probs[again], stable, ALL_BITS, base, table, rescored, np.empty(len(again), dtype=np.uint8))
        scores[again] = rescored
    if options.randomize:
        return score.randomised(scores, probs, row_uniforms(probs, seed)[:, None], options)
    return scores


#: float64 1.0 as an unsigned integer; for p in [0, 1], ONE_BITS - bits(p) grows as p falls.
ONE_BITS = np.float64(1.0).view(np.uint64)
ALL_BITS = 2**64 - 1


def _ranking(probs: np.ndarray) -> tuple[np.ndarray, int]:
    """Each row's columns by non-increasing probability, ties to the lower column, in one sort of
    integers (2x faster than an argsort of the values): the key of p_j is ONE_BITS - bits(p_j) with
    its lowest ceil(log2 K) bits replaced by j. Returns (sorted keys, the mask of the column bits).

    Values closer than the cleared bits (2^-42 relative at K = 1,000) are ordered by column, and
    values outside [0, 1] wrap around; :func:`calib.core.kernels.rank_scores` flags every row whose
    ranking is then not exact, and :func:`nonconformity` ranks those again with a stable argsort."""
    n_columns = probs.shape[1]
    column_mask = (1 << max(n_columns - 1, 1).bit_length()) - 1
    keys = np.subtract(ONE_BITS, probs.view(np.uint64))
    keys &= np.uint64(ALL_BITS ^ column_mask)
    keys |= np.arange(n_columns, dtype=np.uint64)
    keys.sort(axis=1)
    return keys, column_mask


def label_scores(
    logits: np.ndarray, labels: np.ndarray, options: ScoreOptions | str, probs: np.ndarray | None = None, seed: int = 0
) -> np.ndarray:
    """V(x_i, y_i) for calibration rows, computed a chunk of rows at a time, on ``probs`` (the
    model's probabilities as given) if given, else on softmax(logits): the test rows' own
    computation (:func:`nonconformity`), so that a calibration row and an equal test row get the
    same score to the last bit and ties at q stay ties."""
    options = ScoreOptions(options) if isinstance(options, str) else options

    def chunk_scores(rows):
        probs_rows = softmax(logits[rows]) if probs is None else np.asarray(probs[rows], dtype=np.float64)
        return nonconformity(probs_rows, options, seed)[np.arange(len(probs_rows)), labels[rows]]

    return np.concatenate([np.empty(0), *map_in_order(chunk_scores, row_chunks(*logits.shape), values=logits.size)])


def training_part(train, options: ScoreOptions, seed: int, with_features: bool) -> tuple:
    """(V(x, y) of the :class:`~calib.calibrators.base.TrainingRows` ``train``, computed as the
    calibration rows' are, their float64 logits, their features or None): features exactly when
    the calibration rows came with them."""
    logits = np.asarray(train.logits, dtype=np.float64)
    if with_features != (train.features is not None):
        given, missing = ("calibration", "training") if with_features else ("training", "calibration")
        raise InputError(
            f"the {given} rows came with features and the {missing} rows without: the model conditions on the "
            "same kind of input in both",
            cli_hint="--features and --train-features go together",
        )
    features = None if train.features is None else np.asarray(train.features, dtype=np.float64)
    if with_features and len(features) != len(logits):
        raise InputError(f"the training rows have {len(features)} feature rows for {len(logits)} rows of scores")
    return label_scores(logits, np.asarray(train.labels), options, probs=train.probs, seed=seed), logits, features


#: The size of the numbers a conformal score is computed from (probabilities, their sums and
#: complements: at most 1, plus penalties): a score's rounding is r max(1, |V|), even where V is small.
SCORE_SCALE = 1.0


def set_rule_slack(threshold, summed_terms: int | None = None):
    """How far above a threshold q a score still counts as on it. Scores of the softmax of logits
    (``summed_terms`` None): r max(1, |q|), r = :data:`calib.core.numerics.EDGE_RTOL` (a test row equal
    to a calibration row has a score equal to a calibration score on one kernel path and a few ulps
    of 1 off it on the other). Scores of probabilities as the input gives them are the same bits on
    every path, and the slack is the rounding of their own sum: 2 (n - 1) u |q| for a score that
    adds n numbers (u = 2^-53), the most by which the same n probabilities summed in two orders can
    differ (tied probabilities in different rows), and 0 for a score of one operation (msp, margin,
    topk), which is compared exactly."""
    if summed_terms is None:
        return edge_slack(threshold, scale=SCORE_SCALE)
    return 2.0 * max(summed_terms - 1, 0) * UNIT_ROUNDOFF * np.abs(threshold)


def in_conformal_set(scores: np.ndarray, threshold, summed_terms: int | None = None) -> np.ndarray:
    """The set rule V(x, y) <= q, a score within :func:`set_rule_slack` above q counted as on it;
    ``threshold`` broadcasts against ``scores`` (one q, one per class, or one per row). Sets can only
    grow by the slack, so coverage >= 1 - alpha holds."""
    return scores <= threshold + set_rule_slack(threshold, summed_terms)


def scores_at_most(sorted_scores: np.ndarray, values: np.ndarray, summed_terms: int | None = None) -> np.ndarray:
    """#{i : V_i <= v} for each v, V_i the sorted calibration scores, with the slack of
    :func:`in_conformal_set` (a v within :func:`set_rule_slack` of itself below V_i counts V_i)."""
    return np.searchsorted(sorted_scores, values + set_rule_slack(values, summed_terms), side="right")


def given_score_terms(options, k: int, given: bool) -> int | None:
    """The ``summed_terms`` of :func:`set_rule_slack` for scores of ``options.score`` over K = ``k``
    classes: None for scores of the softmax of logits (not ``given``)."""
    return SCORE_REGISTRY[options.score].summed_terms(options, k) if given else None


def min_calibration_size(alpha: float) -> int:
    """Smallest n with ceil((n + 1)(1 - alpha)) <= n, i.e. n >= (1 - alpha) / alpha."""
    return math.ceil((1.0 - alpha) / alpha - QUANTILE_SLACK)


def conformal_quantile(scores: np.ndarray, alpha: float, *, allow_full_set: bool = False) -> float:
    """The ceil((n + 1)(1 - alpha))-th smallest score; +inf (the full set) only if allowed."""
    n = len(scores)
    k = math.ceil((n + 1) * (1.0 - alpha) - QUANTILE_SLACK)
    if k > n:
        if allow_full_set:
            return math.inf
        raise UsageError(
            f"{n} calibration rows are too few for alpha = {alpha:g}: split conformal needs at least "
            f"{min_calibration_size(alpha)} (or allow the trivial full set: option allow_full_set=true)",
            cli_hint="-O allow_full_set=true",
        )
    return float(np.partition(scores, k - 1)[k - 1])
