"""Mergeable bin counters: per bin the count, the sum of predictions and the sum of binary outcomes.

Every binned metric (top-label ECE/MCE, classwise ECE, CMCE) reduces to these three additive
counters, so chunks, files and machines can be merged by adding them.
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .numerics import EDGE_STRETCH, bin_index, edge_slack, zeros_in_order


class BinCounter:
    """``n_groups`` x ``n_bins`` equal-width bins on [0, 1] (rule of :func:`calib.core.numerics.bin_index`),
    each kept per cluster of rows when ``clusters`` > 1: the bootstrap's per-cluster sums
    (:mod:`calib.bootstrap`), n_groups x n_bins x clusters with the cluster innermost, each row's
    in its cluster (``cluster`` of :meth:`add`). :meth:`state` shows them as (clusters, n_groups
    n_bins).

    Kept per cluster, the first bin of values added by column is kept apart until :meth:`state` or
    :meth:`absorb` folds it in: its sums in ``first_sum`` (clusters x n_groups, one cluster's groups
    contiguous), its count as the cluster's rows (``first_rows``) less the values that fell in
    another bin (``first_missing``, counted where they are found). Most values of many classes fall
    in the first bin, and a row's values then add along one cluster's contiguous numbers instead of
    each to another cache line (2.4x faster at 1,000 classes). Its sums are the first bin's values
    added in element order from zero, added to the bin when read (the other bins add each value to
    their running sum)."""

    def __init__(self, n_bins: int, n_groups: int = 1, clusters: int = 1):
        self.n_bins, self.n_groups, self.clusters = n_bins, n_groups, clusters
        size = n_bins * n_groups * clusters
        self.count, self.sum_pred, self.sum_true = zeros_in_order(size), zeros_in_order(size), zeros_in_order(size)
        self.first_missing: np.ndarray | None = None
        self.first_sum: np.ndarray | None = None
        self.first_rows: np.ndarray | None = None

    def _flat_index(self, pred: np.ndarray, group, cluster: np.ndarray | None = None) -> np.ndarray:
        index = bin_index(pred, self.n_bins)
        if self.n_groups > 1:
            index += np.asarray(group) * self.n_bins
        if cluster is not None:
            index = index * self.clusters + np.asarray(cluster, dtype=np.int64).reshape((-1,) + (1,) * (index.ndim - 1))
        return index.reshape(-1)

    def add(
        self,
        pred: np.ndarray,
        hits: np.ndarray | None = None,
        group: np.ndarray | int = 0,
        by_column: bool = False,
        first_hit: np.ndarray | None = None,
        cluster: np.ndarray | None = None,
        plain: BinCounter | None = None,
        hit_column: np.ndarray | None = None,
    ) -> None:
        """Count predictions in [0, 1] of any shape with their binary outcomes ``hits``.

        ``group`` broadcasts against ``pred`` (e.g. a group code per row); ``by_column``: each column
        of an (N, K) ``pred`` is its own group (the class of each probability). ``hits=None`` counts
        predictions only, their outcomes then come through :meth:`add_hits`. ``first_hit`` (N,)
        instead of ``hits`` (group 0, an (N, K) ``pred``): the outcome of pred[i, j] is 1{j >=
        first_hit[i]}, e.g. whether the label is among the top j + 1 classes when first_hit is its
        rank. ``hit_column`` (N,) instead of ``hits`` (by column): row i's one outcome 1 is its
        value in column hit_column[i] (its label's probability). ``cluster`` (N,): each row's cluster, in a counter made with ``clusters``; its values
        are then added into the running sums (no chunk-sized arrays). Group 0 or the columns are
        counted in one compiled pass where it is available (:func:`calib.core.kernels.bin_counts`);
        otherwise, and for other groups, by np.bincount (np.add.at into running sums): the same
        counts and the same sums to the bit. ``plain`` (with ``cluster``, in group 0 or by column):
        a counter of the same bins and groups and one cluster that the counts over every row are
        added into as its own :meth:`add` adds them, in the same compiled pass (its sums' additions
        then overlap the clusters': the bootstrap's per-cluster sums nearly free beside the plain
        ones).
        """
        values = np.asarray(pred, dtype=np.float64)
        if by_column:
            values = values.reshape(len(values), -1)
            group = np.arange(values.shape[1])[None, :]
        hits = None if hits is None else np.asarray(hits)
        if first_hit is not None and (hits is not None or by_column or values.ndim != 2 or not isinstance(group, int)):
            raise ValueError("first_hit goes with an (N, K) pred in group 0, without hits")
        if hit_column is not None and (hits is not None or not by_column):
            raise ValueError("hit_column goes by column, without hits")
        if (cluster is None) != (self.clusters == 1):
            raise ValueError("a counter of several clusters counts each row in its cluster: give cluster, and only there")
        in_place = cluster is not None  # per-cluster sums: added into the counter's, no chunk-sized arrays
        group_zero = isinstance(group, int) and group == 0
        if plain is not None and not (in_place and plain.clusters == 1 and (by_column or (group_zero and self.n_groups == 1))):
            raise ValueError("plain counts go beside per-cluster counts of group 0 or by column")
        if plain is not None and (plain.n_bins, plain.n_groups) != (self.n_bins, self.n_groups):
            raise ValueError("plain counts go into a counter of the same bins and groups")
        compiled = None
        one_block = by_column or self.n_groups == 1  # the compiled counts' layout is the counter's
        first_bin = self._first_bin(cluster) if cluster is not None and by_column else None
        # the pass counts straight into a counter's own sums where they run on (per cluster) or are
        # still empty (0 + x = x: the bits of fresh counts added), else into fresh ones added after
        into_plain = plain is not None and plain.is_empty()
        size = 0 if plain is None else plain.count.size
        fresh = None
        if plain is not None:
            fresh = (
                (plain.count, plain.sum_pred, plain.sum_true) if into_plain else (np.zeros(size), np.zeros(size), np.zeros(size))
            )
        own = in_place or (one_block and self.is_empty())
        if (by_column or group_zero) and (not in_place or one_block):
            shaped = values.reshape(-1, 1) if not by_column and first_hit is None else values
            flags = None if hits is None else hits.reshape(shaped.shape)
            if not in_place or shaped.shape[0] == len(cluster):
                out = (self.count, self.sum_pred, self.sum_true) if own else None
                scale = self.n_bins * EDGE_STRETCH
                compiled = kernels.bin_counts(
                    shaped,
                    flags,
                    self.n_bins,
                    scale,
                    by_column,
                    first_hit,
                    cluster,
                    self.clusters,
                    out,
                    first_bin,
                    fresh,
                    hit_column,
                )
        if plain is not None:  # as its own add: counts from the same pass, else its own pass
            if compiled is None:
                plain.add(values, hits, first_hit=first_hit, by_column=by_column, hit_column=hit_column)
            elif not into_plain:
                plain.add_counts(*fresh)
        if compiled is not None:
            if not own:
                self.add_counts(*compiled)
            return
        self._add_with_numpy(values, hits, group, first_hit, hit_column, cluster, first_bin)

    def _add_with_numpy(self, values, hits, group, first_hit, hit_column, cluster, first_bin) -> None:
        """:meth:`add` by np.bincount (into fresh counts) or np.add.at (into the running sums per
        cluster, the first bin apart in ``first_bin``): the compiled pass's counts and sums to the bit."""
        if hit_column is not None:  # each row's one hit, counted per bin and added once
            self.add_hits(values[np.arange(len(values)), hit_column], group=hit_column, cluster=cluster)
        if first_hit is not None:
            hits = np.arange(values.shape[1])[None, :] >= np.asarray(first_hit)[:, None]
        flat = self._flat_index(values, group, cluster)
        hit_flat = None if hits is None else flat[hits.reshape(-1) != 0]
        if cluster is not None:  # each value added into its bin's running sum in element order, as the compiled path
            flat_values = values.reshape(-1)
            if first_bin is not None:  # the first bin apart, as the compiled path keeps it
                first = flat % (self.n_bins * self.clusters) < self.clusters
                cell = np.asarray(cluster, dtype=np.int64)[:, None] * self.n_groups + np.arange(self.n_groups)
                np.add.at(first_bin[0], cell.reshape(-1)[~first], 1.0)
                np.add.at(first_bin[1], cell.reshape(-1)[first], flat_values[first])
                flat, flat_values = flat[~first], flat_values[~first]
            np.add.at(self.count, flat, 1.0)
            np.add.at(self.sum_pred, flat, flat_values)
            if hit_flat is not None:
                np.add.at(self.sum_true, hit_flat, 1.0)
            return
        count = np.bincount(flat, minlength=self.count.size)
        sums = np.bincount(flat, weights=values.reshape(-1), minlength=self.count.size)
        hit_count = None if hit_flat is None else np.bincount(hit_flat, minlength=self.count.size)
        self.add_counts(count, sums, hit_count)

    def is_empty(self) -> bool:
        """Whether nothing is counted yet: every count zero (then every sum is: a value or hit is
        added only where its bin's count goes up)."""
        return not self.count.any()

    def add_counts(self, count: np.ndarray, sums: np.ndarray, hit_count: np.ndarray | None) -> None:
        """Add one pass's fresh counts, sums of predictions and hits (those of group 0 alone: the
        first n_bins entries) into this counter's."""
        part = slice(0, len(count))
        self.count[part] += count
        self.sum_pred[part] += sums
        if hit_count is not None:
            self.sum_true[part] += hit_count

    def add_hits(self, pred: np.ndarray, group: np.ndarray | int = 0, cluster: np.ndarray | None = None) -> None:
        """Add outcome 1 at the bins of ``pred`` (predictions already counted by :meth:`add`): each
        bin's hits counted (np.unique), then added once; the same sums as adding 1.0 a hit, since
        counts are whole numbers."""
        bins, hits = np.unique(self._flat_index(pred, group, cluster), return_counts=True)
        self.sum_true[bins] += hits

    def merge(self, other: "BinCounter") -> "BinCounter":
        merged = BinCounter(self.n_bins, self.n_groups)
        for name in ("count", "sum_pred", "sum_true"):
            setattr(merged, name, getattr(self, name) + getattr(other, name))
        return merged

    def gaps(self) -> np.ndarray:
        """|sum_true - sum_pred| per bin, shaped (..., n_groups, n_bins): n_b |mean_b true - mean_b
        pred| (the leading axes of drawn counters, :meth:`without_miscalibration`)."""
        gaps = np.abs(self.sum_true - self.sum_pred)
        return gaps.reshape(*gaps.shape[:-1], self.n_groups, self.n_bins)

    def weighted_error(self) -> np.ndarray:
        """Per group: sum_b (n_b / n) |mean_b true - mean_b pred| with n the group's count, NaN
        where it has no row (:func:`weighted_error`); the counts too may have leading axes (drawn
        counters)."""
        totals = self.count.reshape(*self.count.shape[:-1], self.n_groups, self.n_bins).sum(axis=-1)
        return weighted_error(self.gaps().sum(axis=-1), totals)

    def max_error(self) -> np.ndarray | float:
        """max over non-empty bins of |mean_b true - mean_b pred| (group 0); NaN with no row
        (:func:`max_error`; the counts too may have leading axes)."""
        return max_error(np.abs(self.sum_true - self.sum_pred), self.count)

    def without_miscalibration(self, rng: np.random.Generator, draws: int) -> BinCounter:
        """``draws`` counters of a perfectly calibrated model with these bins' counts: in each
        non-empty bin b, sum_pred = n_b p_b and sum_true ~ Binomial(n_b, p_b), where p_b is whichever
        of the bin's mean prediction and its observed outcome rate lies nearer 1/2 (the larger
        Bernoulli variance; a binomial at the mean spreads at least as much as the rows' own
        Poisson-binomial). The arrays are shaped (draws, bins); :meth:`gaps` and the errors read
        them draw by draw. Their errors are the noise of the binned errors at these counts
        (calib.evaluation.resolution)."""
        count = self.count
        safe = np.maximum(count, 1)
        mean_pred, rate = self.sum_pred / safe, self.sum_true / safe
        p = np.clip(np.where(np.abs(mean_pred - 0.5) <= np.abs(rate - 0.5), mean_pred, rate), 0.0, 1.0)
        drawn = BinCounter(self.n_bins, self.n_groups)
        drawn.count = count.copy()
        drawn.sum_pred = np.broadcast_to(count * p, (draws, count.size)).copy()
        drawn.sum_true = np.zeros((draws, count.size))
        random = (count > 0) & (p > 0.0) & (p < 1.0)  # elsewhere the outcomes are certain: none, or every row
        certain = (count > 0) & (p >= 1.0)
        drawn.sum_true[:, certain] = count[certain]
        # drawn bin by bin (each bin's draws in a row: the binomial's set-up once a bin)
        trials, rate = count[random].astype(np.int64)[:, None], p[random][:, None]
        drawn.sum_true[:, random] = rng.binomial(trials, rate, size=(len(trials), draws)).T
        return drawn

    def _first_bin(self, cluster: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The first bin kept apart (made on the first use), with the rows of ``cluster`` (each
        row's cluster) counted in: (values outside the first bin, the first bin's sums), clusters x
        n_groups each, for the pass to add to."""
        if self.first_missing is None or self.first_sum is None or self.first_rows is None:
            cells = self.clusters * self.n_groups
            self.first_missing, self.first_sum, self.first_rows = np.zeros(cells), np.zeros(cells), np.zeros(self.clusters)
        self.first_rows += np.bincount(np.asarray(cluster, dtype=np.int64), minlength=self.clusters)
        return self.first_missing, self.first_sum

    def _fold_first_bin(self) -> None:
        """Add the first bin kept apart into the sums (their first bin holds no other value, so the
        same bits as adding every value there; its count the rows less the values elsewhere, whole
        numbers), and start it again from zero."""
        if self.first_missing is None or self.first_sum is None or self.first_rows is None:
            return
        first_count = self.first_rows[:, None] - self.first_missing.reshape(self.clusters, self.n_groups)
        for name, apart in (("count", first_count), ("sum_pred", self.first_sum.reshape(self.clusters, self.n_groups))):
            first = getattr(self, name).reshape(self.n_groups, self.n_bins, self.clusters)[:, 0, :]
            first += apart.T
        self.first_missing = self.first_sum = self.first_rows = None

    def state(self) -> dict:
        """The three sums, (clusters, n_groups n_bins) when kept per cluster (a view), else (n_groups n_bins,)."""
        self._fold_first_bin()
        return {name: self._by_cluster(getattr(self, name)) for name in ("count", "sum_pred", "sum_true")}

    def _by_cluster(self, sums: np.ndarray) -> np.ndarray:
        return sums.reshape(-1, self.clusters).T if self.clusters > 1 else sums

    def absorb(self, state: dict) -> None:
        """Add another counter's :meth:`state` (of the same bins and clusters) into this one."""
        self._fold_first_bin()
        for name in ("count", "sum_pred", "sum_true"):
            sums = self._by_cluster(getattr(self, name))
            sums += np.reshape(state[name], sums.shape)


def weighted_error(gap_sums: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """sum_b |sum_b true - sum_b pred| / n per group: ``gap_sums`` (..., groups) the sums over
    each group's bins of |sum true - sum pred| (n_b |mean_b true - mean_b pred|), ``totals``
    (..., groups) the groups' row counts n; NaN where a group has no row (a bootstrap replicate
    that drew none)."""
    return np.where(totals > 0, gap_sums / np.maximum(totals, 1), np.nan)


def max_error(gaps: np.ndarray, count: np.ndarray) -> np.ndarray:
    """max over the non-empty bins (count > 0) of gaps / count, along the last axis: |mean_b true -
    mean_b pred| at its largest; NaN where no bin has a row."""
    if gaps.shape[-1] == 0:
        return np.full(gaps.shape[:-1], np.nan)
    nonempty = count > 0
    found = np.max(np.where(nonempty, gaps / np.maximum(count, 1), -np.inf), axis=-1)
    return np.where(nonempty.any(axis=-1), found, np.nan)


class ReplicateBins:
    """R bootstrap replicates of a counter kept per cluster of rows, read as the binned errors read
    them. Replicate r takes cluster c ``weights[r, c]`` times, so its sums are sum_c w_rc s_c (s_c
    the cluster's count, sum of predictions, sum of outcomes: ``state``, (clusters, n_groups
    n_bins) each, :meth:`BinCounter.state`).

    The errors read each bin's |sum true - sum pred| and the groups' row counts, and both are
    linear in the clusters' sums: the gaps of all R replicates are |W (t - p)|, one (R, clusters) x
    (clusters, bins) product of the clusters' differences (not one for t and one for p), over the
    bins that hold a row in some cluster (every sum of the others is zero in every replicate), the
    groups' rows W n_g from the clusters' row counts per group, and the per-bin counts W n only
    where the maximum error reads them. For the classwise bins of 50,000 rows of 1,000 classes (15
    bins, 200 clusters) that is one product over the 39% of the 15,000 bins that hold a row, where
    the three sums took three over all of them."""

    def __init__(self, n_bins: int, n_groups: int, state: dict[str, np.ndarray], weights: np.ndarray):
        self.n_bins, self.n_groups = n_bins, n_groups
        self.state = state
        self.weights = np.asarray(weights, dtype=np.float64)
        clusters = len(self.weights[0])
        # (bins, clusters): a counter's own layout (its state is the transposed view), each bin's
        # clusters contiguous
        count, true, pred = (np.reshape(state[name], (clusters, -1)).T for name in ("count", "sum_true", "sum_pred"))
        #: The bins that hold a row in some cluster, in order (a group's bins together).
        self.bins = np.flatnonzero(count.any(axis=1))
        self.difference = (true[self.bins] - pred[self.bins]).T
        selected = count[self.bins]
        self.count = selected.T
        #: The groups with such bins, and where each one's bins start among them.
        self.groups, self.group_starts = np.unique(self.bins // n_bins, return_index=True)
        self.totals = np.zeros((clusters, n_groups))  # each cluster's rows per group (counts: exact in any order)
        if len(self.bins):
            self.totals[:, self.groups] = np.add.reduceat(selected, self.group_starts, axis=0).T

    def drawn(self, state: dict[str, np.ndarray], weights: np.ndarray) -> bool:
        """Whether these are the replicates of ``state`` (the same arrays), now drawn by ``weights``
        (taken as this one's: the clusters' differences and counts are not formed again)."""
        if any(self.state[name] is not state[name] for name in ("count", "sum_pred", "sum_true")):
            return False
        self.weights = np.asarray(weights, dtype=np.float64)
        return True

    def weighted_error(self) -> np.ndarray:
        """Per replicate and group, as :meth:`BinCounter.weighted_error`: (R, n_groups)."""
        gaps = np.abs(self.weights @ self.difference)
        gap_sums = np.zeros((len(self.weights), self.n_groups))
        if len(self.bins):
            gap_sums[:, self.groups] = np.add.reduceat(gaps, self.group_starts, axis=1)
        return weighted_error(gap_sums, self.weights @ self.totals)

    def max_error(self) -> np.ndarray:
        """Per replicate, as :meth:`BinCounter.max_error`: (R,)."""
        return max_error(np.abs(self.weights @ self.difference), self.weights @ self.count)


#: A bin with fewer rows than this is drawn as too few to read: its band spans most of [0, 1].
MIN_BIN_ROWS = 10


def clopper_pearson(successes, trials, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The exact (Clopper-Pearson 1934) interval of a binomial rate at ``level``: [B((1 - level) / 2;
    k, n - k + 1), B((1 + level) / 2; k + 1, n - k)] with B(q; a, b) the q quantile of Beta(a, b),
    0 at k = 0 and 1 at k = n. Never narrower than its level, also where a bootstrap collapses
    (every row of a bin with the same outcome). The quantiles come from
    :func:`calib.core.beta.beta_quantile` (without scipy.special's 0.2 s import), one pair at a
    time: the intervals asked for are a few (a metric's, a reliability diagram's bins)."""
    from .beta import beta_quantile

    k, n = np.broadcast_arrays(np.asarray(successes, dtype=float), np.asarray(trials, dtype=float))
    tail = (1.0 - level) / 2.0
    lower, upper = np.zeros(k.shape), np.ones(k.shape)
    for index in np.ndindex(k.shape):
        hits, rows = float(k[index]), float(n[index])
        if hits > 0:
            lower[index] = beta_quantile(tail, hits, rows - hits + 1.0)
        if hits < rows:
            upper[index] = beta_quantile(1.0 - tail, hits + 1.0, rows - hits)
    return lower, upper


def uniform_mass_upper_edges(values: np.ndarray, n_bins: int) -> np.ndarray:
    """The upper edges of Gupta & Ramdas' (2021, 2022) uniform-mass bins of ``values``: sorted, cut
    into ``n_bins`` groups of sizes differing by at most one (the first ones larger, as
    ``np.array_split``), each group's largest value its bin's upper edge, the last edge +inf. A
    value goes to the first bin whose upper edge it does not exceed (:func:`upper_edge_bins`), so a
    value tied across two groups goes to the first."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    size, extra = divmod(len(ordered), n_bins)
    ends = np.cumsum([size + 1] * extra + [size] * (n_bins - extra))
    return np.append(ordered[ends[:-1] - 1], np.inf)


def upper_edge_bins(values: np.ndarray, upper_edges: np.ndarray) -> np.ndarray:
    """Each value's bin: the first bin whose upper edge it does not exceed, a value within the
    rounding tolerance above an edge counting as on it (:func:`calib.core.numerics.edge_slack`):
    an edge is a calibration row's own confidence, which another kernel path may compute a last
    bit higher."""
    edges = np.asarray(upper_edges, dtype=np.float64)
    return np.searchsorted(edges + edge_slack(edges), values, side="left")
