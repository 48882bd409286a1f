"""The one place that checks user inputs and words the errors (cli.md, "Bad input").

Score matrices are checked in row chunks so that a memory-mapped input is never copied whole.
"""

from __future__ import annotations

import numpy as np

from .errors import InputError
from .numerics import logsumexp_rows, row_chunks

KINDS = ("logits", "probs", "log-probs")
#: Tolerance of the kind checks of cli.md: rows of probabilities sum to 1, log-probabilities have
#: logsumexp 0, both within this.
KIND_TOLERANCE = 1e-4


def check_score_array(scores: np.ndarray, name: str) -> None:
    """Shape and dtype rules: float dtype, (N,) or (N, K) with N >= 1 and K >= 2 (or one column)."""
    if not np.issubdtype(scores.dtype, np.floating):
        raise InputError(f"{name}: scores must be floating point; got dtype {scores.dtype}")
    if scores.ndim not in (1, 2):
        raise InputError(f"{name}: scores must be a 2-d (N, K) matrix or a 1-d binary column; got shape {scores.shape}")
    if scores.shape[0] == 0:
        raise InputError(f"{name}: no rows (N = 0)")
    if scores.ndim == 2 and scores.shape[1] == 0:
        raise InputError(f"{name}: no classes (K = 0); need K >= 2")


def resolve_kind(scores: np.ndarray, requested: str, name: str) -> tuple[str, str]:
    """Check every value of ``scores`` and decide its kind; returns ``(kind, reason)``.

    auto: rows in [0, 1] summing to 1 within 1e-4 -> probs; all <= 0 with row logsumexp 0 within
    1e-4 -> log-probs; else logits. A binary column (N,) or (N, 1) is probs if in [0, 1], else logits.
    Explicit kinds are checked against the same rules and refused with the first offending row.
    """
    if requested not in KINDS + ("auto",):
        raise InputError(f"--input-kind must be one of auto, {', '.join(KINDS)}; got {requested!r}")
    single = scores.ndim == 1 or scores.shape[1] == 1
    matrix = scores.reshape(scores.shape[0], -1)
    in_unit = sums_to_one = non_positive = lse_zero = True
    for rows in row_chunks(*matrix.shape):
        chunk = matrix[rows]  # in its own dtype: min and max need no float64 copy
        lowest, highest = chunk.min(), chunk.max()  # NaN propagates, inf shows
        if not (np.isfinite(lowest) and np.isfinite(highest)):
            r, c = np.argwhere(~np.isfinite(chunk))[0]
            what = "NaN" if np.isnan(chunk[r, c]) else "inf"
            raise InputError(f"{name}: scores contain {what} (first at row {rows.start + r}, column {c})")
        in_unit = in_unit and bool(lowest >= 0.0 and highest <= 1.0)
        non_positive = non_positive and bool(highest <= 0.0)
        needs_lse = not single and (requested == "log-probs" or (lse_zero and non_positive))
        if not (needs_lse or requested == "probs" or (in_unit and sums_to_one and not single)):
            continue  # logits so far: the finite check was all this chunk needed
        chunk = np.asarray(chunk, dtype=np.float64)
        if sums_to_one and not single:
            sums_to_one = in_unit and bool(np.all(np.abs(chunk.sum(axis=1) - 1.0) <= KIND_TOLERANCE))
        if lse_zero and needs_lse:
            lse_zero = bool(np.all(np.abs(logsumexp_rows(chunk)) <= KIND_TOLERANCE))
        if requested == "probs":
            _require_probs(chunk, rows.start, single, name)
        if requested == "log-probs" and not single:
            _require_log_probs(chunk, rows.start, name)
        if requested == "log-probs" and single and highest > 0.0:
            raise InputError(f"{name}: log-probabilities must be <= 0; got {float(highest):.6g}")
    if requested != "auto":
        return requested, "as given by --input-kind"
    if single:
        if in_unit:
            return "probs", "one column with values in [0, 1]: P(class 1) of a binary model"
        return "logits", "one column with values outside [0, 1]: the class-1 logit of a binary model"
    if in_unit and sums_to_one:
        return "probs", "every row lies in [0, 1] and sums to 1 within 1e-4"
    if non_positive and lse_zero:
        return "log-probs", "every value is <= 0 and every row has logsumexp 0 within 1e-4"
    return "logits", "rows are neither probabilities nor log-probabilities"


def _require_probs(chunk: np.ndarray, offset: int, single: bool, name: str) -> None:
    bad = (chunk < 0.0) | (chunk > 1.0)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise InputError(f"{name}: probabilities must lie in [0, 1]; row {offset + r}, column {c} is {chunk[r, c]:.6g}")
    if single:
        return
    error = np.abs(chunk.sum(axis=1) - 1.0)
    if (error > KIND_TOLERANCE).any():
        r = int(np.argmax(error > KIND_TOLERANCE))
        raise InputError(f"{name}: probabilities must sum to 1 within 1e-4; row {offset + r} sums to {chunk[r].sum():.6g}")


def _require_log_probs(chunk: np.ndarray, offset: int, name: str) -> None:
    lse = np.abs(logsumexp_rows(chunk))
    if (lse > KIND_TOLERANCE).any():
        r = int(np.argmax(lse > KIND_TOLERANCE))
        raise InputError(f"{name}: log-probabilities must have logsumexp 0 within 1e-4; row {offset + r} has {lse[r] :.6g}")


def check_labels(labels: np.ndarray, n_rows: int, n_classes: int, name: str) -> np.ndarray:
    """Labels are integers in [0, K), one per row; returned as int64."""
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise InputError(f"{name}: labels must be a 1-d array; got shape {labels.shape}")
    if not (np.issubdtype(labels.dtype, np.integer) or labels.dtype == np.bool_):
        raise InputError(f"{name}: labels must be integers; got dtype {labels.dtype}")
    if labels.shape[0] != n_rows:
        raise InputError(f"{name}: {labels.shape[0]} labels for {n_rows} rows of scores")
    labels = labels.astype(np.int64)
    bad = (labels < 0) | (labels >= n_classes)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{name}: labels must lie in [0, {n_classes}); row {i} has label {labels[i]}")
    return labels
