"""Conformal thresholds q(x): constant, adaptive by a normalising-flow score transform
(Colombo 2024; docs/calibrators.md), and conformalised quantile regression (ATS-CP AQ, the ATS-CP paper).

Every adaptive kind is fitted on a seeded random half of the calibration rows and conformalised on
the other half, so marginal coverage P(Y in C(X)) >= 1 - alpha holds.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core import extras
from . import mlp
from .conformal import QUANTILE_SLACK, conformal_quantile, min_calibration_size

FLOW_GAMMA = 1e-3
#: V is clamped below before a log (docs/calibrators.md).
SCORE_FLOOR = 1e-12
FLOW_HIDDEN = (100,) * 6  # Linear(d,100)+ReLU, 5 x [Linear(100,100)+ReLU], Linear(100,1)


@dataclasses.dataclass(frozen=True)
class FlowTraining:
    """Adam on the flow's MLP: ``steps``, each on a minibatch of n // ``batch_divisor`` of the n
    fitting rows (1: as many as there are), at most ``max_batch`` rows, with the learning rate of
    each flow."""

    steps: int
    batch_divisor: int
    lr: dict
    max_batch: int | None = None


#: The flow's training by name: ``full-batch``, the default (300 Adam steps on all the fitting rows,
#: at most 8,192 a step: half the CPU time of the paper's on CIFAR-100, sets as small and as
#: conditionally covered; docs/calibrators.md, "Training the flow"; the cap, reached above 16,384
#: calibration rows, keeps a step's cost from growing with N), and ``paper``, the CMCE paper's
#: (3,000 steps on minibatches of a fifth of the rows).
FLOW_TRAININGS = {
    "full-batch": FlowTraining(steps=300, batch_divisor=1, lr={"er": 3e-3, "gauss": 2e-3}, max_batch=8192),
    "paper": FlowTraining(steps=3000, batch_divisor=5, lr={"er": 1e-2, "gauss": 1e-4}),
}
DEFAULT_FLOW_TRAINING = "full-batch"
QR_HIDDEN = (64, 16)
#: Adam on minibatches of a fifth of the rows; the weight decay (a ridge) keeps the quantile
#: regression from chasing the training rows (docs/calibrators.md, "Training the quantile regressions").
QR_TRAINING = {"steps": 2000, "lr": 1e-3, "weight_decay": 1e-2}
KINDS = ("constant", "adaptive", "qr", "classwise", "clustered")
#: Quantile levels that embed a class for clustering (Ding et al. 2023), besides 1 - alpha.
EMBEDDING_LEVELS = (0.5, 0.6, 0.7, 0.8, 0.9)
FLOWS = ("er", "gauss")


def split_halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random split of range(n) into a fitting half and a conformalising half."""
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[: n // 2]), np.sort(order[n // 2 :])


def fitting_and_conformal(scores: np.ndarray, features: np.ndarray, seed: int, train: tuple | None) -> tuple[tuple, tuple]:
    """((scores, features) the threshold's model is fitted on, (scores, features) it is
    conformalised on): a seeded random half of the calibration rows each, or, given ``train``
    = (scores, features) of separate training rows (the ATS-CP paper's protocol), those and every
    calibration row."""
    if train is not None:
        return train, (scores, features)
    fit_rows, conformal_rows = split_halves(len(scores), seed)
    return (scores[fit_rows], features[fit_rows]), (scores[conformal_rows], features[conformal_rows])


def fit_threshold(
    kind: str,
    scores: np.ndarray,
    features: np.ndarray,
    alpha: float,
    *,
    flow: str = "gauss",
    seed: int = 0,
    allow_full_set: bool = False,
    train: tuple | None = None,
    flow_training: str = DEFAULT_FLOW_TRAINING,
) -> dict:
    """Fit a threshold on calibration scores V(x_i, y_i) and features x_i; returns its state arrays.
    The adaptive kinds fit a model on one part and conformalise on the other
    (:func:`fitting_and_conformal`; ``train``: separate training rows' (scores, features)).

    constant: q = the conformal quantile of all scores.
    adaptive: w(x) = |MLP(x)| on the fitting part; b = F(V, x) = V / (gamma + w) (er) or
      log(V / (gamma + w)) (gauss); q = conformal quantile of b on the conformalising part.
    qr: qr(x) estimates the (1 - alpha) quantile of V (pinball loss, :data:`QR_TRAINING`) on the
      fitting part; q = conformal quantile of E = V - qr(x) on the conformalising part.
    """
    if kind == "constant":
        return {"q": np.array(conformal_quantile(scores, alpha, allow_full_set=allow_full_set))}
    if kind == "adaptive":
        arrays, transformed = fit_flow(scores, features, flow, seed, train=train, training=flow_training)
    else:
        torch = extras.torch()

        (fit_scores, fit_features), (conformal_scores, conformal_features) = fitting_and_conformal(scores, features, seed, train)
        level = 1.0 - alpha

        def pinball(out, v):
            residual = v - out[:, 0]
            return torch.mean(torch.maximum(level * residual, (level - 1.0) * residual))

        arrays = mlp.train(
            fit_features,
            fit_scores,
            (*QR_HIDDEN, 1),
            pinball,
            prefix="qr",
            batch_size=max(1, len(fit_scores) // 5),
            seed=seed,
            **QR_TRAINING,
        )
        transformed = conformal_scores - mlp.forward(arrays, "qr", conformal_features)[:, 0]
    arrays["q"] = np.array(conformal_quantile(transformed, alpha, allow_full_set=allow_full_set))
    return arrays


def fit_flow(
    scores: np.ndarray,
    features: np.ndarray,
    flow: str,
    seed: int,
    train: tuple | None = None,
    training: str = DEFAULT_FLOW_TRAINING,
) -> tuple[dict, np.ndarray]:
    """Train the flow's w(x) on the fitting part (:func:`fitting_and_conformal`) as ``training``
    (:data:`FLOW_TRAININGS`) says; returns its arrays and the transformed scores b = F(V, x) of the
    conformalising part."""
    recipe = FLOW_TRAININGS[training]
    torch = extras.torch()

    (fit_scores, fit_features), (conformal_scores, conformal_features) = fitting_and_conformal(scores, features, seed, train)
    target_v = np.maximum(fit_scores, SCORE_FLOOR)
    if flow == "er":
        loss = lambda out, v: torch.mean((v - out.abs()[:, 0]) ** 2)  # noqa: E731
    else:
        loss = lambda out, v: torch.mean(torch.log(v / (FLOW_GAMMA + out.abs()[:, 0])) ** 2)  # noqa: E731
    arrays = mlp.train(
        fit_features,
        target_v,
        (*FLOW_HIDDEN, 1),
        loss,
        prefix="flow",
        steps=recipe.steps,
        lr=recipe.lr[flow],
        batch_size=max(1, min(len(fit_scores) // recipe.batch_divisor, recipe.max_batch or len(fit_scores))),
        seed=seed,
    )
    return arrays, flow_transform(conformal_scores, flow_scale(arrays, conformal_features), flow)


def monotone_heads(raw):
    """Quantiles non-decreasing across heads by construction: q_0 = o_0, q_j = q_{j-1} + softplus(o_j).
    Works on numpy arrays and torch tensors alike."""
    if isinstance(raw, np.ndarray):
        gaps = np.logaddexp(0.0, raw[:, 1:])
        return np.concatenate([raw[:, :1], raw[:, :1] + np.cumsum(gaps, axis=1)], axis=1)
    torch = extras.torch()

    gaps = torch.nn.functional.softplus(raw[:, 1:])
    return torch.cat([raw[:, :1], raw[:, :1] + torch.cumsum(gaps, dim=1)], dim=1)


def fit_multi_quantile(
    scores: np.ndarray, features: np.ndarray, alphas: np.ndarray, seed: int, train: tuple | None = None
) -> dict:
    """ats-maq --model multiqr: one QR MLP (64, 16) with a head per alpha (``alphas`` decreasing, so
    the levels 1 - alpha increase along the heads) and monotone by construction (:func:`monotone_heads`),
    trained with the summed pinball losses (:data:`QR_TRAINING`) on the fitting part; each head is
    conformalised on the conformalising part (shift = conformal quantile of V - q_j(x) at alpha_j;
    :func:`fitting_and_conformal`). Arrays: the MLP and ``shifts``."""
    torch = extras.torch()

    (fit_scores, fit_features), (conformal_scores, conformal_features) = fitting_and_conformal(scores, features, seed, train)
    levels = torch.as_tensor(1.0 - alphas, dtype=torch.float32, device=extras.current_device())[None, :]

    def pinball(out, v):
        residual = v[:, None] - monotone_heads(out)
        return torch.mean(torch.sum(torch.maximum(levels * residual, (levels - 1.0) * residual), dim=1))

    arrays = mlp.train(
        fit_features,
        fit_scores,
        (*QR_HIDDEN, len(alphas)),
        pinball,
        prefix="mqr",
        batch_size=max(1, len(fit_scores) // 5),
        seed=seed,
        **QR_TRAINING,
    )
    residual = conformal_scores[:, None] - monotone_heads(mlp.forward(arrays, "mqr", conformal_features))
    arrays["shifts"] = np.array([conformal_quantile(residual[:, j], alpha) for j, alpha in enumerate(alphas)])
    return arrays


def multi_quantile_values(arrays: dict, features: np.ndarray) -> np.ndarray:
    """(N, heads) conformalised thresholds, re-sorted along the heads after the shifts."""
    return np.sort(monotone_heads(mlp.forward(arrays, "mqr", features)) + arrays["shifts"], axis=1)


def flow_scale(arrays: dict, features: np.ndarray) -> np.ndarray:
    """gamma + w(x), w = |MLP(x)|."""
    return FLOW_GAMMA + np.abs(mlp.forward(arrays, "flow", features)[:, 0])


def flow_transform(scores: np.ndarray, scale: np.ndarray, flow: str) -> np.ndarray:
    ratio = np.maximum(scores, SCORE_FLOOR) / scale
    return ratio if flow == "er" else np.log(ratio)


def class_thresholds(scores: np.ndarray, labels: np.ndarray, n_classes: int, alpha: float, *, min_class_rows: int = 0) -> dict:
    """Class-conditional (Mondrian) thresholds: q_y = the ceil((n_y + 1)(1 - alpha))-th smallest
    calibration score among the rows labelled y, so that P(Y in C(X) | Y = y) >= 1 - alpha for every
    class. A class with too few rows for alpha gets q_y = +inf (always in the set: its coverage is
    kept, at the price of its set size); with ``min_class_rows`` M, classes with n_y < M take the
    marginal quantile of all the scores instead (their per-class guarantee is lost). One sort of
    the scores grouped by class. Returns {"q": (K,), "too_few": classes at +inf, "pooled": classes
    on the marginal quantile}."""
    counts = np.bincount(labels, minlength=n_classes)
    order = np.lexsort((scores, labels))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    needed = np.ceil((counts + 1) * (1.0 - alpha) - QUANTILE_SLACK).astype(np.int64)
    enough = (needed <= counts) & (counts > 0)
    q = np.full(n_classes, np.inf)
    q[enough] = scores[order[starts[enough] + needed[enough] - 1]]
    pooled = counts < min_class_rows
    if pooled.any():
        q[pooled] = conformal_quantile(scores, alpha, allow_full_set=True)
    return {"q": q, "too_few": np.array(int((~enough & ~pooled).sum())), "pooled": np.array(int(pooled.sum()))}


def class_quantiles(scores: np.ndarray, labels: np.ndarray, n_classes: int, levels: np.ndarray) -> np.ndarray:
    """(K, L) quantiles of each class's scores at ``levels`` (numpy's default linear rule), from
    one sort of the scores grouped by class; NaN for a class without rows."""
    counts = np.bincount(labels, minlength=n_classes)
    ordered = scores[np.lexsort((scores, labels))]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    position = levels[None, :] * (counts[:, None] - 1)  # h = level (n - 1), between two order statistics
    below = np.floor(position).astype(np.int64)
    above = np.minimum(below + 1, np.maximum(counts[:, None] - 1, 0))
    seen = counts > 0
    out = np.full((n_classes, len(levels)), np.nan)
    lo = ordered[starts[seen, None] + below[seen]]
    hi = ordered[starts[seen, None] + above[seen]]
    out[seen] = lo + (position[seen] - below[seen]) * (hi - lo)
    return out


def clustered_thresholds(scores: np.ndarray, labels: np.ndarray, n_classes: int, alpha: float, *, seed: int = 0) -> dict:
    """Clustered class-conditional thresholds (Ding et al. 2023). Per class, a seeded n_c of its
    calibration rows embed it (the quantiles of its scores at 0.5, 0.6, 0.7, 0.8, 0.9 and 1 - alpha);
    the classes with enough of them (the smallest n for which the conformal quantile exists at
    alpha) are grouped by k-means into M clusters; the others form a null cluster on the marginal
    quantile. Each cluster's q is the conformal quantile of its classes' scores on the remaining
    rows (+inf when too few), and q_y is its cluster's. The paper's defaults: with n the smallest
    class count, n_c = floor(n K / (75 + K)) rows per class and M = floor(n_c / 2) clusters.
    Returns {"q": (K,), "cluster": (K,) cluster per class (-1: null), "clusters", "rows_per_class"}."""
    from scipy.cluster.vq import kmeans2

    rng = np.random.default_rng([seed, 4])
    counts = np.bincount(labels, minlength=n_classes)
    present = counts[counts > 0]
    per_class = int(present.min() * n_classes / (75 + n_classes)) if len(present) else 0
    n_clusters = max(1, per_class // 2)
    # a seeded permutation, then each class's first per_class rows (in that order) embed it
    order = rng.permutation(len(labels))
    by_class = order[np.argsort(labels[order], kind="stable")]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    position = np.empty(len(labels), dtype=np.int64)
    position[by_class] = np.arange(len(labels)) - np.repeat(starts, counts)
    embedding_rows = position < per_class
    minimum = min_calibration_size(alpha)
    levels = np.array([*EMBEDDING_LEVELS, 1.0 - alpha])
    cluster = np.full(n_classes, -1, dtype=np.int64)
    clusterable = np.flatnonzero(np.bincount(labels[embedding_rows], minlength=n_classes) >= minimum)
    if len(clusterable) >= n_clusters and n_clusters > 1:
        embedding = class_quantiles(scores[embedding_rows], labels[embedding_rows], n_classes, levels)[clusterable]
        _, assigned = kmeans2(embedding, n_clusters, minit="++", seed=rng)
        cluster[clusterable] = assigned
    elif len(clusterable):
        cluster[clusterable] = 0
    rest_scores, rest_labels = scores[~embedding_rows], labels[~embedding_rows]
    q = np.full(n_classes, np.inf)
    null = cluster < 0
    if null.any():
        q[null] = conformal_quantile(rest_scores, alpha, allow_full_set=True)
    for c in np.unique(cluster[~null]):
        members = cluster == c
        q[members] = conformal_quantile(rest_scores[members[rest_labels]], alpha, allow_full_set=True)
    return {
        "q": q,
        "cluster": cluster,
        "clusters": np.array(int(len(np.unique(cluster[~null])))),
        "rows_per_class": np.array(per_class),
    }


def threshold_values(kind: str, arrays: dict, features: np.ndarray | None, n_rows: int, *, flow: str = "gauss") -> np.ndarray:
    """q(x) per row: q; F^{-1}(q, x) = q (gamma + w(x)) (er) or exp(q) (gamma + w(x)) (gauss); qr(x) + q."""
    q = float(arrays["q"])
    if kind == "constant":
        return np.full(n_rows, q)
    if kind == "adaptive":
        scale = flow_scale(arrays, features)
        return q * scale if flow == "er" else np.exp(q) * scale
    return mlp.forward(arrays, "qr", features)[:, 0] + q
