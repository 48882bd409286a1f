"""Class-group temperature contamination (ATS-CP paper, section 5.1; docs/benchmarks.md).

The K classes are split by index into three near-equal groups. Each sample draws T from
{2, 3, 5} if its label is in the first group (under-confident), T = 1 in the second, and
{0.25, 0.5, 0.75} in the third (over-confident); then p~ = softmax(log p / T). The argmax, hence
the accuracy, is unchanged; calibration is destroyed.
"""

from __future__ import annotations

import numpy as np

from ..core.numerics import log_softmax

UNDER_TEMPERATURES = (2.0, 3.0, 5.0)
OVER_TEMPERATURES = (0.25, 0.5, 0.75)


def class_groups(n_classes: int) -> np.ndarray:
    """Group of each class: 0 (under), 1 (normal), 2 (over), by index, sizes differing by <= 1."""
    groups = np.empty(n_classes, dtype=np.int64)
    for group, members in enumerate(np.array_split(np.arange(n_classes), 3)):
        groups[members] = group
    return groups


def contamination_temperatures(labels: np.ndarray, n_classes: int, rng: np.random.Generator) -> np.ndarray:
    """One temperature per sample from the group of its label."""
    group = class_groups(n_classes)[labels]
    pick = rng.integers(0, 3, size=len(labels))
    return np.where(group == 0, np.take(UNDER_TEMPERATURES, pick), np.where(group == 2, np.take(OVER_TEMPERATURES, pick), 1.0))


def contaminate(logits: np.ndarray, temperatures: np.ndarray) -> np.ndarray:
    """log p~ = log_softmax(log_softmax(z) / T), row by row."""
    return log_softmax(log_softmax(logits) / temperatures[:, None])
