"""Inductive Venn-Abers predictors one-vs-rest (Vovk & Petej 2014; Vovk, Petej & Fedorova 2015,
"Large-scale probabilistic predictors with and without guarantees of validity"; docs/calibrators.md).

For class k, with calibration scores s_i = p_ik and labels t_i = 1{y_i = k}, a test score s gets
two isotonic fits: p0 = the isotonic regression of the calibration points plus (s, 0), evaluated at
s; p1 the same with (s, 1). They are merged as p = p1 / (1 - p0 + p1) and the K merged values are
renormalised per row. A class absent from the calibration split maps to 0, as in the other
one-vs-rest methods (its raw interval would be [0, 1] wherever its score tops the calibration set).

No refit per test point: isotonic regression is the slope of the greatest convex minorant of the
cumulative sum diagram (CSD) P_0 = (0, 0), P_i = (W_i, Y_i) over the m distinct sorted scores
(W, Y cumulative counts and label sums). Adding the test point with label t between the groups
L and R (R = L if s falls strictly between two distinct scores, R = L + 1 if s equals one) shifts
every CSD point right of it by (1, t). Its fitted value is therefore the slope of the lower common
tangent ("bridge") of

    the lower hull of {P_l - (1, t) : l <= L}   and   the lower hull of {P_r : r >= R}.

Fitting sweeps L = 0..m once per label: the left hull is a stack (each point pushed and popped
once); the right hulls are one persistent linked list built right-to-left (suffix hull of R =
R -> next[R] -> ...). The bridge slope never decreases along the sweep (p0, p1 are non-decreasing
in s), and both bridge ends only move right, so each query resumes from the last one's ends a, b
(both at or left of the new bridge's): b walks to the tangent from A_a, then a steps right while
the next left vertex lies strictly below the line A_a P_b, b re-walking after each step. Stepping a
only once b is at its tangent keeps a at or left of the bridge (a step taken while P_b is above the
bridge line can overshoot it: that bug gave wrong p0 values). When the new point pops the left end
off the stack, the walk restarts from the vertex before it. A sweep is O(m), a class O(n log n)
with the sort; ``fit`` reports the walk steps per calibration row.
The 2m + 1 positions (below, at and between the distinct scores) are stored
run-length encoded as sorted boundaries, so applying is a binary search: O(m log n) per class.
"""

from __future__ import annotations

import functools

import numpy as np

from ..bundle import State
from ..core.numerics import edge_slack
from .onevsrest import OneVsRest


def _sweep(px, py):
    """(values (2, 2m + 1): p0 and p1 at every position, walk steps) for one class whose cumulative
    sum diagram is P_i = (px[i], py[i]), i = 0..m, P_0 = (0, 0).

    Plain Python that numba compiles where it is installed (:func:`_kernel`). A hull vertex b is
    dropped when slope(a, b) > slope(b, c) for neighbours a.x < b.x < c.x, written without division.
    """
    m = px.shape[0] - 1
    # persistent suffix lower hulls: next_vertex[r] follows P_r on the hull of {P_r, ..., P_m}
    next_vertex = np.full(m + 1, -1)
    stack = np.empty(m + 1, dtype=np.int64)
    top = -1
    for r in range(m, -1, -1):
        while top >= 1:
            b, c = stack[top], stack[top - 1]
            if (py[b] - py[r]) * (px[c] - px[b]) <= (py[c] - py[b]) * (px[b] - px[r]):
                break
            top -= 1
        if top >= 0:
            next_vertex[r] = stack[top]
        top += 1
        stack[top] = r
    values = np.empty((2, 2 * m + 1))
    steps = 0
    left_x = np.empty(m + 1)
    left_y = np.empty(m + 1)
    for label in range(2):
        top = -1
        a, b = 0, 0  # bridge ends (left stack position, CSD index): both only move right
        for ell in range(m + 1):
            ax, ay = px[ell] - 1.0, py[ell] - label
            while top >= 1 and (
                (left_y[top] - left_y[top - 1]) * (ax - left_x[top]) > (ay - left_y[top]) * (left_x[top] - left_x[top - 1])
            ):
                top -= 1
            top += 1
            left_x[top], left_y[top] = ax, ay
            # a popped left end: the tangent is now the vertex before the new point (its incoming
            # edge is unchanged, so it still lies below the bridge) or the new point
            a = min(a, max(top - 1, 0))
            for right in (ell, ell + 1):
                if right > m:
                    continue
                b = max(b, right)
                while True:
                    # b to the tangent from A_a: right while slope(A_a, P_next) <= slope(A_a, P_b)
                    while next_vertex[b] >= 0:
                        c = next_vertex[b]
                        if (py[c] - left_y[a]) * (px[b] - left_x[a]) <= (py[b] - left_y[a]) * (px[c] - left_x[a]):
                            b = c
                            steps += 1
                        else:
                            break
                    # a one vertex right if A_{a+1} lies strictly below the line A_a P_b: then a is
                    # not the bridge's end, and (a <= the end) neither is anything left of a
                    if a < top and (
                        (py[b] - left_y[a + 1]) * (px[b] - left_x[a]) > (py[b] - left_y[a]) * (px[b] - left_x[a + 1])
                    ):
                        a += 1
                        steps += 1
                    else:
                        break
                values[label, 2 * ell + (right - ell)] = (py[b] - left_y[a]) / (px[b] - left_x[a])
    return values, steps


@functools.lru_cache(maxsize=1)
def _kernel():
    """The sweep, compiled by numba when it is installed (``pip install calib-cli[fast]``: about
    100x faster), else run as plain Python: one function either way, so both give the same values."""
    try:
        from numba import njit
    except ImportError:
        return _sweep
    return njit(cache=True)(_sweep)


def venn_abers_runs(
    scores: np.ndarray, targets: np.ndarray, exact: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(boundaries, p0, p1, walk steps) for one class: a test score s takes run
    ``searchsorted(boundaries, s, 'right') - 1``.

    Position 2i + 1 is s = c_i, the distinct score, within e = :func:`calib.core.numerics.edge_slack` of
    it: [c_i - e, c_i + e], e = r c_i relative to the score (a few ulps' difference between kernel
    paths in the softmax must not move a test score equal to a calibration score off it); position
    2i lies strictly between (c_{i-1} + e and c_i - e; -inf for i = 0). ``exact`` (probabilities as
    the input gives them, the same bits on every path): e = 0, position 2i + 1 is c_i alone, as in
    the exact IVAP that pools only equal scores. Boundaries are made non-decreasing, so scores closer
    than 2e share their runs' edges. Consecutive positions with equal (p0, p1) are merged into one run.
    """
    order = np.argsort(scores, kind="stable")
    sorted_scores = scores[order]
    distinct, start = np.unique(sorted_scores, return_index=True)
    counts = np.diff(np.append(start, len(sorted_scores)))
    hits = np.add.reduceat(targets[order].astype(np.float64), start)
    px = np.concatenate([[0.0], np.cumsum(counts, dtype=np.float64)])
    py = np.concatenate([[0.0], np.cumsum(hits)])
    values, steps = _kernel()(px, py)
    boundaries = np.empty(2 * len(distinct) + 1)
    boundaries[0] = -np.inf
    slack = 0.0 if exact else edge_slack(distinct)
    boundaries[2::2] = np.nextafter(distinct + slack, np.inf)
    boundaries[1::2] = distinct - slack
    np.maximum.accumulate(boundaries, out=boundaries)
    change = np.ones(len(boundaries), dtype=bool)
    change[1:] = (np.diff(values[0]) != 0) | (np.diff(values[1]) != 0)
    return boundaries[change], values[0, change], values[1, change], steps


class VennAbers(OneVsRest):
    pointwise = True
    name = "venn-abers"
    summary = "inductive Venn-Abers one-vs-rest on p_k: p1 / (1 - p0 + p1), renormalised (Vovk et al. 2015)"

    def fit_maps(self, logits, probs, labels, *, given):
        parts, offsets, steps = [], [0], 0
        for k in range(probs.shape[1]):  # a loop over classes; each sweep is compiled code over rows
            boundaries, p0, p1, walked = venn_abers_runs(probs[:, k], labels == k, exact=given)
            parts.append((boundaries, p0, p1))
            offsets.append(offsets[-1] + len(boundaries))
            steps += walked
        self.boundaries_, self.p0_, self.p1_ = (np.concatenate(column) for column in zip(*parts))
        self.offsets_ = np.array(offsets)
        self.report_ = {"runs": int(offsets[-1]), "walk steps per row": round(steps / max(len(labels), 1), 2)}

    def interval(self, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The per-class (p0, p1) pairs of the (N, K) ``probs``, each (N, K): the Venn-Abers
        multiprobability prediction."""
        p0, p1 = np.empty_like(probs), np.empty_like(probs)
        for k in range(probs.shape[1]):
            piece = slice(self.offsets_[k], self.offsets_[k + 1])
            run = np.searchsorted(self.boundaries_[piece], probs[:, k], side="right") - 1
            p0[:, k], p1[:, k] = self.p0_[piece][run], self.p1_[piece][run]
        return p0, p1

    def class_maps(self, logits, probs, *, given):
        # an absent class's interval is [0, 1] above its highest calibration score: the transform
        # replaces it as for the other one-vs-rest maps (OneVsRest.transform_probs_with_info)
        p0, p1 = self.interval(probs)
        return p1 / (1.0 - p0 + p1)

    def n_maps(self):
        return len(self.offsets_) - 1

    def onnx_class_maps(self, graph, logits, probs, *, given):
        """p1 / (1 - p0 + p1) of each column's run: #{boundaries <= p} - 1 (-1, below the first
        boundary, is the class's last run, as NumPy's index -1 is)."""
        pieces = [slice(self.offsets_[k], self.offsets_[k + 1]) for k in range(self.n_maps())]
        count = graph.count_at_most(probs, [self.boundaries_[piece] for piece in pieces])
        last_run = np.array([[piece.stop - piece.start - 1 for piece in pieces]])
        run = graph.op("Sub", count, graph.const(1, np.int64))
        run = graph.where(graph.op("Less", run, graph.const(0, np.int64)), graph.const(last_run, np.int64), run)
        p0 = graph.lookup(graph.per_class_table([self.p0_[piece] for piece in pieces], 0.0), run)
        p1 = graph.lookup(graph.per_class_table([self.p1_[piece] for piece in pieces], 0.0), run)
        return graph.op("Div", p1, graph.op("Add", graph.op("Sub", graph.const(1.0), p0), p1))

    def fit_report(self):
        return dict(self.report_)

    def to_state(self):
        return State(
            params=self.report_,
            arrays={
                "boundaries": self.boundaries_,
                "p0": self.p0_,
                "p1": self.p1_,
                "offsets": self.offsets_,
            },
        )

    @classmethod
    def from_state(cls, options, state):
        calibrator = cls(options)
        for name in ("boundaries", "p0", "p1", "offsets"):
            setattr(calibrator, name + "_", state.arrays[name])
        calibrator.report_ = dict(state.params)
        return calibrator
