"""Streaming accumulators: each is updated chunk by chunk from a :class:`Batch` and merged by
addition. Metrics are computed from them at the end (see :mod:`calib.metrics.registry`)."""

from __future__ import annotations

import numpy as np

from ..core import kernels
from ..core.binning import BinCounter
from ..core.numerics import edge_slack
from .batch import Batch


class Additive:
    """Accumulators whose state is a sum: ``STATE`` names the attributes (numbers, arrays,
    :class:`BinCounter` s, or lists of per-chunk arrays that merge by concatenation). Two states of
    the same metric settings merge by :meth:`absorb`, so files, shards and machines can be combined."""

    STATE: tuple[str, ...] = ()

    def state(self) -> dict[str, np.ndarray]:
        out = {}
        for name in self.STATE:
            value = getattr(self, name)
            if isinstance(value, BinCounter):
                out.update({f"{name}.{key}": array for key, array in value.state().items()})
            elif isinstance(value, list):
                out[name] = np.concatenate(value) if value else np.zeros(0)
            else:
                out[name] = np.asarray(value)
        return out

    def absorb(self, state: dict[str, np.ndarray]) -> None:
        """Add another accumulator's :meth:`state` into this one (arrays in place: the same sums,
        without a new array per merge, which counts when thousands of group states merge)."""
        for name in self.STATE:
            value = getattr(self, name)
            if isinstance(value, BinCounter):
                for key in ("count", "sum_pred", "sum_true"):
                    getattr(value, key)[...] += state[f"{name}.{key}"]
            elif isinstance(value, list):
                value.append(np.asarray(state[name]))
            elif isinstance(value, np.ndarray):
                value += state[name]
            else:
                setattr(self, name, type(value)(value + state[name].item()))


class ProperScores(Additive):
    """Sums for accuracy, NLL and Brier (docs/metrics.md, "Proper scores and accuracy")."""

    STATE = ("n", "n_correct", "nll_sum", "brier_sum", "prob_clipped")

    def __init__(self, n_classes: int = 0):
        self.n_classes = n_classes  # K (0: not known), which the binary conventions need
        self.n = 0
        self.n_correct = 0.0
        self.nll_sum = 0.0
        self.brier_sum = 0.0
        self.prob_clipped = 0  # chunks whose log p came from clipped probabilities

    def update(self, batch: Batch) -> None:
        own_log = batch.log_probs[batch.rows, batch.labels]
        own = batch.probs[batch.rows, batch.labels]
        self.n += batch.n
        self.n_correct += float(batch.correct.sum())
        self.nll_sum -= float(own_log.sum())
        # sum_k (p_k - 1{y=k})^2 = sum_k p_k^2 - 2 p_y + 1
        self.brier_sum += float(np.einsum("ij,ij->", batch.probs, batch.probs) - 2.0 * own.sum() + batch.n)
        self.prob_clipped += int(batch.prob_clipped)


class LabelRanks(Additive):
    """How many rows hold their label at each rank r < ``ranks`` of the non-increasing order of p
    (0: the argmax; ties to the lower class index, as :attr:`Batch.label_rank`): top-k accuracy
    for every k <= ``ranks`` from one count."""

    STATE = ("n", "at_rank")

    def __init__(self, ranks: int):
        self.n = 0
        self.at_rank = np.zeros(ranks)

    def update(self, batch: Batch) -> None:
        self.n += batch.n
        self.at_rank += np.bincount(np.minimum(batch.label_rank, len(self.at_rank)), minlength=len(self.at_rank) + 1)[:-1]


class TopLabelBins(Additive):
    """Confidence max_k p_k against correctness, in equal-width bins (ECE, MCE, debiased ECE^2)."""

    STATE = ("counter", "n")

    def __init__(self, n_bins: int):
        self.counter = BinCounter(n_bins)
        self.n = 0

    def update(self, batch: Batch) -> None:
        self.counter.add(batch.confidence, batch.correct)
        self.n += batch.n


class TopLabelValues(Additive):
    """Every row's confidence and correctness (O(N) memory, not O(N K)): for equal-mass bins,
    whose edges depend on all rows and so cannot be merged from per-chunk counts."""

    STATE = ("confidence", "correct")

    def __init__(self):
        self.confidence: list[np.ndarray] = []
        self.correct: list[np.ndarray] = []

    def update(self, batch: Batch) -> None:
        self.confidence.append(batch.confidence.copy())
        self.correct.append(batch.correct)


class ClasswiseBins(Additive):
    """Per class k, p_ik against 1{y_i = k} over all rows, in equal-width bins (cw-ECE)."""

    STATE = ("counter",)

    def __init__(self, n_bins: int, n_classes: int):
        self.counter = BinCounter(n_bins, n_classes)
        self.n_classes = n_classes

    def update(self, batch: Batch) -> None:
        self.counter.add(batch.probs, None, by_column=True)
        self.counter.add_hits(batch.probs[batch.rows, batch.labels], group=batch.labels)


class CumulativeMassBins(Additive):
    """All N K pairs (m_ik, c_ik) of cumulative top-k mass and coverage, in equal-width bins (CMCE)."""

    STATE = ("counter",)

    def __init__(self, n_bins: int):
        self.counter = BinCounter(n_bins)

    def update(self, batch: Batch) -> None:
        self.counter.add(batch.cumulative_mass, first_hit=batch.label_rank)


class CumulativeMassRange(Additive):
    """Pairs with lo <= m_ik <= hi and how many of them cover the label (Coverage[lo, hi]); a mass
    within r e of an edge e counts as on it (in the band; r = :data:`calib.core.numerics.EDGE_RTOL`).

    m_ik is non-decreasing in k, so each row's pairs in range are the positions
    [#(m < lo - r lo), #(m <= hi + r hi)); the covered ones are those at or after the label's rank.
    """

    STATE = ("count", "covered")

    def __init__(self, lo: float, hi: float):
        self.lo, self.hi = lo, hi
        self.count = 0
        self.covered = 0

    def update(self, batch: Batch) -> None:
        start, stop = kernels.range_counts(batch.cumulative_mass, self.lo - edge_slack(self.lo), self.hi + edge_slack(self.hi))
        self.count += int((stop - start).sum())
        self.covered += int(np.maximum(stop - np.maximum(start, batch.label_rank), 0).sum())


#: Levels of CPSME (docs/metrics.md): alpha = 0.05, 0.10, ..., 0.50.
CPSME_ALPHAS = tuple(round(0.05 * i, 2) for i in range(1, 11))


class TrueProbScores(Additive):
    """Scores against the TRUE conditional distribution p (synthetic data), per row:

    - nll_true = -sum_k p_k log p^_k  (the expected NLL when labels are drawn from p);
    - brier_true = sum_k (p^_k - p_k)^2  (the expected Brier score less its irreducible part);
    - cpsme_alpha = |sum_{y in C*_alpha} (p_y - p^_y)|, C*_alpha the smallest top-k set of p with
      mass >= (1 - alpha)(1 - r) (r = :data:`calib.core.numerics.EDGE_RTOL`: a mass on the level within
      rounding reaches it), ties to the lower class index (ATS-CP paper, section 5.2; docs/metrics.md).
    """

    STATE = ("n", "nll_sum", "brier_sum", "cpsme_sum")

    def __init__(self):
        self.n = 0
        self.nll_sum = 0.0
        self.brier_sum = 0.0
        self.cpsme_sum = np.zeros(len(CPSME_ALPHAS))

    def update(self, batch: Batch) -> None:
        truth, probs = batch.true_probs, batch.probs
        self.n += batch.n
        self.nll_sum -= float(np.einsum("ij,ij->", truth, batch.log_probs))
        self.brier_sum += float(((probs - truth) ** 2).sum())
        order = np.argsort(-truth, axis=1, kind="stable")
        true_sorted = np.take_along_axis(truth, order, axis=1)
        mass = np.cumsum(true_sorted, axis=1)
        gap = np.cumsum(true_sorted - np.take_along_axis(probs, order, axis=1), axis=1)
        last = truth.shape[1] - 1
        for i, alpha in enumerate(CPSME_ALPHAS):
            level = 1.0 - alpha
            size = np.minimum((mass < level - edge_slack(level)).sum(axis=1), last)  # 0-based end of C*_alpha
            self.cpsme_sum[i] += np.abs(gap[batch.rows, size]).sum()
