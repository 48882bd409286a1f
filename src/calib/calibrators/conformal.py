"""The conformal core shared by MR, conformal TS and ATS-CP (docs/calibrators.md, "Conformal core").

Nonconformity scores V(x, y) on p = softmax(z):
  msp: V = 1 - p_y;  aps: V = sum of p over the classes ranked at or above y (non-increasing order,
  ties to the lower index), non-randomised.
Split-conformal quantile of n calibration scores: k = ceil((n + 1)(1 - alpha)), q = k-th smallest;
k > n is an error naming the smallest workable n. Sets: C(x) = {y : V(x, y) <= q(x)}, exactly as
defined (possibly empty); for both scores a top set of the probability ranking.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import UsageError
from ..kernels import EMPTY, FULL, TOO_LARGE, UNREACHABLE
from ..kernels import FEASIBLE as FEASIBLE  # re-exported: the category of a feasible row
from ..numerics import map_in_order, row_chunks, softmax

SCORES = ("msp", "aps")

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


def nonconformity(probs: np.ndarray, score: str) -> np.ndarray:
    """V(x, y) for every class of every row, (N, K), from probabilities."""
    if score == "msp":
        return 1.0 - probs
    # Non-increasing, ties to the lower index. The unstable argsort is 2x faster and gives that
    # order on every row without ties; rows with a tie are sorted again, stably.
    order = np.argsort(-probs, axis=1)
    ranked = np.take_along_axis(probs, order, axis=1)
    tied = np.flatnonzero((ranked[:, 1:] == ranked[:, :-1]).any(axis=1))
    if len(tied):
        order[tied] = np.argsort(-probs[tied], axis=1, kind="stable")
        ranked[tied] = np.take_along_axis(probs[tied], order[tied], axis=1)
    cumulative = np.cumsum(ranked, axis=1)
    scores = np.empty_like(cumulative)
    np.put_along_axis(scores, order, cumulative, axis=1)
    return scores


def label_scores(logits: np.ndarray, labels: np.ndarray, score: str, probs: np.ndarray | None = None) -> np.ndarray:
    """V(x_i, y_i) for calibration rows, computed a chunk of rows at a time, on ``probs`` (the
    model's probabilities as given) if given, else on softmax(logits).

    msp: 1 - p_y. aps: sum of p_j over j ranked at or above y, i.e. p_j > p_y, or p_j = p_y with
    j <= y (ties to the lower index), summed as :func:`nonconformity` sums it.
    """

    def chunk_scores(rows):
        probs_rows = softmax(logits[rows]) if probs is None else np.asarray(probs[rows], dtype=np.float64)
        return _label_scores(probs_rows, labels[rows], score)

    return np.concatenate([np.empty(0), *map_in_order(chunk_scores, row_chunks(*logits.shape))])


def _label_scores(probs: np.ndarray, labels: np.ndarray, score: str) -> np.ndarray:
    rows = np.arange(len(probs))
    if score == "msp":
        return 1.0 - probs[rows, labels]
    # the test rows' own computation (a cumulative sum in rank order), so that a calibration row and
    # an equal test row get the same score to the last bit: ties at q stay ties
    return nonconformity(probs, score)[rows, labels]


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
