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
