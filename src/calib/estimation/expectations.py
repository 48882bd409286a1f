"""The three scores a batch without labels gets an estimate of, one row at a time.

For a row with calibrated probabilities p (K,) and predicted class c, its label Y drawn from q (the
calibrated model's own belief, q = p; or p adapted to other priors) gives each score s(p, Y) of the
probabilities p an expectation E_q[s] and a variance V_q[s]:

- accuracy, s = 1{Y = c}:        E = q_c,                             V = q_c (1 - q_c);
- log loss, s = -log p_Y:        E = -sum_k q_k log p_k,              V = sum_k q_k (log p_k)^2 - E^2;
- Brier, s = sum_k (p_k - 1{Y = k})^2 = 1 - 2 p_Y + sum_k p_k^2:
                                 E = 1 - 2 sum_k q_k p_k + sum_k p_k^2, V = 4 (sum_k q_k p_k^2 - (sum_k q_k p_k)^2).

With q = p these are p_c (CBPE's estimate of accuracy), the entropy H(p) and 1 - sum_k p_k^2. The
estimate of a batch is mean_i E_i; given q is right, the realised score differs from it by a mean
of independent terms of variance sum_i V_i / n^2. log p is log max(p, 1e-12), as the registry's
``nll`` takes it.
"""

from __future__ import annotations

import numpy as np

from ..core.numerics import log_of_probs

#: The scores estimated, in the order of every output: the registry's keys of their realised values.
SCORES = ("accuracy", "nll", "brier")


def predicted_class(probs: np.ndarray) -> np.ndarray:
    """argmax_k p_k of each row, ties to the lower class index (as the registry's ``accuracy``)."""
    return np.argmax(probs, axis=1)


def expected(
    probs: np.ndarray, predicted: np.ndarray, truth: np.ndarray | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{score: (E_i, V_i)} of each row's score of ``probs`` when its label follows ``truth`` (the
    row's q; None: ``probs`` itself) (module docstring)."""
    truth = probs if truth is None else truth
    rows = np.arange(len(probs))
    own = truth[rows, predicted]
    log_p = log_of_probs(probs)
    cross = -np.einsum("ik,ik->i", truth, log_p)
    second = np.einsum("ik,ik->i", truth, log_p * log_p)
    squares = np.einsum("ik,ik->i", probs, probs)
    agreement = np.einsum("ik,ik->i", truth, probs)
    third = np.einsum("ik,ik,ik->i", truth, probs, probs)
    return {
        "accuracy": (own, own * (1.0 - own)),
        "nll": (cross, np.maximum(second - cross * cross, 0.0)),
        "brier": (1.0 - 2.0 * agreement + squares, np.maximum(4.0 * (third - agreement * agreement), 0.0)),
    }


def realised(probs: np.ndarray, predicted: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    """{score: s(p_i, y_i)} of each labelled row."""
    rows = np.arange(len(probs))
    own = probs[rows, labels]
    squares = np.einsum("ik,ik->i", probs, probs)
    return {
        "accuracy": (predicted == labels).astype(np.float64),
        "nll": -log_of_probs(own),
        "brier": 1.0 - 2.0 * own + squares,
    }


def ratio_expectations(probs: np.ndarray, predicted: np.ndarray, ratios: np.ndarray) -> dict[str, np.ndarray]:
    """{score: (n, R) each row's E_q[s] under each of R prior ratios ``ratios`` (R, K) = pi'_r / pi}
    (:func:`expected` with q ∝ p pi'_r / pi, all R at once): q_ik = p_ik w_rk / s_ir with
    s_ir = sum_k p_ik w_rk, so that q_ic = p_ic w_rc / s, -sum_k q_k log p_k = -sum_k p_k w_k log
    p_k / s and sum_k q_k p_k = sum_k p_k^2 w_k / s, each a matrix product over the ratios."""
    rows = np.arange(len(probs))
    normaliser = probs @ ratios.T  # (n, R)
    own = probs[rows, predicted][:, None] * ratios[:, predicted].T / normaliser
    cross = -((probs * log_of_probs(probs)) @ ratios.T) / normaliser
    agreement = ((probs * probs) @ ratios.T) / normaliser
    brier = 1.0 - 2.0 * agreement + np.einsum("ik,ik->i", probs, probs)[:, None]
    return {"accuracy": own, "nll": cross, "brier": brier}


def mean_expectations(
    probs: np.ndarray, predicted: np.ndarray, ratios: np.ndarray, weights: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """{score: (R,) the rows' mean of :func:`ratio_expectations` under each ratio}: plain, or
    weighted by ``weights`` (R, n), a weight per ratio and row."""
    per_row = ratio_expectations(probs, predicted, ratios)
    if weights is None:
        return {score: values.mean(axis=0) for score, values in per_row.items()}
    total = weights.sum(axis=1)
    return {score: np.einsum("rn,nr->r", weights, values) / total for score, values in per_row.items()}
