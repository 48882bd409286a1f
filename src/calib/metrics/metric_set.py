"""The accumulators behind a list of metric keys, shared where metrics read the same one (a
mergeable state: ``update`` by batches, ``state`` / ``absorb`` to merge, ``results`` to compute)."""

from __future__ import annotations

import numpy as np

from .batch import Batch
from .definitions import METRICS, MetricConfig, compute_value


class MetricSet:
    """The accumulators behind a list of metrics, shared where metrics read the same one."""

    def __init__(self, keys: list[str], config: MetricConfig, n_classes: int):
        self.config = config
        self.metrics = [METRICS[key] for key in keys]
        self.accumulators: dict[tuple, object] = {}
        self.source: dict[str, tuple] = {}
        for metric in self.metrics:
            identity, factory = metric.accumulator(config, n_classes)
            if identity not in self.accumulators:
                self.accumulators[identity] = factory()
            self.source[metric.key] = identity

    def update(self, batch: Batch) -> None:
        for accumulator in self.accumulators.values():
            accumulator.update(batch)

    def state(self) -> dict[str, np.ndarray]:
        """Every accumulator's additive state, keyed "<index>/<name>" in accumulator order."""
        return {
            f"{i}/{name}": array
            for i, accumulator in enumerate(self.accumulators.values())
            for name, array in accumulator.state().items()
        }

    def absorb(self, state: dict[str, np.ndarray]) -> None:
        for i, accumulator in enumerate(self.accumulators.values()):
            prefix = f"{i}/"
            accumulator.absorb({key[len(prefix) :]: value for key, value in state.items() if key.startswith(prefix)})

    def concatenated_state_keys(self) -> set[str]:
        """State keys that merge by concatenation (per-row values) rather than by addition."""
        return {
            f"{i}/{name}"
            for i, accumulator in enumerate(self.accumulators.values())
            for name in accumulator.STATE
            if isinstance(getattr(accumulator, name), list)
        }

    def results(self) -> dict[str, dict]:
        out = {}
        for metric in self.metrics:
            state = self.accumulators[self.source[metric.key]]
            out[metric.key] = {
                "value": compute_value(metric, state, self.config),
                "settings": metric.settings(self.config, state),
            }
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
        self.sets = [make_metric_set() for _ in range(groups)]

    def update(self, batch: Batch, rows) -> None:
        group = self.assignment[rows]
        if len(group) == 0:
            return
        ordered = bool((group[1:] >= group[:-1]).all())
        order = None if ordered else np.argsort(group, kind="stable")
        sorted_group = group if ordered else group[order]
        starts = np.flatnonzero(np.diff(sorted_group, prepend=-1))
        for start, stop in zip(starts, np.append(starts[1:], len(sorted_group))):
            part = slice(int(start), int(stop)) if ordered else order[start:stop]
            self.sets[sorted_group[start]].update(batch if ordered and stop - start == len(group) else batch.take(part))

    def states(self) -> list[dict[str, np.ndarray]]:
        return [metric_set.state() for metric_set in self.sets]
