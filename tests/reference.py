"""Literal, slow second formulations of docs/metrics.md, written independently of src/ for tests.

Python loops over rows and pairs are fine here: these run on small arrays only.
"""

from __future__ import annotations

import math

import numpy as np


def softmax(z):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


#: A value within this fraction of an edge's magnitude below it counts as on it (docs/metrics.md, "Edges").
EDGE_RTOL = 2.0**-44


def edge_bin(value, n_bins):
    """[l, u) bins with the last one closed, by comparison with the edges k/B (not by floor); a
    value within r u below u is on u, in the next bin."""
    for b in range(n_bins):
        upper = (b + 1) / n_bins
        if value < upper * (1 - EDGE_RTOL) or b == n_bins - 1:
            return b


def binned_l1(preds, outcomes, n_bins, total):
    bins = {}
    for f, o in zip(preds, outcomes):
        bins.setdefault(edge_bin(f, n_bins), []).append((f, o))
    return sum(len(v) / total * abs(np.mean([o for _, o in v]) - np.mean([f for f, _ in v])) for v in bins.values())


def ece(probs, labels, n_bins=15):
    conf = [max(row) for row in probs]
    correct = [int(np.argmax(row) == y) for row, y in zip(probs, labels)]
    return binned_l1(conf, correct, n_bins, len(labels))


def mce(probs, labels, n_bins=15):
    bins = {}
    for row, y in zip(probs, labels):
        bins.setdefault(edge_bin(max(row), n_bins), []).append((max(row), int(np.argmax(row) == y)))
    return max(abs(np.mean([o for _, o in v]) - np.mean([f for f, _ in v])) for v in bins.values())


def cw_ece(probs, labels, n_bins=15):
    k = probs.shape[1]
    return np.mean([binned_l1(probs[:, c], (labels == c).astype(int), n_bins, len(labels)) for c in range(k)])


def cumulative_pairs(probs, labels):
    pairs = []
    for row, y in zip(probs, labels):
        order = sorted(range(len(row)), key=lambda j: (-row[j], j))
        mass = 0.0
        for k, j in enumerate(order):
            mass += row[j]
            covered = y in order[: k + 1]
            pairs.append((min(max(mass, 0.0), 1.0), int(covered)))
    return pairs


def cmce(probs, labels, n_bins=25):
    pairs = cumulative_pairs(probs, labels)
    return binned_l1([m for m, _ in pairs], [c for _, c in pairs], n_bins, len(pairs))


def coverage(probs, labels, lo, hi):
    inside = [c for m, c in cumulative_pairs(probs, labels) if lo * (1 - EDGE_RTOL) <= m <= hi * (1 + EDGE_RTOL)]
    return np.mean(inside) if inside else None


def nll(probs, labels):
    return -np.mean([math.log(max(row[y], 1e-12)) for row, y in zip(probs, labels)])


def brier(probs, labels):
    return np.mean([sum((p - (j == y)) ** 2 for j, p in enumerate(row)) for row, y in zip(probs, labels)])


def brier_pos(probs, labels):
    """Binary: mean (p_1 - 1{y = 1})^2."""
    return float(np.mean([(row[1] - (y == 1)) ** 2 for row, y in zip(probs, labels)]))


def ece_pos(probs, labels, n_bins=15):
    """Binary: the binned L1 gap of p_1 against 1{y = 1}."""
    return binned_l1(probs[:, 1], (labels == 1).astype(int), n_bins, len(labels))
