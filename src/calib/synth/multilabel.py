"""Multi-label predictions with known per-label truth (docs/multilabel.md).

Rows have features x ~ N(0, I_d) and a shared factor s = x . w / |w|; label l's true logit is
t_il = c_l + sqrt(rho) a s_i + sqrt(1 - rho) a (x_i . v_l) / |v_l|, so the labels are correlated
through s (rho the share of each logit's spread they have in common, a its scale), and its true
probability p_il = sigmoid(t_il); y_il ~ Bernoulli(p_il) independently given x. The model's
logits are z_il = t_il / T_l + b_l with a temperature and a bias per label (T_l < 1
over-confident), so each label's calibration map sigmoid(T_l (z - b_l)) is known, and the true
calibration error of label l is mean_i |sigmoid(z_il) - p_il|.
"""

from __future__ import annotations

import numpy as np

#: Feature dimension of the rows.
FEATURES = 8


def multilabel_data(n: int, n_labels: int, rng: np.random.Generator, *, correlation: float = 0.5, scale: float = 2.0):
    """(logits (n, L), labels (n, L) 0/1, true probabilities (n, L), the per-label temperatures
    T_l and biases b_l): T_l log-uniform on [0.4, 1.6], b_l uniform on [-0.5, 0.5], the offsets
    c_l uniform on [-2, 1] (rare and common labels)."""
    if not 0.0 <= correlation <= 1.0:
        raise ValueError(f"correlation must be in [0, 1]; got {correlation}")
    shared = rng.normal(size=FEATURES)
    own = rng.normal(size=(FEATURES, n_labels))
    offsets = rng.uniform(-2.0, 1.0, n_labels)
    temperatures = np.exp(rng.uniform(np.log(0.4), np.log(1.6), n_labels))
    biases = rng.uniform(-0.5, 0.5, n_labels)
    x = rng.normal(size=(n, FEATURES))
    common = (x @ shared / np.linalg.norm(shared))[:, None]
    specific = x @ (own / np.linalg.norm(own, axis=0))
    true_logits = offsets + scale * (np.sqrt(correlation) * common + np.sqrt(1.0 - correlation) * specific)
    true_probs = 1.0 / (1.0 + np.exp(-true_logits))
    labels = (rng.random((n, n_labels)) < true_probs).astype(np.int64)
    logits = true_logits / temperatures + biases
    return logits, labels, true_probs, temperatures, biases


def true_label_errors(logits: np.ndarray, true_probs: np.ndarray) -> np.ndarray:
    """Each label's true L1 calibration error, mean_i |sigmoid(z_il) - p_il|: the model's
    probability is a monotone map of the true logit, so E[y | f] = p exactly."""
    return np.abs(1.0 / (1.0 + np.exp(-logits)) - true_probs).mean(axis=0)


def split_files(labels: int, n_cal: int, n_test: int, correlation: float, seed: int, rng) -> tuple[dict, dict, dict]:
    """What `calib synth multilabel` writes: (the cal and test splits' arrays, logits (N, L),
    labels (N, L) and true_probs (N, L); meta.json's record: settings, per-label temperatures and
    biases, the test rows' true L1 error per label and their mean; what its summary shows)."""
    logits, label_matrix, truth, temperatures, biases = multilabel_data(n_cal + n_test, labels, rng, correlation=correlation)
    errors = true_label_errors(logits[n_cal:], truth[n_cal:])
    meta = {
        "labels": labels,
        "n_cal": n_cal,
        "n_test": n_test,
        "correlation": correlation,
        "seed": seed,
        "temperatures": [round(float(t), 6) for t in temperatures],
        "biases": [round(float(b), 6) for b in biases],
        "true_l1_errors_test": [round(float(e), 6) for e in errors],
        "true_l1_error_macro_test": round(float(errors.mean()), 6),
    }
    splits = {}
    for name, rows in (("cal", slice(0, n_cal)), ("test", slice(n_cal, None))):
        splits[name] = {"logits": logits[rows], "labels": label_matrix[rows], "true_probs": truth[rows]}
    shown = {
        "rows (cal / test)": f"{n_cal} / {n_test}",
        "labels": labels,
        "true L1 error, macro (test)": meta["true_l1_error_macro_test"],
    }
    return splits, meta, shown
