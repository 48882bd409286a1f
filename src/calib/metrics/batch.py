"""One chunk of rows as every metric sees it, with the derived views computed once and shared."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ..core import kernels
from ..core.binning import BinCounter
from ..core.numerics import label_rank, log_of_probs, log_softmax_and_softmax

if TYPE_CHECKING:
    from ..io.predictions import Rows

#: Cached per-row values of a :class:`Batch` that :meth:`Batch.take` carries over.
ROW_VALUES = (
    "log_probs",
    "probs",
    "predicted",
    "confidence",
    "correct",
    "label_rank",
    "cumulative_mass",
    "own_log_prob",
    "row_brier",
    "cluster",
)


class Batch:
    """Probabilities, log-probabilities and labels of a chunk of rows (float64).

    Give ``log_probs`` (normalised, e.g. from log-softmax) and/or ``probs`` (both when both are at
    hand: they must then agree), and ``true_probs`` where the true conditional distribution is known
    (synthetic data). When only ``probs`` is given, ``log_probs`` is log(max(p, 1e-12))
    (docs/metrics.md) and ``prob_clipped`` is set; when only ``log_probs``, probs = exp(log_probs).
    ``cluster``: each row's bootstrap cluster, where the accumulators keep sums per cluster
    (:mod:`calib.bootstrap`); None elsewhere.

    ``answers``: the rows are stated confidences in answers (K = 2, p_i1 = P(the answer is right),
    y_i = 1 where it was): each row's answer is then class 1 whatever its probability, so the
    top-label views read the stated confidence against correctness (confidence p_i1, correct
    y_i = 1; accuracy the share of right answers), as an evaluation harness scores them.
    """

    cluster: np.ndarray | None = None
    #: How many clusters ``cluster`` draws from (set with it, :meth:`set_clusters`; not taken over by :meth:`take`).
    n_clusters: int | None = None

    def __init__(
        self,
        labels: np.ndarray,
        *,
        log_probs: np.ndarray | None = None,
        probs: np.ndarray | None = None,
        true_probs: np.ndarray | None = None,
        answers: bool = False,
    ):
        if log_probs is None and probs is None:
            raise ValueError("Batch needs log_probs or probs")
        self.labels = labels
        self.true_probs = true_probs
        self._log_probs = log_probs
        self._probs = probs
        self.prob_clipped = log_probs is None
        self.answers = answers

    def take(self, index) -> "Batch":
        """The rows ``index`` (an index array or a slice) of this batch. Derived values already
        computed (sorted cumulative mass, label ranks, ...) are taken row by row, not recomputed:
        they are functions of each row alone, so the values are the same."""
        part = Batch(
            self.labels[index],
            log_probs=None if self._log_probs is None else self._log_probs[index],
            probs=None if self._probs is None else self._probs[index],
            true_probs=None if self.true_probs is None else self.true_probs[index],
            answers=self.answers,
        )
        for name in ROW_VALUES:
            if name in self.__dict__:
                part.__dict__[name] = self.__dict__[name][index]
        return part

    def set_clusters(self, cluster: np.ndarray, n_clusters: int) -> None:
        """Each row's bootstrap cluster, in [0, ``n_clusters``) (:mod:`calib.bootstrap`)."""
        self.cluster, self.n_clusters = cluster, n_clusters

    def binned(self, view: str, n_bins: int, clusters: int | None = None) -> BinCounter:
        """The pairs of ``view`` in ``n_bins`` equal-width bins (group 0): "confidence" against
        correctness (ECE, MCE), "cumulative_mass" against coverage from the label's rank (CMCE); a
        fresh counter of the batch's rows, or (``clusters``, the batch's ``n_clusters``) per
        cluster. Where the rows carry their clusters, the first reader's one pass fills both
        counters and the other reader takes its own (the plain metrics and the bootstrap's
        per-cluster sums: :meth:`BinCounter.add`'s ``plain``)."""
        if clusters is not None and clusters != self.n_clusters:
            raise ValueError(f"the rows carry clusters of {self.n_clusters}, not {clusters}")
        found = self.__dict__.setdefault("_binned", {})
        if (view, n_bins) not in found:
            pairs = {
                "confidence": lambda: ((self.confidence, self.correct), {}),
                "cumulative_mass": lambda: ((self.cumulative_mass,), {"first_hit": self.label_rank}),
            }
            arguments, keywords = pairs[view]()
            plain = BinCounter(n_bins)
            per_cluster = None
            if self.n_clusters is None:
                plain.add(*arguments, **keywords)
            else:
                per_cluster = BinCounter(n_bins, clusters=self.n_clusters)
                per_cluster.add(*arguments, **keywords, cluster=self.cluster, plain=plain)
            found[(view, n_bins)] = plain, per_cluster
        plain, per_cluster = found[(view, n_bins)]
        return plain if clusters is None else per_cluster

    def compute(self, views) -> "Batch":
        """This batch with the derived ``views`` (names of its cached values) computed now: on the
        worker thread that made it, ahead of the accumulators that read them."""
        for name in views:
            getattr(self, name)
        return self

    @property
    def n(self) -> int:
        return int(self.labels.shape[0])

    @cached_property
    def log_probs(self) -> np.ndarray:
        return self._log_probs if self._log_probs is not None else log_of_probs(self._probs)

    @cached_property
    def probs(self) -> np.ndarray:
        return self._probs if self._probs is not None else np.exp(self._log_probs)

    @cached_property
    def rows(self) -> np.ndarray:
        return np.arange(self.n)

    @cached_property
    def predicted(self) -> np.ndarray:
        """argmax_k p_ik; ties go to the lowest class index (np.argmax returns the first). Rows of
        stated answers: class 1, the answer."""
        if self.answers:
            return np.ones(self.n, dtype=np.int64)
        return np.argmax(self.probs, axis=1)

    @cached_property
    def confidence(self) -> np.ndarray:
        return self.probs[self.rows, self.predicted]

    @cached_property
    def correct(self) -> np.ndarray:
        return self.predicted == self.labels

    @cached_property
    def own_log_prob(self) -> np.ndarray:
        """log p_iy, each row's log-probability of its label."""
        return self.log_probs[self.rows, self.labels]

    @cached_property
    def row_brier(self) -> np.ndarray:
        """sum_k (p_ik - 1{y_i = k})^2 = sum_k p_ik^2 - 2 p_iy + 1, each row's Brier score."""
        return np.einsum("ij,ij->i", self.probs, self.probs) - 2.0 * self.probs[self.rows, self.labels] + 1.0

    def mass_range(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        """Per row, #(m_ik < lo) and #(m_ik <= hi) of the cumulative masses (kept for the batch's
        other readers of the same range: the bootstrap's per-cluster sums beside the plain ones)."""
        found = self.__dict__.setdefault("_mass_ranges", {})
        if (lo, hi) not in found:
            found[(lo, hi)] = kernels.range_counts(self.cumulative_mass, lo, hi)
        return found[(lo, hi)]

    @cached_property
    def label_rank(self) -> np.ndarray:
        """0-based position of the label in the non-increasing order of p (ties: lower index first)."""
        return label_rank(self.probs, self.labels)

    @cached_property
    def cumulative_mass(self) -> np.ndarray:
        """m_ik = mass of the top-k classes, k = 1..K, clipped to [0, 1] (docs/metrics.md, CMCE)."""
        # sort(-p) is p in non-increasing order, negated (negation is exact), sorted in place on a
        # contiguous array; the cumulative sums then run along it (a reversed view is 3x slower)
        mass = np.negative(self.probs)
        mass.sort(axis=1)
        kernels.cumulative_mass(mass)
        return mass


def model_batch(preds, rows: Rows) -> Batch:
    """The model's own probabilities for ``rows`` of a :class:`calib.io.Predictions`: as given for
    probability inputs, else the log-softmax of the logits."""
    labels, truth = preds.labels[rows], preds.true_probs_rows(rows)
    given = preds.probs_as_given(rows)
    if given is not None:
        return Batch(labels, probs=given, true_probs=truth, answers=preds.answers)
    log_probs, probs = log_softmax_and_softmax(preds.logits(rows))
    return Batch(labels, log_probs=log_probs, probs=probs, true_probs=truth, answers=preds.answers)
