"""Streaming accumulators: each is updated chunk by chunk from a :class:`Batch` and merged by
addition. Metrics are computed from them at the end (see :mod:`calib.metrics.registry`)."""

from __future__ import annotations

import numpy as np

from ..core.binning import BinCounter, ReplicateBins
from ..core.numerics import cluster_totals, edge_slack, replicate_sums
from .batch import Batch


class Additive:
    """Accumulators whose state is a sum: ``STATE`` names the attributes (numbers, arrays,
    :class:`BinCounter` s, or lists of per-chunk arrays that merge by concatenation). Two states of
    the same metric settings merge by :meth:`absorb`, so files, shards and machines can be combined.

    :meth:`split_by_cluster` keeps every sum per cluster of rows instead (a leading axis of
    ``clusters``; each batch's rows then carry their cluster, ``Batch.cluster``): the bootstrap's
    per-cluster sums, filled in the same pass (:mod:`calib.bootstrap`); a list keeps each row's
    cluster beside its values (``row_cluster``)."""

    STATE: tuple[str, ...] = ()
    #: Batch views that :meth:`update` reads (computed ahead on a worker thread, :meth:`Batch.compute`).
    VIEWS: tuple[str, ...] = ()
    #: The clusters the sums are kept per; None: one sum over every row.
    clusters: int | None = None

    def split_by_cluster(self, clusters: int) -> None:
        """Keep the sums per cluster of rows (before the first update)."""
        self.clusters = clusters
        for name in self.STATE:
            value = getattr(self, name)
            if isinstance(value, BinCounter):
                setattr(self, name, BinCounter(value.n_bins, value.n_groups, clusters))
            elif isinstance(value, list):
                self.row_cluster: list[np.ndarray] = []
            else:
                setattr(self, name, np.zeros((clusters,) + np.shape(value)))

    def _names(self) -> tuple[str, ...]:
        listed = any(isinstance(getattr(self, name), list) for name in self.STATE)
        return self.STATE + (("row_cluster",) if self.clusters is not None and listed else ())

    def state(self) -> dict[str, np.ndarray]:
        out = {}
        for name in self._names():
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
        for name in self._names():
            value = getattr(self, name)
            if isinstance(value, BinCounter):
                value.absorb({key: state[f"{name}.{key}"] for key in ("count", "sum_pred", "sum_true")})
            elif isinstance(value, list):
                value.append(np.asarray(state[name]))
            elif isinstance(value, np.ndarray):
                value += state[name]
            else:
                setattr(self, name, type(value)(value + state[name].item()))

    def load(self, state: dict[str, np.ndarray]) -> None:
        """Take another accumulator's :meth:`state` as this one's (its arrays, not copies): a
        bootstrap replicate's state, read once (:meth:`calib.metrics.metric_set.MetricSet.values`)."""
        for name in self._names():
            value = getattr(self, name)
            if isinstance(value, (BinCounter, ReplicateBins)):  # a counter, after replicates or not
                counter = value if isinstance(value, BinCounter) else BinCounter(value.n_bins, value.n_groups)
                for key in ("count", "sum_pred", "sum_true"):
                    setattr(counter, key, np.reshape(state[f"{name}.{key}"], -1))
                setattr(self, name, counter)
            elif isinstance(value, list):
                setattr(self, name, [np.asarray(state[name])])
            elif isinstance(value, np.ndarray):
                setattr(self, name, np.asarray(state[name]))
            else:
                setattr(self, name, type(value)(state[name].item()))

    def load_replicates(self, state: dict[str, np.ndarray], weights: np.ndarray) -> None:
        """R bootstrap replicates at once, for the metrics that compute them together
        (``Metric.stacks``): ``state`` this accumulator's sums per cluster (its :meth:`state` when
        split by cluster), replicate r taking cluster c ``weights[r, c]`` times. Each counter
        becomes the replicates' :class:`calib.core.binning.ReplicateBins` (formed once for the same
        state, then drawn again by each block's weights), each other sum s the replicates' sums W s,
        shaped (R, ...)."""
        for name in self._names():
            value = getattr(self, name)
            if isinstance(value, (BinCounter, ReplicateBins)):
                sums = {key: state[f"{name}.{key}"] for key in ("count", "sum_pred", "sum_true")}
                if not (isinstance(value, ReplicateBins) and value.drawn(sums, weights)):
                    setattr(self, name, ReplicateBins(value.n_bins, value.n_groups, sums, weights))
            elif isinstance(value, list):
                raise ValueError(f"{type(self).__name__}.{name} holds per-row values: its metrics read one replicate at a time")
            else:
                setattr(self, name, replicate_sums(weights, state[name]))

    def _rows(self, batch: Batch):
        """The batch's rows: their count, or per cluster (a (clusters,) array)."""
        return batch.n if self.clusters is None else cluster_totals(batch.cluster, None, self.clusters)

    def _total(self, values: np.ndarray, batch: Batch):
        """sum_i x_i over the batch's rows of ``values`` ((N,) or (N, M)), or per cluster."""
        if self.clusters is None:
            return np.asarray(values, dtype=np.float64).sum(axis=0)
        return cluster_totals(batch.cluster, np.asarray(values, dtype=np.float64), self.clusters)

    def _cluster(self, batch: Batch) -> np.ndarray | None:
        """The batch's rows' clusters where the sums are kept per cluster, else None."""
        return None if self.clusters is None else batch.cluster

    def _keep_clusters(self, batch: Batch) -> None:
        """Each listed row's cluster, beside its values."""
        if self.clusters is not None:
            self.row_cluster.append(np.asarray(batch.cluster, dtype=np.int64))


class ProperScores(Additive):
    """Sums for accuracy, NLL and Brier (docs/metrics.md, "Proper scores and accuracy")."""

    STATE = ("n", "n_correct", "nll_sum", "brier_sum", "prob_clipped")
    VIEWS = ("correct", "own_log_prob", "row_brier")

    def __init__(self, n_classes: int = 0):
        self.n_classes = n_classes  # K (0: not known), which the binary conventions need
        self.n = 0
        self.n_correct = 0.0
        self.nll_sum = 0.0
        self.brier_sum = 0.0
        self.prob_clipped = 0  # rows whose log p came from clipped probabilities

    def update(self, batch: Batch) -> None:
        rows = self._rows(batch)
        self.n += rows
        self.n_correct += self._total(batch.correct, batch)
        self.nll_sum -= self._total(batch.own_log_prob, batch)
        self.brier_sum += self._total(batch.row_brier, batch)
        if batch.prob_clipped:
            self.prob_clipped += rows


class LabelRanks(Additive):
    """How many rows hold their label at each rank r < ``ranks`` of the non-increasing order of p
    (0: the argmax; ties to the lower class index, as :attr:`Batch.label_rank`): top-k accuracy
    for every k <= ``ranks`` from one count."""

    STATE = ("n", "at_rank")
    VIEWS = ("label_rank",)

    def __init__(self, ranks: int):
        self.n = 0
        self.at_rank = np.zeros(ranks)

    def update(self, batch: Batch) -> None:
        ranks = self.at_rank.shape[-1]
        self.n += self._rows(batch)
        self.at_rank += self._total(np.minimum(batch.label_rank, ranks)[:, None] == np.arange(ranks), batch)


class TopLabelBins(Additive):
    """Confidence max_k p_k against correctness, in equal-width bins (ECE, MCE, debiased ECE^2)."""

    STATE = ("counter", "n")
    VIEWS = ("confidence", "correct")

    def __init__(self, n_bins: int):
        self.counter = BinCounter(n_bins)
        self.n = 0

    def update(self, batch: Batch) -> None:
        self.counter.absorb(batch.binned("confidence", self.counter.n_bins, self.clusters).state())
        self.n += self._rows(batch)


class TopLabelValues(Additive):
    """Every row's confidence and correctness (O(N) memory, not O(N K)): for equal-mass bins,
    whose edges depend on all rows and so cannot be merged from per-chunk counts."""

    STATE = ("confidence", "correct")
    VIEWS = ("confidence", "correct")

    def __init__(self):
        self.confidence: list[np.ndarray] = []
        self.correct: list[np.ndarray] = []

    def update(self, batch: Batch) -> None:
        self.confidence.append(batch.confidence.copy())
        self.correct.append(batch.correct)
        self._keep_clusters(batch)


class ClasswiseBins(Additive):
    """Per class k, p_ik against 1{y_i = k} over all rows, in equal-width bins (cw-ECE)."""

    STATE = ("counter",)

    def __init__(self, n_bins: int, n_classes: int):
        self.counter = BinCounter(n_bins, n_classes)
        self.n_classes = n_classes

    def update(self, batch: Batch) -> None:
        self.counter.add(batch.probs, by_column=True, cluster=self._cluster(batch), hit_column=batch.labels)

    def update_beside_plain(self, batch: Batch) -> dict[str, np.ndarray]:
        """Add ``batch`` to these per-cluster bins and return what it adds to the plain ones (the
        :meth:`state` of a fresh one-cluster accumulator after :meth:`update`, to the bit), counted
        in the same compiled pass."""
        plain = ClasswiseBins(self.counter.n_bins, self.n_classes)
        self.counter.add(batch.probs, by_column=True, cluster=batch.cluster, plain=plain.counter, hit_column=batch.labels)
        return plain.state()


class CumulativeMassBins(Additive):
    """All N K pairs (m_ik, c_ik) of cumulative top-k mass and coverage, in equal-width bins (CMCE)."""

    STATE = ("counter",)
    VIEWS = ("cumulative_mass", "label_rank")

    def __init__(self, n_bins: int):
        self.counter = BinCounter(n_bins)

    def update(self, batch: Batch) -> None:
        self.counter.absorb(batch.binned("cumulative_mass", self.counter.n_bins, self.clusters).state())


class CumulativeMassRange(Additive):
    """Pairs with lo <= m_ik <= hi and how many of them cover the label (Coverage[lo, hi]); a mass
    within r e of an edge e counts as on it (in the band; r = :data:`calib.core.numerics.EDGE_RTOL`).

    m_ik is non-decreasing in k, so each row's pairs in range are the positions
    [#(m < lo - r lo), #(m <= hi + r hi)); the covered ones are those at or after the label's rank.
    """

    STATE = ("count", "covered")
    VIEWS = ("cumulative_mass", "label_rank")

    def __init__(self, lo: float, hi: float):
        self.lo, self.hi = lo, hi
        self.count = 0
        self.covered = 0

    def update(self, batch: Batch) -> None:
        start, stop = batch.mass_range(self.lo - edge_slack(self.lo), self.hi + edge_slack(self.hi))
        self.count += self._total(stop - start, batch)
        self.covered += self._total(np.maximum(stop - np.maximum(start, batch.label_rank), 0), batch)


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
        self.n += self._rows(batch)
        self.nll_sum -= self._total(np.einsum("ij,ij->i", truth, batch.log_probs), batch)
        self.brier_sum += self._total(((probs - truth) ** 2).sum(axis=1), batch)
        order = np.argsort(-truth, axis=1, kind="stable")
        true_sorted = np.take_along_axis(truth, order, axis=1)
        mass = np.cumsum(true_sorted, axis=1)
        gap = np.cumsum(true_sorted - np.take_along_axis(probs, order, axis=1), axis=1)
        last = truth.shape[1] - 1
        per_row = np.empty((batch.n, len(CPSME_ALPHAS)))
        for i, alpha in enumerate(CPSME_ALPHAS):
            level = 1.0 - alpha
            size = np.minimum((mass < level - edge_slack(level)).sum(axis=1), last)  # 0-based end of C*_alpha
            per_row[:, i] = np.abs(gap[batch.rows, size])
        self.cpsme_sum += self._total(per_row, batch)
