"""What a nonconformity score says about itself and how it is computed from the ranking of a
row's probabilities (calib.calibrators.conformal.nonconformity does the ranking)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np


class Score:
    """A nonconformity score V(x, y). With r(x, y) the 1-based rank of y by non-increasing p (ties
    to the lower index), a ranked score is ``base + table[r]`` (:meth:`rank_terms`, the base one of
    calib.core.kernels' CUMULATIVE, TOP, NO_BASE); a score that needs no ranking overrides :meth:`direct`."""

    #: The name ``score=`` takes
    name: ClassVar[str] = ""
    #: Where ``calib methods`` and the documentation list it
    order: ClassVar[int] = 100
    #: The fields of ScoreOptions it reads (reported beside it in fit reports)
    parameters: ClassVar[tuple[str, ...]] = ()
    #: Whether it has a randomised form (u in [0, 1) per row)
    randomizable: ClassVar[bool] = True

    def direct(self, probs: np.ndarray, options) -> np.ndarray | None:
        """V for every class of every row without ranking, or None when the score needs ranks."""
        return None

    def rank_terms(self, options, k: int) -> tuple[int, np.ndarray | None]:
        """(base, table) of calib.core.kernels.rank_scores for K = ``k`` classes: the non-randomised
        score, or with ``options.randomize`` what :meth:`randomised` starts from."""
        raise NotImplementedError

    def onnx(self, graph, probs: str, options) -> str:
        """V (N, K) in an ONNX graph (:mod:`calib.onnx_export`), non-randomised: ``base + table[r]``
        by rank, the ranking by ONNX's TopK (sorted, ties to the lower index, as here), scattered
        back to class order."""
        from ...core import kernels

        k = graph.n_classes
        ranked, order = graph.op("TopK", probs, graph.const([k], np.int64), axis=1, largest=1, sorted=1, outputs=2)
        base, table = self.rank_terms(options, k)
        if base == kernels.CUMULATIVE:
            by_rank = graph.op("CumSum", ranked, graph.const(1, np.int64))
        elif base == kernels.TOP:
            by_rank = graph.op("Expand", graph.column(ranked, 0), graph.op("Shape", ranked))
        else:
            by_rank = graph.op("Mul", ranked, graph.const(0.0))
        if table is not None:
            by_rank = graph.op("Add", by_rank, graph.const(np.asarray(table, dtype=np.float64)[None, :]))
        return graph.op("ScatterElements", by_rank, order, by_rank, axis=1)

    def summed_terms(self, options, k: int) -> int:
        """How many numbers V(x, y) adds at most (probabilities, the top probability, a penalty, a
        row's uniform): the same n numbers summed in two orders differ by up to 2 (n - 1) u |V|,
        which the set rule absorbs for probabilities as given
        (:func:`calib.calibrators.conformal.set_rule_slack`)."""
        from ...core import kernels

        base, table = self.rank_terms(options, k)
        terms = {kernels.CUMULATIVE: k, kernels.TOP: 1, kernels.NO_BASE: 0}[base] + (table is not None)
        return max(terms, 1) + bool(options.randomize)

    def randomised(self, start: np.ndarray, probs: np.ndarray, u: np.ndarray, options) -> np.ndarray:
        """The randomised score from ``start`` (what :meth:`rank_terms` gives, in class order), the
        probabilities and each row's u."""
        raise NotImplementedError
