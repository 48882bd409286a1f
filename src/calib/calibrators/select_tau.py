"""SelectTau (ATS-CP paper, algorithm 2; docs/calibrators.md): per-row temperatures that put exactly
1 - alpha of the tempered mass on a top-k set, solved row by row in compiled code.

For a row with scores u (logits, or -log V for the score variant) and an in-set mask C that is a top
set of the ranking of u, M(tau) = sum_{y in C} softmax(u / tau)_y decreases in tau. With beta = 1/tau
and g(beta) = log S_in(beta) - log S_out(beta), where S = sum exp(beta (u - max u)), g is
non-decreasing and g'(beta) = E_in[u] - E_out[u] under the tempered distribution.

The bracket ends are checked first (see :func:`select_temperature`). The search keeps per row a
bracket [beta_lo, beta_hi] with beta in [1e-6, 1e4] (tau in [1e-4, 1e6]), M(beta_lo) < 1 - alpha <=
M(beta_hi), and takes Newton steps on g from beta = 1 aimed at the middle of the accepted band,
falling back to bisection in log beta when a step leaves the bracket. It stops a row when
|M - (1 - alpha)| <= 1e-9 at the bracket end with M >= 1 - alpha, or when the bracket is relatively
narrower than 1e-10, and returns that end (mass >= 1 - alpha).

The search runs in :func:`calib.core.kernels.select_tau`: in the optional C extension a row's work stays
in three K-length buffers, so each Newton evaluation is one vectorised exp-and-sum pass over
cache-resident data, and the softmax of the verifying pass is the output; the NumPy path runs the
same Newton on all rows at once, each iteration a few passes over the N x K chunk.
``_bisection`` (NumPy, no shortcuts) is the reference the tests compare against.
"""

from __future__ import annotations

import numpy as np

from ..core import kernels
from .conformal import EMPTY, FEASIBLE, FULL, TOO_LARGE, UNREACHABLE

LOG_TAU_MIN, LOG_TAU_MAX = np.log(1e-4), np.log(1e6)
BETA_MIN, BETA_MAX = float(np.exp(-LOG_TAU_MAX)), float(np.exp(-LOG_TAU_MIN))
MASS_TOL = 1e-9
REL_WIDTH = 1e-10
MAX_ITERATIONS = 200


def select_temperature(scores: np.ndarray, in_set: np.ndarray, target, method: str = "newton"):
    """(tau, category) per row: tau puts in-set tempered mass = target (>= target, within 1e-9).
    ``target`` is one number or one per row (the alpha-agnostic methods solve many levels at once).
    See :func:`tempered_distribution` for the rows' softmax(scores / tau) as well.

    Categories (the infeasible-row rule of docs/calibrators.md): EMPTY and FULL sets get tau = 1 and the
    caller leaves those rows unchanged; TOO_LARGE rows already hold >= target at tau = 1e6 (e.g.
    |C|/K > target) and get 1e6, the mass closest to the target from above; UNREACHABLE rows stay
    below the target even at tau = 1e-4 (an outside score ties the top one) and get 1e-4.
    """
    if method == "bisection":
        return _bisection(scores, in_set, target)
    beta, category = _solve(scores, in_set, target, None)
    return 1.0 / beta, category


def tempered_distribution(scores: np.ndarray, in_set: np.ndarray, target, log_space: bool = False):
    """(softmax(scores / tau) per row, or its log, tau, category) with tau of :func:`select_temperature`.

    The distribution is that of the Newton pass that verified the row's mass (no second exp pass);
    in log space it is beta * (u - max u) - log S, exact where a probability underflows. Rows with
    an empty or full set get tau = 1: the untempered softmax of ``scores``.
    """
    out = np.empty(np.shape(scores))
    beta, category = _solve(scores, in_set, target, out, log_space)
    return out, 1.0 / beta, category


def _solve(scores, in_set, target, distribution, log_space=False):
    """(beta, category) per row from the compiled search; with ``distribution`` (an (N, K) float64
    array) it also receives softmax(beta * scores) per row, or its log."""
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    in_set = np.ascontiguousarray(in_set, dtype=bool)
    if scores.ndim != 2 or in_set.shape != scores.shape:
        raise ValueError(f"scores {scores.shape} and in_set {in_set.shape} must be the same (N, K)")
    n = len(scores)
    target = np.ascontiguousarray(np.broadcast_to(np.asarray(target, dtype=np.float64), (n,)))
    beta = np.empty(n)
    category = np.empty(n, dtype=np.int8)
    kernels.select_tau(
        scores,
        in_set,
        target,
        beta,
        category,
        distribution,
        bool(log_space),
        BETA_MIN,
        BETA_MAX,
        MASS_TOL,
        REL_WIDTH,
        MAX_ITERATIONS,
    )
    return beta, category


def _mass(beta, centred, in_set):
    """In-set mass of softmax(beta * centred) per row."""
    weights = np.exp(beta[:, None] * centred)
    return np.einsum("ij,ij->i", weights, in_set) / weights.sum(axis=1)


def _bisection(scores, in_set, target):
    """Reference (tau, category): the categories from the masses at both bracket ends, evaluated
    exactly; then bisection in log beta with the same stopping rule and the same returned end."""
    n = len(scores)
    centred = np.asarray(scores, dtype=np.float64) - np.max(scores, axis=1, keepdims=True)
    in_set_f = in_set.astype(np.float64)
    target = np.broadcast_to(np.asarray(target, dtype=np.float64), (n,))
    size = in_set.sum(axis=1)
    category = np.full(n, FEASIBLE, dtype=np.int8)
    category[size == 0] = EMPTY
    category[size == in_set.shape[1]] = FULL
    open_rows = category == FEASIBLE
    category[open_rows & (_mass(np.full(n, BETA_MIN), centred, in_set_f) >= target)] = TOO_LARGE
    category[(category == FEASIBLE) & (_mass(np.full(n, BETA_MAX), centred, in_set_f) < target)] = UNREACHABLE
    beta = np.ones(n)
    beta[category == TOO_LARGE] = BETA_MIN
    beta[category == UNREACHABLE] = BETA_MAX
    active = np.flatnonzero(category == FEASIBLE)
    lo, hi = np.full(n, BETA_MIN), np.full(n, BETA_MAX)
    for _ in range(MAX_ITERATIONS):
        if not len(active):
            break
        mid = np.sqrt(lo[active] * hi[active])
        mass = _mass(mid, centred[active], in_set_f[active])
        above = mass >= target[active]
        hi[active] = np.where(above, mid, hi[active])
        lo[active] = np.where(above, lo[active], mid)
        converged = (above & (mass - target[active] <= MASS_TOL)) | (hi[active] - lo[active] <= REL_WIDTH * lo[active])
        active = active[~converged]
    solved = category == FEASIBLE
    beta[solved] = hi[solved]
    return 1.0 / beta, category


#: Bisection steps of the ONNX graph's search in log beta: 64 halve the bracket's ratio of 1e10
#: below the spacing of float64 (its width stops changing after about 55).
ONNX_BISECTION_STEPS = 64


def onnx_inverse_temperature(graph, centred: str, in_set: str, target: float) -> str:
    """beta = 1 / tau per row (N, 1) in an ONNX graph (:mod:`calib.onnx_export`), for the centred
    scores u - max u: BETA_MIN where the in-set mass at BETA_MIN already reaches ``target`` (too
    large a set), BETA_MAX where it stays below at BETA_MAX (unreachable), else the upper end of a
    bisection in log beta (mass >= target), as :func:`_bisection` finds it; the Newton search
    here stops within 1e-9 of the target mass, so the two betas agree to about that."""
    mask = graph.as_float(in_set)
    goal = graph.const(target)

    def mass(beta):
        weights = graph.op("Exp", graph.op("Mul", beta, centred))
        return graph.op("Div", graph.row_sum(graph.op("Mul", weights, mask)), graph.row_sum(weights))

    rows = graph.column(centred, 0)  # (N, 1)
    lo = graph.op("Add", graph.op("Mul", rows, graph.const(0.0)), graph.const(BETA_MIN))
    hi = graph.op("Add", graph.op("Mul", rows, graph.const(0.0)), graph.const(BETA_MAX))
    for _ in range(ONNX_BISECTION_STEPS):
        mid = graph.op("Sqrt", graph.op("Mul", lo, hi))
        above = graph.op("GreaterOrEqual", mass(mid), goal)
        lo, hi = graph.where(above, lo, mid), graph.where(above, mid, hi)
    too_large = graph.op("GreaterOrEqual", mass(graph.const(BETA_MIN)), goal)
    unreachable = graph.op("Less", mass(graph.const(BETA_MAX)), goal)
    return graph.where(too_large, graph.const(BETA_MIN), graph.where(unreachable, graph.const(BETA_MAX), hi))
