"""Mergeable bin counters: per bin the count, the sum of predictions and the sum of binary outcomes.

Every binned metric (top-label ECE/MCE, classwise ECE, CMCE) reduces to these three additive
counters, so chunks, files and machines can be merged by adding them.
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .numerics import bin_index


class BinCounter:
    """``n_groups`` x ``n_bins`` equal-width bins on [0, 1] (rule of :func:`calib.numerics.bin_index`)."""

    def __init__(self, n_bins: int, n_groups: int = 1):
        self.n_bins, self.n_groups = n_bins, n_groups
        size = n_bins * n_groups
        self.count = np.zeros(size)
        self.sum_pred = np.zeros(size)
        self.sum_true = np.zeros(size)

    def _flat_index(self, pred: np.ndarray, group) -> np.ndarray:
        index = bin_index(pred, self.n_bins)
        if self.n_groups > 1:
            index += np.asarray(group) * self.n_bins
        return index.reshape(-1)

    def add(self, pred: np.ndarray, hits: np.ndarray | None = None, group: np.ndarray | int = 0, by_column: bool = False) -> None:
        """Count predictions in [0, 1] of any shape with their binary outcomes ``hits``.

        ``group`` broadcasts against ``pred`` (e.g. a group code per row); ``by_column``: each column
        of an (N, K) ``pred`` is its own group (the class of each probability). ``hits=None`` counts
        predictions only, their outcomes then come through :meth:`add_hits`. Counts, sums and hits
        of one group 0 or of the columns come from one pass (:func:`calib.kernels.bin_counts`).
        """
        if by_column or (isinstance(group, int) and group == 0):
            values = np.asarray(pred, dtype=np.float64)
            values = values.reshape(len(values), -1) if by_column else values.reshape(-1, 1)
            count, sums, hit_count = kernels.bin_counts(
                values, None if hits is None else np.asarray(hits), self.n_bins, by_column
            )
        else:
            flat = self._flat_index(pred, group)
            size = self.count.size
            count = np.bincount(flat, minlength=size)
            sums = np.bincount(flat, weights=np.asarray(pred, dtype=np.float64).reshape(-1), minlength=size)
            hit_count = None if hits is None else np.bincount(flat[np.asarray(hits).reshape(-1) != 0], minlength=size)
        self.count += count
        self.sum_pred += sums
        if hits is not None:
            self.sum_true += hit_count

    def add_hits(self, pred: np.ndarray, group: np.ndarray | int = 0) -> None:
        """Add outcome 1 at the bins of ``pred`` (predictions already counted by :meth:`add`)."""
        self.sum_true += np.bincount(self._flat_index(pred, group), minlength=self.count.size)

    def merge(self, other: "BinCounter") -> "BinCounter":
        merged = BinCounter(self.n_bins, self.n_groups)
        for name in ("count", "sum_pred", "sum_true"):
            setattr(merged, name, getattr(self, name) + getattr(other, name))
        return merged

    def gaps(self) -> np.ndarray:
        """|sum_true - sum_pred| per bin, shaped (n_groups, n_bins): n_b |mean_b true - mean_b pred|."""
        return np.abs(self.sum_true - self.sum_pred).reshape(self.n_groups, self.n_bins)

    def weighted_error(self) -> np.ndarray:
        """Per group: sum_b (n_b / n) |mean_b true - mean_b pred| with n the group's count."""
        totals = self.count.reshape(self.n_groups, self.n_bins).sum(axis=1)
        return self.gaps().sum(axis=1) / np.maximum(totals, 1)

    def max_error(self) -> float:
        """max over non-empty bins of |mean_b true - mean_b pred| (group 0)."""
        nonempty = self.count > 0
        if not nonempty.any():
            return float("nan")
        return float(np.max(np.abs(self.sum_true - self.sum_pred)[nonempty] / self.count[nonempty]))

    def state(self) -> dict:
        return {"count": self.count, "sum_pred": self.sum_pred, "sum_true": self.sum_true}
