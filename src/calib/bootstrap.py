"""Bootstrap confidence intervals for the streamed metrics, on their mergeable states (docs/cli.md
``evaluate --bootstrap N``).

Rows are dealt into G = 200 groups by a seeded draw (row i -> group g_i). Every metric's state is
additive over rows (sums, bin counts, or per-row values that merge by concatenation), so one pass
over the input fills one state per group. A replicate draws G groups with replacement (multinomial
counts c_g) and its state is sum_g c_g state_g: a grouped bootstrap, the row bootstrap with rows
resampled in random clusters of n/G. For sums it has the row bootstrap's variance (the groups are a
random partition, so the group totals are exchangeable), and it streams: memory is G states, not N
rows per replicate. The interval is the percentile interval of the replicate values.

Replicates are determined by (seed, G, number of rows) only, so two evaluations of different models
on the same rows with the same seed resample the same rows: their replicate differences form a
paired bootstrap, which change gates against a baseline use
(:func:`calib.evaluation.report_types.paired_differences`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .metrics.metric_set import GroupedMetricSets

GROUPS = 200


#: Replicates a report records by default for its gates (and a stored baseline's): enough for the
#: 0.05 and 0.95 quantiles that gates read (docs/ci-gates.md has the measured false-alarm rates).
DEFAULT_REPLICATES = 200
#: Inputs up to this many scores (rows x classes) get replicates by default: there they add a few
#: tenths of a second (CIFAR-100 test, 10,000 x 100: 0.64 -> 0.87 s); above, the per-group
#: classwise bin counts cost seconds (50,000 x 1,000: 2.7 -> 9.5 s) and are asked for by name.
CHEAP_SCORES = 10_000_000


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
    ``seed`` when the input has at most :data:`CHEAP_SCORES` scores; None otherwise."""
    if baseline is not None:
        return BootstrapConfig(baseline.replicates, baseline.seed, level)
    if n_rows * n_classes <= CHEAP_SCORES:
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


def cluster_assignment(seed: int, n_rows: int, groups: int = GROUPS, pairs_per_row: int = 1) -> tuple[np.ndarray, int]:
    """(each row's random cluster in [0, G), G): a seeded draw, G = min(``groups``, rows). A
    multi-label input's rows are its (row, label) pairs, ``pairs_per_row`` of them: the pairs of a
    row are drawn together (one cluster per row), so a replicate resamples rows, not pairs."""
    rows = n_rows // pairs_per_row
    clusters = max(1, min(groups, rows))
    return np.repeat(np.random.default_rng([seed, 1]).integers(clusters, size=rows), pairs_per_row), clusters


def cluster_counts(config: BootstrapConfig, clusters: int) -> np.ndarray:
    """(replicates, G) multinomial counts of the G clusters: how often each replicate draws each."""
    return np.random.default_rng([config.seed, 2]).multinomial(
        clusters, np.full(clusters, 1.0 / clusters), size=config.replicates
    )


@dataclass(frozen=True)
class ReplicateWeights:
    """How often each of R replicates draws each of N rows: row i's weight in replicate r is
    ``counts[r, assignment[i]]``, its cluster's count (:func:`cluster_assignment`,
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
        clusters = self.counts.shape[1]
        if values is None:
            return self.counts @ np.bincount(self.assignment, minlength=clusters).astype(np.float64)
        values = np.asarray(values, dtype=np.float64)
        if values.ndim == 1:
            return self.counts @ np.bincount(self.assignment, weights=values, minlength=clusters)
        by_cluster = np.zeros((clusters, values.shape[1]))
        np.add.at(by_cluster, self.assignment, values)
        return self.counts @ by_cluster

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
    drawn by row, ``pairs_per_row`` of them)."""
    assignment, clusters = cluster_assignment(config.seed, n_rows, groups, pairs_per_row)
    return ReplicateWeights(cluster_counts(config, clusters).astype(np.float64), assignment)


#: Groups of rows (``--group-by``) up to this many get replicates of their own (for noise-aware
#: gates on groups); each costs as many metric computations as the replicates.
MAX_GROUPS_WITH_REPLICATES = 50


class BootstrapStates(GroupedMetricSets):
    """One MetricSet per random row cluster (row i -> a seeded draw in [0, G)), fed from the same
    batches as the main one; :meth:`replicate_values` resamples the clusters. With ``strata`` (each
    row's group of a ``--group-by``, S of them) there is one MetricSet per (group, cluster) pair:
    a group's replicate resamples its own rows of the same clusters with the same counts
    (:meth:`stratum_replicate_values`), and the whole sample's replicate is their sum."""

    def __init__(
        self,
        make_metric_set,
        n_rows: int,
        seed: int,
        groups: int = GROUPS,
        strata=None,
        n_strata: int = 1,
        pairs_per_row: int = 1,
    ):
        assignment, clusters = cluster_assignment(seed, n_rows, groups, pairs_per_row)
        if strata is not None:
            assignment = np.asarray(strata, dtype=np.int64) * clusters + assignment
        super().__init__(make_metric_set, assignment, clusters * n_strata)
        self.clusters, self.n_strata = clusters, n_strata

    def _counts(self, config: BootstrapConfig) -> np.ndarray:
        """(replicates, G) multinomial cluster counts: the same for every stratum and for the whole."""
        return cluster_counts(config, self.clusters)

    def _values(self, states: list[dict], counts: np.ndarray) -> dict[str, np.ndarray]:
        """{metric: (replicates,) values} of the resampled ``states`` (one per cluster)."""
        concatenated = self.sets[0].concatenated_state_keys()
        stacked = {key: np.stack([s[key] for s in states]) for key in states[0] if key not in concatenated}
        out: dict[str, list] = {}
        for weights in counts:
            state = {key: np.tensordot(weights, array, axes=1) for key, array in stacked.items()}
            for key in concatenated:
                state[key] = np.concatenate([np.tile(s[key], c) for s, c in zip(states, weights) if c])
            replicate = self.make_metric_set()
            replicate.absorb(state)
            for key, entry in replicate.results().items():
                out.setdefault(key, []).append(np.nan if entry["value"] is None else entry["value"])
        return {key: np.array(values) for key, values in out.items()}

    def replicate_values(self, config: BootstrapConfig) -> dict[str, np.ndarray]:
        """{metric: (replicates,) values} of the whole sample (NaN where a replicate has no value)."""
        states = self.states()
        if self.n_strata > 1:  # a cluster's state is the sum of its strata's
            merged = []
            for cluster in range(self.clusters):
                total = self.make_metric_set()
                for stratum in range(self.n_strata):
                    total.absorb(states[stratum * self.clusters + cluster])
                merged.append(total.state())
            states = merged
        return self._values(states, self._counts(config))

    def stratum_replicate_values(self, config: BootstrapConfig) -> list[dict[str, np.ndarray]]:
        """Per stratum, {metric: (replicates,) values} of its rows, resampled with the same counts."""
        states, counts = self.states(), self._counts(config)
        return [
            self._values(states[stratum * self.clusters : (stratum + 1) * self.clusters], counts)
            for stratum in range(self.n_strata)
        ]


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
    lower, upper = (float(end) for end in np.percentile(values, [100.0 - upper, upper]))
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
