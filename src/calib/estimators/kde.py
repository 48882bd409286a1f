"""KDE-ECE (Popordanoska, Sayer & Blaschko 2022): a Dirichlet-kernel estimate of the canonical
calibration map, plugged into the L1, L2 and squared distances (V-ECE paper, appendix E, estimator
family (i)).

With f_i clipped at 1e-12, the kernel centred at f_j is the Dirichlet density with alpha_j = f_j / h + 1:

  log k_ij = log Dir(f_i; alpha_j) = (1/h) sum_c f_jc log f_ic - log B(alpha_j),
  log B(alpha) = sum_c lgamma(alpha_c) - lgamma(sum_c alpha_c),

and the leave-one-out regression r_i = sum_{j != i} k_ij onehot(y_j) / sum_{j != i} k_ij. The
estimates are mean ||r_i - f_i||_1, mean ||r_i - f_i||_2 and mean ||r_i - f_i||_2^2 (binary: class 1
only, as the true errors). The bandwidth h maximises the leave-one-out log-likelihood
sum_i log (1/(n-1)) sum_{j != i} k_ij over the authors' grid (15 log-spaced values on [1e-5, 0.1]
and 5 on [0.2, 1]). The n x n kernel is built a block of rows at a time from one matrix product
log(F) F^T per block, so memory stays at a block; time is O(n^2 K).
"""

from __future__ import annotations

import numpy as np

from ..core.numerics import PROB_FLOOR

BANDWIDTHS = np.concatenate([np.logspace(-5, -1, 15), np.linspace(0.2, 1.0, 5)])
BLOCK_ROWS = 1024


def _log_kernels(probs: np.ndarray, bandwidths: np.ndarray):
    """Yield (rows, h, log k of those rows against every column) for each block of rows and each
    bandwidth, the diagonal at -inf (leave one out). The yielded array is reused: consume it first."""
    from scipy.special import gammaln  # here, not at import: scipy.special costs 0.3 s of start-up

    n, k = probs.shape
    log_probs = np.log(probs)
    alpha_sums = probs.sum(axis=1)
    log_betas = [gammaln(probs / h + 1.0).sum(axis=1) - gammaln(alpha_sums / h + k) for h in bandwidths]
    for start in range(0, n, BLOCK_ROWS):
        rows = slice(start, min(start + BLOCK_ROWS, n))
        inner = log_probs[rows] @ probs.T  # sum_c f_jc log f_ic
        block = np.empty_like(inner)
        diagonal = (np.arange(rows.stop - start), np.arange(start, rows.stop))
        for h, log_beta in zip(bandwidths, log_betas):
            np.multiply(inner, 1.0 / h, out=block)
            block -= log_beta[None, :]
            block[diagonal] = -np.inf
            yield rows, h, block


def _shifted_exp(block: np.ndarray) -> np.ndarray:
    """exp(block - row max) in place; returns the row maxima."""
    top = block.max(axis=1, keepdims=True)
    block -= top
    np.exp(block, out=block)
    return top[:, 0]


def select_bandwidth(probs: np.ndarray) -> float:
    """The grid bandwidth of largest leave-one-out log-likelihood."""
    loglik = dict.fromkeys(BANDWIDTHS, 0.0)
    for _, h, block in _log_kernels(probs, BANDWIDTHS):
        top = _shifted_exp(block)
        loglik[h] += float((np.log(block.sum(axis=1)) + top).sum())
    return float(max(BANDWIDTHS, key=loglik.get))


def kde_calibration_errors(probs: np.ndarray, labels: np.ndarray, bandwidth: float | None = None) -> tuple[dict, float]:
    """({l1, l2, sq}, bandwidth) of KDE-ECE for ``probs`` (N, K), ``labels`` (N,)."""
    probs = np.clip(np.asarray(probs, dtype=np.float64), PROB_FLOOR, 1.0)
    h = select_bandwidth(probs) if bandwidth is None else float(bandwidth)
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(labels)), labels] = 1.0
    regression = np.empty_like(probs)
    for rows, _, weights in _log_kernels(probs, np.array([h])):
        _shifted_exp(weights)
        regression[rows] = (weights @ onehot) / weights.sum(axis=1, keepdims=True)
    gap = regression - probs
    if probs.shape[1] == 2:
        l1 = np.abs(gap[:, 1])
        return {"l1": float(l1.mean()), "l2": float(l1.mean()), "sq": float((l1**2).mean())}, h
    return {
        "l1": float(np.abs(gap).sum(axis=1).mean()),
        "l2": float(np.sqrt((gap**2).sum(axis=1)).mean()),
        "sq": float((gap**2).sum(axis=1).mean()),
    }, h
