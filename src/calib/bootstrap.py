"""Bootstrap confidence intervals for the streamed metrics, drawn in the evaluation's own pass
(docs/cli.md ``evaluate --bootstrap N``).

Row i goes to cluster g_i = SplitMix64(key, i) mod G, G = 200 (:func:`row_clusters`: a
counter-based draw keyed by the seed and the row's global index, so chunks, shards and engines give
every row the same cluster). Every metric's state is additive over rows (sums, bin counts, or
per-row values that merge by concatenation), so the same pass that fills the state fills it per
cluster too (:class:`BootstrapStates`). A replicate draws G clusters with replacement (multinomial
counts c_g, :func:`cluster_counts`; Poisson(1) weights cost the same here and gave intervals 1-3%
wider with the same coverage, docs/benchmarks.md) and its state is sum_g c_g state_g, for every
replicate at once one matrix product: a grouped bootstrap, the row bootstrap with rows resampled in random clusters of
n/G. A replicate is the metrics of its resampled rows (each row repeated c_g times); for sums it has
the row bootstrap's variance (the clusters are a random partition, so their totals are
exchangeable), and it streams: memory is G states, not N rows per replicate. The interval is the
percentile interval of the replicate values, centred (:func:`centred_interval`).

Replicates are determined by (seed, G, the rows' global indices) only, so two evaluations of
different models on the same rows with the same seed resample the same rows: their replicate
differences form a paired bootstrap, which change gates against a baseline use
(:func:`calib.evaluation.report_types.paired_differences`); and shards evaluated with their first
rows add up to the replicates of one evaluation of all rows (merged metric states).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .core.numerics import cluster_totals, linear_percentiles, replicate_sums
from .metrics.accumulators import ClasswiseBins

GROUPS = 200
#: How the rows' clusters are drawn, as a report records it: reports pair only when it is the same
#: (a report of an earlier calib, whose clusters came from another draw, pairs with none).
CLUSTER_DRAW = "splitmix64 of the global row index, mod 200"


#: Replicates a report records by default for its gates (and a stored baseline's): enough for the
#: 0.05 and 0.95 quantiles that gates read (docs/ci-gates.md has the measured false-alarm rates).
DEFAULT_REPLICATES = 200
#: Inputs of up to this many classes get replicates by default. The replicates are drawn in the
#: evaluation's own pass (:class:`BootstrapStates`), whatever the rows; their memory is the
#: per-cluster classwise bins, G x K x bins x 3 numbers: 144 MB at 2,000 classes and 15 bins.
MAX_DEFAULT_CLASSES = 2_000


@dataclass(frozen=True)
class BootstrapConfig:
    replicates: int
    seed: int
    level: float = 0.95


def check_level(level: float) -> float:
    """``level``, a confidence level of intervals in [0.5, 1): the one rule of every request."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.5 <= level < 1:
        from .errors import UsageError

        raise UsageError(f"the confidence level must be in [0.5, 1); got {level!r}")
    return float(level)


def check_tail_replicates(replicates: int, level: float) -> None:
    """Refuse fewer than 2 / (1 - ``level``) replicates where a verdict reads the interval's ends:
    with fewer no replicate lies beyond an end, and the ends understate the noise (at 2,000 rows,
    50 replicates called a decayed batch a new concept that 200 called decay)."""
    if replicates * (1.0 - level) / 2.0 < 1.0 - 1e-9:
        from .errors import UsageError

        needed = int(np.ceil(2.0 / (1.0 - level) - 1e-9))
        raise UsageError(
            f"{replicates} bootstrap replicates leave no replicate beyond an end of the {level:g} interval; it needs at "
            f"least {needed} (2 / (1 - level)): with fewer its ends understate the noise",
            cli_hint="--bootstrap",
        )


def independent_seed(seed: int) -> int:
    """A seed whose replicates are independent of ``seed``'s, for a second batch of other rows
    (derived, so the same ``seed`` gives the same pair of draws)."""
    return int(np.random.SeedSequence([seed, 4]).generate_state(1)[0])


def default_config(
    n_rows: int, n_classes: int, level: float, baseline: BootstrapConfig | None = None, seed: int = 0
) -> BootstrapConfig | None:
    """The replicates a report records when none were asked for: the ``baseline`` report's count and
    seed when it has replicates (so that the two pair), else :data:`DEFAULT_REPLICATES` with
    ``seed`` when the input has at most :data:`MAX_DEFAULT_CLASSES` classes; None otherwise."""
    if baseline is not None:
        return BootstrapConfig(baseline.replicates, baseline.seed, level)
    if n_classes <= MAX_DEFAULT_CLASSES:
        return BootstrapConfig(DEFAULT_REPLICATES, seed, level)
    return None


def resolve_config(
    bootstrap,
    n_rows: int,
    n_classes: int,
    *,
    seed: int = 0,
    level: float = 0.95,
    gated: bool = False,
    baseline: BootstrapConfig | None = None,
    recorded: bool = False,
) -> BootstrapConfig | None:
    """The replicates of an evaluation, one policy for the library and the command line: a
    :class:`BootstrapConfig` as given; a count N (0 or None: none) with ``seed`` and ``level``; "auto"
    draws :func:`default_config`'s replicates when the report is ``gated`` (so that its gates
    read the noise: pass, fail or inconclusive) or ``recorded`` (a report written for later change
    gates to pair with), pairing with the ``baseline`` report's bootstrap section when it has one,
    and none otherwise."""
    if bootstrap is None or isinstance(bootstrap, BootstrapConfig):
        return bootstrap
    if bootstrap == "auto":
        return default_config(n_rows, n_classes, level, baseline, seed) if gated or recorded else None
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, (int, np.integer)) or bootstrap < 0:
        from .errors import UsageError

        raise UsageError(f"bootstrap takes a number of replicates (0 for none) or 'auto'; got {bootstrap!r}")
    return BootstrapConfig(int(bootstrap), seed, level) if bootstrap > 0 else None


#: The odd constants of SplitMix64 (Steele, Lea & Flood 2014): the increment and the two mixers.
_GOLDEN, _MIX1, _MIX2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def splitmix64(key: np.uint64, counters: np.ndarray) -> np.ndarray:
    """Output c of SplitMix64 started at state ``key`` for each counter c (0-based): z = key +
    (c + 1) golden, z = (z ^ z >> 30) m1, z = (z ^ z >> 27) m2, z ^ z >> 31, modulo 2^64 (Steele,
    Lea & Flood 2014): a counter-based generator, any output computed without the ones before it."""
    with np.errstate(over="ignore"):  # arithmetic modulo 2^64 is the generator
        z = np.uint64(key) + (np.asarray(counters, dtype=np.uint64) + np.uint64(1)) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def row_keys(rows) -> np.ndarray:
    """Rows' global indices or ids (an array, a slice or a range) as unsigned 64-bit keys."""
    if isinstance(rows, (slice, range)):
        return np.arange(rows.start or 0, rows.stop, dtype=np.uint64)
    return np.asarray(rows, dtype=np.uint64)


def row_clusters(seed: int, rows, pairs_per_row: int = 1, groups: int = GROUPS) -> np.ndarray:
    """Each row's cluster in [0, G), G = ``groups``: a counter-based draw keyed by (``seed``, the
    row's global index i), :func:`splitmix64` (key, i) mod G with the key drawn from ``seed``, so any
    split of the rows (chunks, shards, machines) gives every row the same cluster. ``rows``: the
    global indices (an array, a slice or a range). A multi-label input's rows are its (row, label)
    pairs, ``pairs_per_row`` of them: the pairs of a row are drawn together (one cluster per row),
    so a replicate resamples rows, not pairs."""
    index = row_keys(rows) // np.uint64(pairs_per_row)
    key = np.random.SeedSequence([seed, 1]).generate_state(1, np.uint64)[0]
    return (splitmix64(key, index) % np.uint64(groups)).astype(np.int64)


def cluster_counts(config: BootstrapConfig, clusters: int) -> np.ndarray:
    """(replicates, G) multinomial counts of the G clusters: how often each replicate draws each."""
    return np.random.default_rng([config.seed, 2]).multinomial(
        clusters, np.full(clusters, 1.0 / clusters), size=config.replicates
    )


@dataclass(frozen=True)
class ReplicateWeights:
    """How often each of R replicates draws each of N rows: row i's weight in replicate r is
    ``counts[r, assignment[i]]``, its cluster's count (:func:`row_clusters`,
    :func:`cluster_counts`). A statistic weighted by a replicate's row weights is that statistic on
    the replicate, the resampling that :class:`BootstrapStates` gives the streamed metrics:
    statistics that are no sums of rows (an isotonic fit, EM's priors) are resampled with these, and
    pair with the metrics of the same rows, seed and count. Sums over rows go through the clusters,
    W x = counts (per-cluster sums of x), in O(N) work and no (R, N) matrix."""

    counts: np.ndarray
    assignment: np.ndarray

    @classmethod
    def once(cls, n_rows: int) -> ReplicateWeights:
        """One weighting that counts every row once: the sample itself."""
        return cls(np.ones((1, 1)), np.zeros(n_rows, dtype=np.int64))

    def totals(self, values: np.ndarray | None = None) -> np.ndarray:
        """sum_i w_ri x_i for each replicate: (R,) for ``values`` (N,) (None: the weights alone), (R, M) for (N, M)."""
        values = None if values is None else np.asarray(values, dtype=np.float64)
        return self.counts @ cluster_totals(self.assignment, values, self.counts.shape[1])

    def grouped_totals(self, group: np.ndarray, n_groups: int, values: np.ndarray | None = None) -> np.ndarray:
        """(R, ``n_groups``) sums of w_ri x_i over the rows of each group (``group``: each row's in [0, n_groups))."""
        clusters = self.counts.shape[1]
        cell = self.assignment * n_groups + group
        by_cell = np.bincount(cell, weights=values, minlength=clusters * n_groups).reshape(clusters, n_groups)
        return self.counts @ by_cell

    def matrix(self) -> np.ndarray:
        """The (R, N) row weights themselves."""
        return self.counts[:, self.assignment].astype(np.float64)


def row_weights(config: BootstrapConfig, n_rows: int, pairs_per_row: int = 1, groups: int = GROUPS) -> ReplicateWeights:
    """The row weights of ``config``'s replicates of ``n_rows`` rows (a multi-label input's pairs
    drawn by row, ``pairs_per_row`` of them): the clusters and counts of the streamed metrics'."""
    assignment = row_clusters(config.seed, range(n_rows), pairs_per_row, groups)
    return ReplicateWeights(cluster_counts(config, groups).astype(np.float64), assignment)


#: Groups of rows (``--group-by``) up to this many get replicates of their own (for noise-aware
#: gates on groups); each costs as many metric computations as the replicates.
MAX_GROUPS_WITH_REPLICATES = 50


#: Per-cluster sums of at most this many numbers are filled for each chunk alone, ahead of its turn
#: (:meth:`BootstrapStates.prepare`); the larger ones are added to in place in the chunks' turns.
CHUNK_STATE_CELLS = 1 << 18


class BootstrapStates:
    """The per-cluster sums of every accumulator, filled in the evaluation's own pass: one
    MetricSet whose sums are kept per cluster (row i's cluster :func:`row_clusters` of its global
    index ``first_row`` + i, or of its own id ``row_ids[i]`` where the rows carry ids: a table's
    rows in any order and partitioning), from which :meth:`replicate_values` draws the replicates. With
    ``strata`` (each row's group of a ``--group-by``, S of them) the sums are per (group, cluster)
    pair: a group's replicate resamples its own rows of the same clusters with the same counts
    (:meth:`stratum_replicate_values`), and the whole sample's replicate is their sum.

    A replicate's state is sum_g c_g state_g for its cluster counts c (:func:`cluster_counts`): one
    matrix product over the clusters for every replicate at once; per-row values (equal-mass
    bins) are repeated c_g times for the rows of cluster g."""

    def __init__(
        self,
        make_metric_set,
        seed: int,
        groups: int = GROUPS,
        strata=None,
        n_strata: int = 1,
        pairs_per_row: int = 1,
        first_row: int = 0,
        row_ids: np.ndarray | None = None,
        plain_beside: bool = False,
    ):
        self.make_metric_set = make_metric_set
        self.seed, self.clusters, self.n_strata = seed, groups, n_strata
        self.pairs_per_row, self.first_row = pairs_per_row, first_row
        self.row_ids = None if row_ids is None else np.asarray(row_ids, dtype=np.uint64)
        self.strata = None if strata is None else np.asarray(strata, dtype=np.int64)
        self.metric_set = make_metric_set(clusters=groups * n_strata)
        self._chunk_filled = [
            identity
            for identity, accumulator in self.metric_set.accumulators.items()
            if sum(np.size(array) for array in accumulator.state().values()) <= CHUNK_STATE_CELLS
        ]
        #: {identity: accumulator} of the classwise bins added to in place in the chunks' turns, which
        #: count their rows' plain sums in the same pass (``plain_beside``: :meth:`update` returns
        #: them; a chunk's plain accumulators leave them out).
        self.plain_beside = {
            identity: accumulator
            for identity, accumulator in self.metric_set.accumulators.items()
            if plain_beside and isinstance(accumulator, ClasswiseBins) and identity not in self._chunk_filled
        }

    def cells(self, rows) -> np.ndarray:
        """The cell of each of ``rows`` (a slice or indices of this input): its stratum's block of
        clusters plus its cluster."""
        index = np.arange(rows.start or 0, rows.stop) if isinstance(rows, slice) else np.asarray(rows, dtype=np.int64)
        keys = self.row_ids[index] if self.row_ids is not None else index + self.first_row
        cell = row_clusters(self.seed, keys, self.pairs_per_row, self.clusters)
        if self.strata is not None:
            cell += self.strata[index] * self.clusters
        return cell

    def assign_cells(self, batch, rows) -> None:
        """Give ``batch`` (the rows ``rows``) its rows' cells, before any accumulator reads it: the
        plain sums of its binned pairs are then counted in the per-cluster sums' pass
        (:meth:`calib.metrics.batch.Batch.binned`)."""
        batch.set_clusters(self.cells(rows), self.clusters * self.n_strata)

    def prepare(self, batch, rows) -> tuple:
        """(``batch`` (the rows ``rows``) with its rows' cells and the views the accumulators read,
        the per-cluster sums of its small accumulators): the work a worker thread does ahead of
        :meth:`update`. An accumulator whose per-cluster sums hold at most :data:`CHUNK_STATE_CELLS`
        numbers is filled for the chunk alone here; the larger ones (classwise bins of many classes:
        a chunk's own would be as large as the whole) are added to in place by :meth:`update`."""
        if batch.cluster is None:
            self.assign_cells(batch, rows)
        batch.compute(self.metric_set.views)
        filled = self.metric_set.fresh(self._chunk_filled)
        for accumulator in filled.values():
            accumulator.update(batch)
        return batch, {identity: accumulator.state() for identity, accumulator in filled.items()}

    def update(self, prepared: tuple) -> dict[tuple, dict[str, np.ndarray]]:
        """Add a chunk that :meth:`prepare` made, chunks in row order (one at a time: the
        chunk's turn, :class:`calib.core.numerics.Turns`): its small accumulators' sums and its batch
        to the large ones. Returns the chunk's plain sums of the :attr:`plain_beside`
        accumulators, {identity: state}, counted in the same pass as their per-cluster sums."""
        batch, filled = prepared
        self.metric_set.update(batch, skip=set(filled) | set(self.plain_beside))
        self.metric_set.absorb_parts(filled)
        return {identity: accumulator.update_beside_plain(batch) for identity, accumulator in self.plain_beside.items()}

    def cluster_state(self) -> dict[str, np.ndarray]:
        """The state per cluster, summed over the strata (what a metric state file holds)."""
        state = self.metric_set.state()
        if self.n_strata == 1:
            return state
        listed = self.metric_set.concatenated_state_keys()
        clustered = set(listed.values())
        out = {}
        for key, array in state.items():
            if key in clustered:
                out[key] = array % self.clusters
            elif key in listed:
                out[key] = array
            else:
                out[key] = array.reshape((self.n_strata, self.clusters) + array.shape[1:]).sum(axis=0)
        return out

    def replicate_values(self, config: BootstrapConfig) -> dict[str, np.ndarray]:
        """{metric: (replicates,) values} of the whole sample (NaN where a replicate has no value)."""
        return _replicate_values(self.make_metric_set, self.cluster_state(), cluster_counts(config, self.clusters))

    def stratum_states(self) -> list[dict[str, np.ndarray]]:
        """Per stratum, the state per cluster of its rows alone (what a metric state file holds of
        each group, for merged states to draw the groups' replicates)."""
        state = self.metric_set.state()
        listed = self.metric_set.concatenated_state_keys()
        clustered = set(listed.values())
        out = []
        for stratum in range(self.n_strata):
            block = slice(stratum * self.clusters, (stratum + 1) * self.clusters)
            part = {}
            for key, array in state.items():
                if key in listed:
                    cells = state[listed[key]]
                    part[key] = array[cells // self.clusters == stratum]
                elif key in clustered:
                    part[key] = array[array // self.clusters == stratum] % self.clusters
                else:
                    part[key] = array[block]
            out.append(part)
        return out

    def stratum_replicate_values(self, config: BootstrapConfig) -> list[dict[str, np.ndarray]]:
        """Per stratum, {metric: (replicates,) values} of its rows, resampled with the same counts."""
        counts = cluster_counts(config, self.clusters)
        return [_replicate_values(self.make_metric_set, part, counts) for part in self.stratum_states()]


#: Replicates whose sums are held at once (:func:`_replicate_values`): 200 x a counter's bins, 24 MB
#: for the classwise bins of 1,000 classes.
REPLICATE_BLOCK = 200


def _replicate_values(make_metric_set, state: dict[str, np.ndarray], counts: np.ndarray) -> dict[str, np.ndarray]:
    """{metric: (R,) values} of the R replicates of the per-cluster ``state`` drawn by ``counts``
    (R, G), :data:`REPLICATE_BLOCK` replicates at a time: the binned errors of every replicate of
    the block at once from the clusters' sums (``Metric.stacks``, :meth:`MetricSet.load_replicates`),
    the other metrics from each replicate's own state, whose sums come from one matrix product per
    additive array."""
    replicate = make_metric_set()
    listed = replicate.concatenated_state_keys()
    repeated = replicate.split_state({key: state[key] for key in listed})  # per-row values
    cells = replicate.split_state({key: state[cells_key] for key, cells_key in listed.items()})
    per_cluster = replicate.split_state(
        {key: array for key, array in state.items() if key not in listed and key not in listed.values()}
    )
    one_by_one = replicate.read_by(stacked=False)
    together = replicate.read_by(stacked=True)
    out: dict[str, list] = {metric.key: [] for metric in replicate.metrics}
    for start in range(0, len(counts), REPLICATE_BLOCK):
        block = counts[start : start + REPLICATE_BLOCK]
        replicate.load_replicates({identity: per_cluster[identity] for identity in together}, block)
        stacked = replicate.stacked_values()  # the binned errors: every replicate of the block at once
        for key, values in stacked.items():
            out[key].extend(np.full(len(block), np.nan) if values is None else np.where(np.isfinite(values), values, np.nan))
        summed = {
            identity: {name: replicate_sums(block, array) for name, array in per_cluster[identity].items()}
            for identity in one_by_one
        }
        for r, weights in enumerate(block):
            loaded = {}
            for identity in one_by_one:
                loaded[identity] = {name: values[r] for name, values in summed[identity].items()}
                for name, values in repeated[identity].items():
                    loaded[identity][name] = np.repeat(values, weights[cells[identity][name]].astype(np.int64))
            replicate.load(loaded)
            for key, value in replicate.values(skip=stacked).items():
                out[key].append(np.nan if value is None else value)
    return {key: np.array(values, dtype=float) for key, values in out.items()}


def upper_percent(level: float) -> float:
    """The percent of a two-sided interval's upper end at ``level``: 97.5 for 0.95 (rounded, not
    97.50000000000001)."""
    return round(50.0 * (1.0 + level), 9)


#: Replicates that must lie beyond a percentile end for the replicates alone to place it.
MIN_TAIL_REPLICATES = 5


def centred_interval(replicates, level: float, estimate: float | None = None) -> tuple[float, float, np.ndarray] | None:
    """The one bootstrap interval of every output (the table, the JSON report, the gates): the
    ``level`` percentile interval of the replicates (NaN ones dropped) shifted by estimate -
    mean(replicates) when ``estimate`` is given, so that the bootstrap's own bias (resampled rows
    repeat, which inflates binned errors) moves neither end and the value lies inside its interval.

    Where fewer than :data:`MIN_TAIL_REPLICATES` of the R replicates lie beyond an end ((1 - level)
    R / 2 < 5: a Bonferroni level 1 - 0.05 / 50 with 200 replicates puts 0.1 of one there), the
    percentile is the sample's extreme, not its quantile, and falls short of it. Each end is then
    at least z sd from the centre (z the standard normal's (1 + level) / 2 quantile, sd the
    replicates' standard deviation; the normal bootstrap interval, Efron & Tibshirani 1993, ch. 13).
    Returns (lower, upper, the shifted values), or None with fewer than two values."""
    values = np.asarray(replicates, dtype=float)
    values = values[np.isfinite(values)]
    if len(values) < 2:
        return None
    if estimate is not None and np.isfinite(estimate):
        values = values + (estimate - values.mean())
    upper = upper_percent(level)
    lower, upper = (float(end) for end in linear_percentiles(values, [100.0 - upper, upper]))
    if (1.0 - level) / 2.0 * len(values) < MIN_TAIL_REPLICATES - 1e-9:  # 5 exactly, as 4.999999999999999, is 5
        reach = NormalDist().inv_cdf((1.0 + level) / 2.0) * float(np.std(values, ddof=1))
        centre = float(values.mean())
        lower, upper = min(lower, centre - reach), max(upper, centre + reach)
    return lower, upper, values


def intervals(replicates: dict[str, np.ndarray], level: float, estimates: dict) -> dict[str, list]:
    """{metric: [lower, upper]} of :func:`centred_interval` around each metric's value in
    ``estimates`` (None where fewer than two replicates have a value)."""
    out = {}
    for key, values in replicates.items():
        found = centred_interval(values, level, estimates.get(key))
        out[key] = None if found is None else [found[0], found[1]]
    return out


def labels_fingerprint(labels: np.ndarray) -> str:
    """sha256 of the labels as int64: two reports pair only if they saw the same rows' labels."""
    return hashlib.sha256(np.ascontiguousarray(labels, dtype=np.int64).tobytes()).hexdigest()


#: The keys of the two 64-bit lanes of :func:`rows_fingerprint` (fixed: a fingerprint depends on the rows alone).
_FINGERPRINT_KEYS = np.random.SeedSequence([0x1ABE15, 3]).generate_state(4, np.uint64)


def rows_fingerprint(keys, labels: np.ndarray) -> str:
    """The labels of a set of rows as 32 hex digits, whatever their order or split: two 64-bit lanes
    j, each sum_i splitmix64(a_j, splitmix64(b_j, id_i) ^ y_i) modulo 2^64 over the rows' global
    ids (or indices) id_i and labels y_i (:func:`splitmix64`). A sum, so the fingerprints of disjoint
    parts add up (:func:`add_fingerprints`) to the fingerprint of all their rows: merged states of
    any partitioning of the same rows pair."""
    ids = row_keys(keys)
    y = np.ascontiguousarray(labels, dtype=np.int64).view(np.uint64)
    lanes = []
    for a, b in (_FINGERPRINT_KEYS[:2], _FINGERPRINT_KEYS[2:]):
        lanes.append(int(splitmix64(a, splitmix64(b, ids) ^ y).sum(dtype=np.uint64)))
    return "".join(f"{lane:016x}" for lane in lanes)


def groups_fingerprint(keys, names: list[str], codes: np.ndarray) -> str:
    """Which group each row is in, as 32 hex digits that add up like :func:`rows_fingerprint`'s:
    that of the rows' groups, each group named by the first 8 bytes of the sha256 of its name (the
    names, not a part's own codes, so that parts with other groups in them add up)."""
    named = np.array([int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little") for name in names], dtype=np.uint64)
    return rows_fingerprint(keys, named[np.asarray(codes, dtype=np.int64)].view(np.int64))


def add_fingerprints(fingerprints: list[str]) -> str:
    """The :func:`rows_fingerprint` of the union of disjoint row sets from theirs: each lane summed modulo 2^64."""
    lanes = [sum(int(found[i : i + 16], 16) for found in fingerprints) % (1 << 64) for i in (0, 16)]
    return "".join(f"{lane:016x}" for lane in lanes)
