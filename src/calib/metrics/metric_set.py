"""The accumulators behind a list of metric keys, shared where metrics read the same one (a
mergeable state: ``update`` by batches, ``state`` / ``absorb`` to merge, ``results`` to compute)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .accumulators import Additive
from .batch import Batch
from .definitions import METRICS, MetricConfig, compute_value


class MetricSet:
    """The accumulators behind a list of metrics, shared where metrics read the same one; with
    ``clusters``, each keeps its sums per cluster of rows (the bootstrap's,
    :meth:`calib.metrics.accumulators.Additive.split_by_cluster`)."""

    def __init__(self, keys: list[str], config: MetricConfig, n_classes: int, clusters: int | None = None):
        self.config, self.clusters = config, clusters
        self.metrics = [METRICS[key] for key in keys]
        self.factories: dict[tuple, Callable[[], Additive]] = {}
        self.source: dict[str, tuple] = {}
        for metric in self.metrics:
            identity, factory = metric.accumulator(config, n_classes)
            self.factories.setdefault(identity, factory)
            self.source[metric.key] = identity
        self.accumulators: dict[tuple, Additive] = self.fresh(self.factories)

    def fresh(self, identities) -> dict[tuple, Additive]:
        """New empty accumulators of ``identities`` (kept per cluster as this set's are)."""
        out = {}
        for identity in identities:
            out[identity] = self.factories[identity]()
            if self.clusters is not None:
                out[identity].split_by_cluster(self.clusters)
        return out

    @property
    def views(self) -> tuple[str, ...]:
        """The batch views the accumulators read (:meth:`calib.metrics.Batch.compute`)."""
        return tuple(dict.fromkeys(view for accumulator in self.accumulators.values() for view in accumulator.VIEWS))

    def accumulator_of(self, key: str):
        """The accumulator that metric ``key`` reads."""
        return self.accumulators[self.source[key]]

    def update(self, batch: Batch, skip=()) -> None:
        """Add ``batch`` to every accumulator but those of the identities in ``skip``."""
        for identity, accumulator in self.accumulators.items():
            if identity not in skip:
                accumulator.update(batch)

    def absorb_parts(self, parts: dict[tuple, dict[str, np.ndarray]]) -> None:
        """Add the states of some accumulators, by identity (what :meth:`fresh` ones filled)."""
        for identity, state in parts.items():
            self.accumulators[identity].absorb(state)

    def state(self) -> dict[str, np.ndarray]:
        """Every accumulator's additive state, keyed "<index>/<name>" in accumulator order."""
        return {
            f"{i}/{name}": array
            for i, accumulator in enumerate(self.accumulators.values())
            for name, array in accumulator.state().items()
        }

    def absorb(self, state: dict[str, np.ndarray]) -> None:
        """Add a :meth:`state` into this set's, accumulator by accumulator."""
        for identity, part in self.split_state(state).items():
            self.accumulators[identity].absorb(part)

    def split_state(self, state: dict[str, np.ndarray]) -> dict[tuple, dict[str, np.ndarray]]:
        """A :meth:`state` as {accumulator identity: its own state}."""
        parts: dict[tuple, dict[str, np.ndarray]] = {identity: {} for identity in self.accumulators}
        identities = list(self.accumulators)
        for key, value in state.items():
            index, name = key.split("/", 1)
            parts[identities[int(index)]][name] = value
        return parts

    def load(self, parts: dict[tuple, dict[str, np.ndarray]]) -> None:
        """Take the states of some accumulators (:meth:`split_state`) as theirs, the arrays by
        reference (:meth:`Additive.load`)."""
        for identity, part in parts.items():
            self.accumulators[identity].load(part)

    def load_replicates(self, parts: dict[tuple, dict[str, np.ndarray]], weights: np.ndarray) -> None:
        """Take R bootstrap replicates of some accumulators at once, from their states per cluster
        (:meth:`split_state`) and the (R, clusters) draws ``weights`` (:meth:`Additive.load_replicates`),
        for the metrics that compute them together (:meth:`stacked_values`)."""
        for identity, part in parts.items():
            self.accumulators[identity].load_replicates(part, weights)

    def read_by(self, stacked: bool) -> set[tuple]:
        """The accumulators that the stacked metrics (or the others) read."""
        return {self.source[metric.key] for metric in self.metrics if metric.stacks == stacked}

    def stacked_values(self) -> dict[str, np.ndarray]:
        """{metric: (R,) values} of the metrics that compute R stacked replicates at once
        (``Metric.stacks``), from :meth:`load_replicates`; NaN where a replicate has none."""
        out = {}
        for metric in self.metrics:
            if metric.stacks:
                with np.errstate(divide="ignore", invalid="ignore"):
                    value = metric.compute(self.accumulator_of(metric.key), self.config)
                out[metric.key] = None if value is None else np.asarray(value, dtype=float)
        return out

    def concatenated_state_keys(self) -> dict[str, str]:
        """State keys that merge by concatenation (per-row values) rather than by addition, each
        with the key of its rows' clusters ("<index>/row_cluster", kept per cluster only)."""
        return {
            f"{i}/{name}": f"{i}/row_cluster"
            for i, accumulator in enumerate(self.accumulators.values())
            for name in accumulator.STATE
            if isinstance(getattr(accumulator, name), list)
        }

    def results(self) -> dict[str, dict]:
        out = {}
        for metric in self.metrics:
            state = self.accumulator_of(metric.key)
            out[metric.key] = {
                "value": compute_value(metric, state, self.config),
                "settings": metric.settings(self.config, state),
            }
        return out

    def values(self, skip=()) -> dict[str, float | None]:
        """{metric: value} (None where undefined) of every metric but those in ``skip``, without the
        settings :meth:`results` adds."""
        return {
            metric.key: compute_value(metric, self.accumulator_of(metric.key), self.config)
            for metric in self.metrics
            if metric.key not in skip
        }

    def intervals(self, level: float) -> dict[str, list[float]]:
        """{metric: [lower, upper]} of the metrics with an analytic interval (Metric.interval) at
        ``level``, where the rows define it."""
        out = {}
        for metric in self.metrics:
            if metric.interval is None:
                continue
            state = self.accumulator_of(metric.key)
            try:
                lower, upper = metric.interval(state, self.config, level)
            except ZeroDivisionError:
                continue
            if np.isfinite(lower) and np.isfinite(upper):
                out[metric.key] = [float(lower), float(upper)]
        return out


class GroupedMetricSets:
    """One :class:`MetricSet` per group of rows, fed from the same batches as the main one:
    ``assignment[i]`` is row i's group in [0, ``groups``). Used for slices of the data (a
    column's values) and for the bootstrap's random row groups. A batch whose rows come sorted by
    group (the order an evaluation by groups reads them in) is split into contiguous runs; any
    other is sorted first."""

    def __init__(self, make_metric_set, assignment: np.ndarray, groups: int):
        self.assignment = assignment
        self.groups = groups
        self.make_metric_set = make_metric_set
        self._sets: list[MetricSet | None] = [None] * groups  # made on first use: a chunk's own set is adopted

    @property
    def sets(self) -> list[MetricSet]:
        """Every group's MetricSet (an empty one for a group no row has reached)."""
        for group, metric_set in enumerate(self._sets):
            if metric_set is None:
                self._sets[group] = self.make_metric_set()
        return self._sets

    def _parts(self, batch: Batch, rows):
        """(group, the batch's rows of that group) for every group in ``rows``."""
        group = self.assignment[rows]
        if len(group) == 0:
            return
        ordered = bool((group[1:] >= group[:-1]).all())
        order = None if ordered else np.argsort(group, kind="stable")
        sorted_group = group if ordered else group[order]
        starts = np.flatnonzero(np.diff(sorted_group, prepend=-1))
        for start, stop in zip(starts, np.append(starts[1:], len(sorted_group))):
            part = slice(int(start), int(stop)) if ordered else order[start:stop]
            yield int(sorted_group[start]), batch if ordered and stop - start == len(group) else batch.take(part)

    def update(self, batch: Batch, rows) -> None:
        for group, part in self._parts(batch, rows):
            if self._sets[group] is None:
                self._sets[group] = self.make_metric_set()
            self._sets[group].update(part)

    def chunk_states(self, batch: Batch, rows) -> list[tuple[int, MetricSet]]:
        """What a chunk adds to each of its groups, in fresh MetricSets (filled on a worker thread);
        :meth:`absorb_chunk` adds them in row order: the same sums as :meth:`update`."""
        filled = []
        for group, part in self._parts(batch, rows):
            chunk_set = self.make_metric_set()
            chunk_set.update(part)
            filled.append((group, chunk_set))
        return filled

    def absorb_chunk(self, filled: list[tuple[int, MetricSet]]) -> None:
        """Add a chunk's sets: a group's first is adopted as it is (0 + x = x), later ones added."""
        for group, chunk_set in filled:
            if self._sets[group] is None:
                self._sets[group] = chunk_set
            else:
                self._sets[group].absorb(chunk_set.state())

    def states(self) -> list[dict[str, np.ndarray]]:
        return [metric_set.state() for metric_set in self.sets]
