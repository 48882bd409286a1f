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
paired bootstrap, which ``--max-increase`` can use (see :func:`paired_increase`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .metrics.metric_set import GroupedMetricSets

GROUPS = 200


@dataclass(frozen=True)
class BootstrapConfig:
    replicates: int = 1000
    seed: int = 0
    level: float = 0.95


class BootstrapStates(GroupedMetricSets):
    """One MetricSet per random row group (row i -> a seeded draw in [0, G)), fed from the same
    batches as the main one; :meth:`replicate_values` resamples the groups."""

    def __init__(self, make_metric_set, n_rows: int, seed: int, groups: int = GROUPS):
        groups = max(1, min(groups, n_rows))
        assignment = np.random.default_rng([seed, 1]).integers(groups, size=n_rows)
        super().__init__(make_metric_set, assignment, groups)

    def replicate_values(self, config: BootstrapConfig) -> dict[str, np.ndarray]:
        """{metric: (replicates,) values} (NaN where a replicate has no value)."""
        states = self.states()
        template = self.sets[0]
        concatenated = template.concatenated_state_keys()
        stacked = {key: np.stack([s[key] for s in states]) for key in states[0] if key not in concatenated}
        counts = np.random.default_rng([config.seed, 2]).multinomial(
            self.groups, np.full(self.groups, 1.0 / self.groups), size=config.replicates
        )
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


def intervals(replicates: dict[str, np.ndarray], level: float) -> dict[str, list]:
    """Percentile intervals [lo, hi] at ``level`` (None where every replicate lacks a value)."""
    tail = 100.0 * (1.0 - level) / 2.0
    out = {}
    for key, values in replicates.items():
        finite = values[np.isfinite(values)]
        out[key] = [float(v) for v in np.percentile(finite, [tail, 100.0 - tail])] if len(finite) else None
    return out


def labels_fingerprint(labels: np.ndarray) -> str:
    """sha256 of the labels as int64: two reports pair only if they saw the same rows' labels."""
    return hashlib.sha256(np.ascontiguousarray(labels, dtype=np.int64).tobytes()).hexdigest()


def paired_increase(current: dict, baseline: dict, metric: str, level: float) -> tuple[float, str | None]:
    """(one-sided lower bound at ``level`` of the paired replicate increase current - baseline,
    reason it cannot be paired or None). Both are the ``bootstrap`` sections of JSON reports."""
    keys = ("replicates", "seed", "groups", "rows", "labels_sha256")
    if not baseline or any(baseline.get(k) != current.get(k) for k in keys):
        return float("nan"), (
            "the baseline report has no bootstrap replicates from the same rows, seed and count "
            "(run it with the same number of replicates and seed on the same labels)"
        )
    if metric not in baseline.get("values", {}) or metric not in current.get("values", {}):
        return float("nan"), f"no bootstrap replicates of {metric} in both reports"
    diff = np.asarray(current["values"][metric], dtype=float) - np.asarray(baseline["values"][metric], dtype=float)
    diff = diff[np.isfinite(diff)]
    return float(np.percentile(diff, 100.0 * (1.0 - level))), None
