"""SelectTau (paper 002, algorithm 2; calibrators.md): per-row temperatures that put exactly
1 - alpha of the tempered mass on a top-k set, solved for all rows at once.

For a row with scores u (logits, or -log V for the score variant) and an in-set mask C that is a top
set of the ranking of u, M(tau) = sum_{y in C} softmax(u / tau)_y decreases in tau. With beta = 1/tau
and g(beta) = log S_in(beta) - log S_out(beta) - logit(1 - alpha), where S = sum exp(beta (u - max u)),
g is non-decreasing and g'(beta) = E_in[u] - E_out[u] under the tempered distribution; Newton steps are taken in
log beta, where g is closer to linear over the many decades a temperature can span.

The bracket ends are checked first (see :func:`select_temperature`). ``_bracketed_newton`` keeps per row a bracket [beta_lo, beta_hi] on log tau in [1e-4, 1e6] with
M(beta_lo) < 1 - alpha <= M(beta_hi) and takes Newton steps in log beta, falling back to bisection in
log beta when a step leaves the bracket. It stops a row when |M - (1 - alpha)| <= 1e-9 at the bracket
end with M >= 1 - alpha, or when the bracket is relatively narrower than 1e-10, and returns that end
(mass >= 1 - alpha). ``_bisection`` is the reference the tests compare against.
"""

from __future__ import annotations

import numpy as np

from ..numerics import log_softmax, softmax
from .conformal import EMPTY, FEASIBLE, FULL, TOO_LARGE, UNREACHABLE

LOG_TAU_MIN, LOG_TAU_MAX = np.log(1e-4), np.log(1e6)
BETA_MIN, BETA_MAX = float(np.exp(-LOG_TAU_MAX)), float(np.exp(-LOG_TAU_MIN))
MASS_TOL = 1e-9
REL_WIDTH = 1e-10
MAX_ITERATIONS = 200



def _mass_terms(beta, centred, in_set_f, with_slope: bool, centred_in=None, work=None):
    """log S_in - log S_out, the in-set mass and, optionally, E_in[u] - E_out[u] at inverse
    temperature beta per row. The weights exp(beta c) are left in ``work`` when one is given.

    ``centred_in`` = centred * in_set_f, precomputed by callers that iterate; ``work`` a reusable
    buffer of at least centred's size (fresh N x K temporaries cost page faults on every pass).
    """
    weights = np.multiply(beta[:, None], centred, out=None if work is None else work[: centred.size].reshape(centred.shape))
    np.exp(weights, out=weights)
    total = weights.sum(axis=1)
    inside = np.einsum("ij,ij->i", weights, in_set_f)
    outside = np.maximum(total - inside, 0.0)  # cancellation can leave -1e-16 when the mass is ~1
    with np.errstate(divide="ignore"):
        log_odds = np.log(inside) - np.log(outside)
    if not with_slope:
        return log_odds, inside / total, None
    weighted = np.einsum("ij,ij->i", weights, centred)
    weighted_in = np.einsum("ij,ij->i", weights, centred_in)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = weighted_in / inside - (weighted - weighted_in) / outside
    return log_odds, inside / total, slope


def select_temperature(scores: np.ndarray, in_set: np.ndarray, target, method: str = "newton"):
    """(tau, category) per row: tau puts in-set tempered mass = target (>= target, within 1e-9).
    ``target`` is one number or one per row (the alpha-agnostic methods solve many levels at once).
    See :func:`tempered_distribution` for the rows' softmax(scores / tau) as well.

    Categories (the infeasible-row rule of calibrators.md): EMPTY and FULL sets get tau = 1 and the
    caller leaves those rows unchanged; TOO_LARGE rows already hold >= target at tau = 1e6 (e.g.
    |C|/K > target) and get 1e6, the mass closest to the target from above; UNREACHABLE rows stay
    below the target even at tau = 1e-4 (an outside score ties the top one) and get 1e-4.
    """
    tau, category, _ = _select(scores, in_set, target, method, None)
    return tau, category


def tempered_distribution(scores: np.ndarray, in_set: np.ndarray, target, log_space: bool = False):
    """(softmax(scores / tau) per row, or its log, tau, category) with tau of :func:`select_temperature`.

    Rows whose Newton search ends on an evaluated point take the distribution from that float64
    pass (the one that verified their mass): one exp pass over the rows fewer than tempering after
    the search. Every other row is tempered afresh; rows with an empty or full set get tau = 1.
    """
    out = np.empty(np.shape(scores))
    tau, category, written = _select(scores, in_set, target, "newton", out)
    fresh = np.flatnonzero(~written)  # incl. empty or full sets: tau = 1, the untempered softmax
    if len(fresh):
        out[fresh] = softmax(np.asarray(scores[fresh], dtype=np.float64) / tau[fresh, None])
    if log_space:
        with np.errstate(divide="ignore"):
            np.log(out, out=out)
        lost = np.flatnonzero(np.isneginf(out).any(axis=1))  # a weight underflowed: redo in log space
        if len(lost):
            out[lost] = log_softmax(np.asarray(scores[lost], dtype=np.float64) / tau[lost, None])
    return out, tau, category


def _select(scores, in_set, target, method, distribution):
    """(tau, category, written): ``written`` marks the rows whose softmax(scores / tau) the Newton
    search wrote into ``distribution`` (an (N, K) array, or None for no distribution)."""
    size = in_set.sum(axis=1)
    target = np.broadcast_to(np.asarray(target, dtype=np.float64), (len(scores),))
    category = np.full(len(scores), FEASIBLE, dtype=np.int8)
    category[size == 0] = EMPTY
    category[size == in_set.shape[1]] = FULL
    tau = np.ones(len(scores))
    written = np.zeros(len(scores), dtype=bool)
    rows = np.flatnonzero(category == FEASIBLE)
    if len(rows):
        centred = np.array(scores[rows], dtype=np.float64)
        centred -= centred.max(axis=1, keepdims=True)
        in_set_f = in_set[rows].astype(np.float64)
        target = target[rows]
        too_large, unreachable = _bracket_ends(centred, in_set_f, size[rows], target)
        category[rows[too_large]] = TOO_LARGE
        category[rows[unreachable]] = UNREACHABLE
        tau[rows[too_large]] = 1.0 / BETA_MIN
        tau[rows[unreachable]] = 1.0 / BETA_MAX
        solvable = ~(too_large | unreachable)
        if solvable.any():
            if not solvable.all():
                centred, in_set_f, target = centred[solvable], in_set_f[solvable], target[solvable]
            solved = rows[solvable]
            if method == "bisection":
                beta = _bisection(centred, in_set_f, target)
            else:
                beta, have = _bracketed_newton(centred, in_set_f, target, distribution,
                                               None if len(solved) == len(scores) else solved)
                written[solved[have]] = True
            tau[solved] = 1.0 / beta
    return tau, category, written


def _bracket_ends(centred, in_set_f, size, target):
    """Rows whose target lies beyond the bracket: mass(BETA_MIN) >= target (too large) or
    mass(BETA_MAX) < target (unreachable).

    Exact bounds settle most rows without an exp pass. With weights w_j = exp(beta c_j) <= 1 and
    the row maximum (c = 0) inside the set when reachable:
      mass(beta) <= k / (k + (K - k) exp(beta min c))             (S_in <= k, S_out >= (K-k) e^{beta min c})
      mass(beta) >= 1 / (1 + (K - k) exp(-beta gap)), gap = -max_{j not in C} c_j   (S_in >= 1)
    Only rows the bounds leave open are evaluated exactly.
    """
    k, n_classes = size.astype(np.float64), centred.shape[1]
    out_count = n_classes - k
    too_large = np.zeros(len(centred), dtype=bool)
    unreachable = np.zeros(len(centred), dtype=bool)
    flattest_upper = k / (k + out_count * np.exp(BETA_MIN * centred.min(axis=1)))
    open_rows = np.flatnonzero(flattest_upper >= target)
    if len(open_rows):
        _, mass, _ = _mass_terms(np.full(len(open_rows), BETA_MIN), centred[open_rows], in_set_f[open_rows], False)
        too_large[open_rows] = mass >= target[open_rows]
    outside_scores = np.where(in_set_f > 0, -np.inf, centred)
    gap = -outside_scores.max(axis=1)
    del outside_scores
    with np.errstate(over="ignore"):
        sharpest_lower = 1.0 / (1.0 + out_count * np.exp(-BETA_MAX * gap))
    open_rows = np.flatnonzero((sharpest_lower < target) & ~too_large)
    if len(open_rows):
        _, mass, _ = _mass_terms(np.full(len(open_rows), BETA_MAX), centred[open_rows], in_set_f[open_rows], False)
        unreachable[open_rows] = mass < target[open_rows]
    return too_large, unreachable


def _bracketed_newton(centred, in_set_f, target, distribution=None, out_rows=None):
    """(beta, have) per row. A row that converges on an evaluated point (mass in the band) returns
    that point, and with ``distribution`` gets its normalised weights from the same pass, in row
    ``out_rows[i]`` of it (row i when ``out_rows`` is None); ``have`` marks those rows."""
    # Newton aims at the middle of the accepted band [target, target + MASS_TOL]: an iterate that
    # has converged then lands inside the band, whichever side it comes from.
    aim = target + MASS_TOL / 2
    logit_aim = np.log(aim) - np.log1p(-aim)
    logit_target = np.log(target) - np.log1p(-target)
    n = len(centred)
    lo, hi = np.full(n, BETA_MIN), np.full(n, BETA_MAX)  # mass(lo) < target <= mass(hi)
    beta = _float32_start(centred, in_set_f, logit_aim)
    done = np.zeros(n, dtype=bool)
    have = np.zeros(n, dtype=bool)
    # The row arrays hold the rows ``held``; they are gathered (a copy) only once fewer than half of
    # them are still pending. Finished rows still held are re-evaluated at their final beta: cheaper
    # than copying N x K arrays every iteration.
    held = np.arange(n)
    rows_c, rows_in, rows_ci = centred, in_set_f, centred * in_set_f
    work = np.empty(centred.size)
    for _ in range(MAX_ITERATIONS):
        b = beta[held]
        log_odds, mass, slope = _mass_terms(b, rows_c, rows_in, True, rows_ci, work)
        above = log_odds >= logit_target[held]
        hi_h = np.where(above, b, hi[held])
        lo_h = np.where(above, lo[held], b)
        hi[held], lo[held] = hi_h, lo_h
        in_band = above & (mass - target[held] <= MASS_TOL)
        converged = in_band | (hi_h - lo_h <= REL_WIDTH * lo_h)
        fresh = converged & ~done[held]
        newly = held[fresh]
        beta[newly] = hi[newly]
        done[newly] = True
        keep = fresh & in_band  # these rows return b, whose weights this pass left in ``work``
        if distribution is not None and keep.any():
            weights = work[: rows_c.size].reshape(rows_c.shape)
            if keep.all() and len(held) == n and out_rows is None:  # every row at once: in place
                np.divide(weights, weights.sum(axis=1, keepdims=True), out=distribution)
            else:
                weights = weights[keep]
                local = held[keep]
                distribution[local if out_rows is None else out_rows[local]] = weights / weights.sum(axis=1, keepdims=True)
            have[held[keep]] = True
        pending = ~done[held]
        if not pending.any():
            break
        with np.errstate(invalid="ignore", divide="ignore"):
            step = b - (log_odds - logit_aim[held]) / slope
        inside = np.isfinite(step) & (step > lo_h) & (step < hi_h)
        beta[held[pending]] = np.where(inside, step, np.sqrt(lo_h * hi_h))[pending]
        if pending.sum() < len(held) / 2:
            rows_c, rows_in, rows_ci = rows_c[pending], rows_in[pending], rows_ci[pending]
            held = held[pending]
    beta[~done] = hi[~done]
    return beta, have


#: Float32 Newton steps that give the float64 search its starting point (float32 exp is SIMD on
#: every x86-64 numpy; float64 exp only on AVX-512 machines). They stop once 99% of the rows have
#: |log-odds error| < 1e-3; the float64 iterations that follow decide every result alone.
FLOAT32_STEPS = 6
FLOAT32_STOP = 1e-3
FLOAT32_SHARE = 0.99


def _float32_start(centred, in_set_f, logit_aim):
    """A starting beta per row from Newton steps in float32, kept inside the bracket.

    The four row sums per step (S, S_in, sum w c, sum w c over the set) are one batched
    matrix-vector product in float32 (BLAS), 4x cheaper than float64 einsums; a start needs no more.
    """
    c32 = centred.astype(np.float32)
    m32 = in_set_f.astype(np.float32)
    stacked = np.empty((len(c32), 4, c32.shape[1]), dtype=np.float32)  # rows of (1, in set, c, c in set)
    stacked[:, 0] = 1.0
    stacked[:, 1] = m32
    stacked[:, 2] = c32
    np.multiply(c32, m32, out=stacked[:, 3])
    work = np.empty_like(c32)
    sums = np.empty((len(c32), 4, 1), dtype=np.float32)
    beta = np.ones(len(c32))
    for _ in range(FLOAT32_STEPS):
        np.multiply(beta.astype(np.float32)[:, None], c32, out=work)
        np.exp(work, out=work)
        np.matmul(stacked, work[:, :, None], out=sums)
        total, inside, weighted, weighted_in = sums[:, :, 0].astype(np.float64).T
        outside = np.maximum(total - inside, 1e-300)
        error = np.log(np.maximum(inside, 1e-300)) - np.log(outside) - logit_aim
        with np.errstate(invalid="ignore", divide="ignore"):
            slope = weighted_in / inside - (weighted - weighted_in) / outside
            step = beta - error / slope
        usable = np.isfinite(step) & (step > BETA_MIN) & (step < BETA_MAX)
        beta = np.where(usable, step, beta)
        if np.mean(np.abs(error) < FLOAT32_STOP) >= FLOAT32_SHARE:
            break
    return beta


def _bisection(centred, in_set_f, target):
    """Reference: bisection in log beta, same bracket, same stopping rule, same returned end."""
    n = len(centred)
    lo, hi = np.full(n, BETA_MIN), np.full(n, BETA_MAX)
    active = np.arange(n)
    work = np.empty(centred.size)
    for _ in range(MAX_ITERATIONS):
        mid = np.sqrt(lo[active] * hi[active])
        _, mass, _ = _mass_terms(mid, centred[active], in_set_f[active], False, work=work)
        above = mass >= target[active]
        hi[active] = np.where(above, mid, hi[active])
        lo[active] = np.where(above, lo[active], mid)
        converged = (above & (mass - target[active] <= MASS_TOL)) | (hi[active] - lo[active] <= REL_WIDTH * lo[active])
        active = active[~converged]
        if not len(active):
            break
    return hi
