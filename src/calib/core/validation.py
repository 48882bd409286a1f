"""The one place that checks user inputs and words the errors (docs/cli.md, "Bad input").

Score matrices are checked in row chunks so that a memory-mapped input is never copied whole.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError, UsageError
from .numerics import logsumexp_rows, release_rows, row_chunks

KINDS = ("logits", "probs", "log-probs")


class UnitIntervalScores(InputError):
    """Every score lies in [0, 1] but the rows do not sum to 1: not probabilities, never taken for
    logits. ``mass_missing``: every row sums to a value in (0, 1], as probabilities truncated to
    their top classes do."""

    def __init__(self, message: str, *, cli_hint: str | None = None, mass_missing: bool = False):
        super().__init__(message, cli_hint=cli_hint)
        self.mass_missing = mass_missing


#: Rows of probabilities already in [0, 1] and summing to 1 within this are used exactly as given;
#: renormalising them would move ties by an ulp.
EXACT_SUM_TOLERANCE = 1e-9


def kind_tolerance(dtype) -> float:
    """How far exported probabilities may stray from [0, 1] and from summing to 1 (and
    log-probabilities from logsumexp 0): ``max(sqrt(eps(float32)), sqrt(eps(dtype)))``, 3.5e-4 for
    float32 and float64 files, 0.031 for float16. A softmax computed in float32 and written out
    rounds each entry by up to eps/2 and the row sum by up to K eps/2; sqrt(eps) leaves room for
    K in the thousands while still telling probabilities from other [0, 1] scores."""
    return float(max(np.sqrt(np.finfo(np.float32).eps), np.sqrt(np.finfo(dtype).eps)))


def show_value(value) -> str:
    """A score as the file holds it, with every digit its dtype needs (1.00002, not 1)."""
    return str(np.asarray(value)[()])


def as_array(values, name: str) -> np.ndarray:
    """``values`` as a NumPy array, from what notebooks hold: a torch tensor (detached from its
    graph and moved to the CPU first; bfloat16, which NumPy has no type for, as float32, which
    holds every bfloat16 value exactly), a pandas Series or DataFrame, a list, or a 1-d sequence
    whose entries are equal-length rows (a Series of arrays, or a DataFrame of one such column),
    which is stacked into a matrix."""
    detach = getattr(values, "detach", None)
    if callable(detach) and hasattr(values, "cpu"):  # torch.Tensor, requires_grad or not
        values = detach().cpu()
        if str(values.dtype) == "torch.bfloat16":
            values = values.float()
        values = values.numpy()
    array = np.asarray(values)
    if array.dtype == object and array.ndim == 2 and array.shape[1] == 1:  # a DataFrame of one list column
        array = array[:, 0]
    if array.dtype == object:
        rows = [np.asarray(row) for row in array.reshape(-1)] if array.ndim == 1 else None
        if not rows or any(row.dtype == object for row in rows):
            raise InputError(f"{name}: holds Python objects (dtype object); give a numeric array")
        lengths = {row.shape for row in rows}
        if len(lengths) > 1:
            raise InputError(
                f"{name}: rows of different lengths ({', '.join(sorted(map(str, lengths))[:3])}); every row needs one score per class"
            )
        array = np.stack(rows)
    return array


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


def repair_probs(probs: np.ndarray) -> np.ndarray:
    """Probabilities within tolerance made exact: rows already in [0, 1] and summing to 1 within
    :data:`EXACT_SUM_TOLERANCE` are returned as given; the others are clipped to [0, 1] and divided
    by their sum (a float64 copy then; else ``probs`` itself). A single column of P(class 1) is
    clipped to [0, 1]."""
    if probs.ndim == 1 or probs.shape[1] == 1:
        return np.clip(probs, 0.0, 1.0)
    off, _ = off_simplex(probs)
    if off.any():
        probs = np.array(probs, dtype=np.float64)
        fixed = np.clip(probs[off], 0.0, 1.0)
        probs[off] = fixed / fixed.sum(axis=1, keepdims=True)
    return probs


def off_simplex(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a float64 (N, K) probability matrix: whether :func:`repair_probs` changes it (an
    entry outside [0, 1], or K > 1 and the sum off 1 by more than :data:`EXACT_SUM_TOLERANCE`), and
    how far it is off (the largest of those excesses)."""
    below, above = -probs.min(axis=1), probs.max(axis=1) - 1.0
    off = (below > 0.0) | (above > 0.0)
    deviation = np.maximum(np.maximum(below, above), 0.0)
    if probs.shape[1] > 1:
        sum_error = np.abs(probs.sum(axis=1) - 1.0)
        off |= sum_error > EXACT_SUM_TOLERANCE
        deviation = np.maximum(deviation, sum_error)
    return off, deviation


def resolve_kind(
    scores: np.ndarray, requested: str, name: str, given_by: str = "as given", *, renormalise: bool = False
) -> tuple[str, str]:
    """Check every value of ``scores`` and decide its kind; returns ``(kind, reason)``.

    With tol = :func:`kind_tolerance` of the dtype, auto decides: every entry in [-tol, 1 + tol]
    and every row summing to 1 within tol -> probs; every entry in [-tol, 1 + tol] otherwise -> an
    error (a [0, 1] matrix is never taken as logits: multi-label sigmoid outputs, say, must be
    declared); every entry <= tol with row logsumexp 0 within tol -> log-probs; else logits. A binary
    column (N,) or (N, 1) is probs if in [-tol, 1 + tol], else logits. Explicit kinds are checked
    against the same rules and refused with the first offending row (``given_by`` says who gave the
    kind, for the reason). The reason says how many
    rows of probabilities will be clipped and renormalised (:func:`repair_probs`), and by how much.

    ``renormalise`` (probabilities only) accepts rows whose mass is below 1, such as probabilities
    truncated to the top k classes: every row sum must lie in (0, 1 + tol], and each row is divided
    by its sum (the reason says how many rows and the smallest mass).
    """
    if requested not in KINDS + ("auto",):
        raise InputError(f"input kind must be one of auto, {', '.join(KINDS)}; got {requested!r}", cli_hint="--input-kind")
    if renormalise:
        if requested not in ("auto", "probs"):
            raise InputError(f"{name}: renormalising applies to probabilities only; the input kind is {requested}")
        requested, given_by = "probs", "probabilities renormalised as asked"
    tol = kind_tolerance(scores.dtype)
    single = scores.ndim == 1 or scores.shape[1] == 1
    matrix = scores.reshape(scores.shape[0], -1)
    in_unit = sums_to_one = non_positive = lse_zero = True
    repaired, deviation, first_bad_sum = 0, 0.0, None
    lowest_sum, highest_sum = np.inf, -np.inf
    for rows in row_chunks(*matrix.shape):
        chunk = matrix[rows]  # in its own dtype: min and max need no float64 copy
        lowest, highest = chunk.min(), chunk.max()  # NaN propagates, inf shows
        if not (np.isfinite(lowest) and np.isfinite(highest)):
            r, c = np.argwhere(~np.isfinite(chunk))[0]
            what = "NaN" if np.isnan(chunk[r, c]) else "inf"
            raise InputError(f"{name}: scores contain {what} (first at row {rows.start + r}, column {c})")
        if requested == "probs":
            _require_probs(chunk, rows.start, single, tol, name, renormalise)
        in_unit = in_unit and bool(lowest >= -tol and highest <= 1.0 + tol)
        non_positive = non_positive and bool(highest <= tol)
        if requested == "log-probs":
            _require_log_probs(chunk, rows.start, single, tol, name)
        elif not single and lse_zero and non_positive and not in_unit:
            lse_zero = lse_zero and bool(np.all(np.abs(logsumexp_rows(chunk)) <= tol))
        if in_unit and requested in ("auto", "probs"):
            values = np.asarray(chunk, dtype=np.float64)
            if not single:
                sums = values.sum(axis=1)
                lowest_sum, highest_sum = min(lowest_sum, float(sums.min())), max(highest_sum, float(sums.max()))
                off_sum = np.abs(sums - 1.0) > tol
                if first_bad_sum is None and off_sum.any():
                    r = int(np.argmax(off_sum))
                    first_bad_sum = (rows.start + r, float(sums[r]))
                sums_to_one = sums_to_one and not off_sum.any()
            off, spread = off_simplex(values)
            if off.any():
                repaired += int(off.sum())
                deviation = max(deviation, float(spread[off].max()))
        release_rows(matrix, rows)
    if renormalise:
        note = f"; {repaired} rows renormalised (row sums from {lowest_sum:.6g} to {highest_sum:.6g})" if repaired else ""
        return "probs", given_by + note
    repair_note = (
        f"; {repaired} rows off by up to {deviation:.3g} (within the tolerance {tol:.2g} of this "
        f"{scores.dtype} file) clipped to [0, 1] and renormalised"
        if repaired
        else ""
    )
    if requested != "auto":
        return requested, given_by + (repair_note if requested == "probs" else "")
    sums = (lowest_sum, highest_sum, first_bad_sum)
    return _detected_kind(name, tol, single, in_unit, sums_to_one, non_positive and lse_zero, sums, repair_note)


def _detected_kind(name, tol, single, in_unit, sums_to_one, log_probs, sums, repair_note) -> tuple[str, str]:
    """The auto-detected kind from what the pass over the rows found: a binary column by its range;
    a matrix in [0, 1] summing to 1 is probs (not summing to 1: refused, saying whether mass is
    missing); log-probs when every value is <= 0 with logsumexp 0; else logits."""
    lowest_sum, highest_sum, first_bad_sum = sums
    if single:
        if in_unit:
            return "probs", "one column with values in [0, 1]: P(class 1) of a binary model" + repair_note
        return "logits", "one column with values outside [0, 1]: the class-1 logit of a binary model"
    if in_unit and sums_to_one:
        return "probs", f"every row lies in [0, 1] and sums to 1 within {tol:.2g}" + repair_note
    if in_unit:
        row, total = first_bad_sum
        if 0.0 < lowest_sum and highest_sum <= 1.0 + tol:
            raise UnitIntervalScores(
                f"{name}: every value lies in [0, 1] and every row sums to at most 1 (from {lowest_sum:.6g}; row "
                f"{row} sums to {show_value(total)}): probabilities with mass missing, such as the top k classes "
                "of each row, are read only when renormalising is asked for explicitly; other [0, 1] scores "
                "(multi-label sigmoid outputs) are never taken for logits unless declared",
                cli_hint="--renormalise, or --input-kind logits",
                mass_missing=True,
            )
        raise UnitIntervalScores(
            f"{name}: every value lies in [0, 1] but row {row} sums to {show_value(total)}, so these are "
            f"not probabilities, and a [0, 1] matrix is never taken for logits; declare the input kind "
            f"(logits, for scores such as multi-label sigmoid outputs)",
            cli_hint="--input-kind logits",
        )
    if log_probs:
        return "log-probs", f"every value is <= 0 and every row has logsumexp 0 within {tol:.2g}"
    return "logits", "rows are neither probabilities nor log-probabilities"


def _require_probs(chunk: np.ndarray, offset: int, single: bool, tol: float, name: str, renormalise: bool = False) -> None:
    bad = (chunk < -tol) | (chunk > 1.0 + tol)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise InputError(
            f"{name}: probabilities must lie in [0, 1] (within {tol:.2g} for a {chunk.dtype} file); "
            f"row {offset + r}, column {c} is {show_value(chunk[r, c])}"
        )
    if single:
        return
    sums = np.asarray(chunk, dtype=np.float64).sum(axis=1)
    if renormalise:
        bad = (sums <= 0.0) | (sums > 1.0 + tol)
        if bad.any():
            r = int(np.argmax(bad))
            raise InputError(
                f"{name}: renormalised probabilities need every row's sum in (0, 1]; row {offset + r} sums to {show_value(sums[r])}"
            )
        return
    error = np.abs(sums - 1.0)
    if (error > tol).any():
        r = int(np.argmax(error > tol))
        short = bool((sums[error > tol] < 1.0).all() and (sums > 0.0).all())
        raise InputError(
            f"{name}: probabilities must sum to 1 within {tol:.2g}; row {offset + r} sums to {show_value(sums[r])}"
            + (
                "; rows with mass missing (the top k classes of each row, say) are read when renormalising is asked for"
                if short
                else ""
            ),
            cli_hint="--renormalise" if short else None,
        )


def _require_log_probs(chunk: np.ndarray, offset: int, single: bool, tol: float, name: str) -> None:
    highest = chunk.max()
    if highest > tol:
        r, c = np.argwhere(chunk > tol)[0]
        raise InputError(f"{name}: log-probabilities must be <= 0; row {offset + r}, column {c} is {show_value(chunk[r, c])}")
    if single:
        return
    lse = logsumexp_rows(chunk)
    off = np.abs(lse) > tol
    if off.any():
        r = int(np.argmax(off))
        raise InputError(
            f"{name}: log-probabilities must have logsumexp 0 within {tol:.2g}; row {offset + r} has {show_value(lse[r])}"
        )


def check_true_probs(truth: np.ndarray, n_rows: int, n_classes: int, name: str) -> np.ndarray:
    """True conditional probabilities (synthetic data) for (N, K) predictions: the same shape,
    checked as probabilities."""
    truth = np.asarray(truth)
    check_score_array(truth, name)
    if truth.shape != (n_rows, n_classes):
        raise InputError(f"{name}: true probabilities have shape {truth.shape}; the predictions are ({n_rows}, {n_classes})")
    resolve_kind(truth, "probs", name)
    return truth


#: The label of a row without one, where rows may lack a label (``missing``)
MISSING_LABEL = -1


def check_labels(labels: np.ndarray, n_rows: int, n_classes: int, name: str, missing: int | str | None = None) -> np.ndarray:
    """Labels are class indices in [0, K), one per row; returned as int64. Integral floats (2.0:
    what pandas stores once a column held a NaN) are accepted; a missing (NaN) or non-integral
    label is refused naming its row. With ``missing`` ("null", or a value such as -1) a row may lack
    its label: a NaN, or a label equal to ``missing``, becomes :data:`MISSING_LABEL`."""
    labels = np.asarray(labels)
    if missing is not None:
        return _with_missing(labels, n_rows, n_classes, name, missing)
    where = "" if name == "labels" else f"{name}: "  # arrays given in Python: the subject is the labels themselves
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise InputError(f"{where}labels must be a 1-d array; got shape {labels.shape}")
    if labels.shape[0] != n_rows:
        raise InputError(f"{where}{labels.shape[0]} labels for {n_rows} rows of scores")
    if np.issubdtype(labels.dtype, np.floating):
        nan_rows = np.isnan(labels)
        if nan_rows.any():
            raise InputError(f"{where}row {int(np.argmax(nan_rows))} has no label (NaN); every row needs its class index")
        fractional = labels != np.round(labels)  # inf included (inf - inf is NaN)
        if fractional.any():
            i = int(np.argmax(fractional))
            raise InputError(f"{where}row {i} has label {float(labels[i])!r}, not a class index (an integer in [0, {n_classes}))")
    elif not (np.issubdtype(labels.dtype, np.integer) or labels.dtype == np.bool_):
        what = "strings" if labels.dtype.kind in "USO" else f"dtype {labels.dtype}"
        raise InputError(f"{where}labels must be class indices (integers in [0, {n_classes})); got {what}")
    bad = (labels < 0) | (labels >= n_classes)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{where}labels must lie in [0, {n_classes}); row {i} has label {labels[i]:g}")
    return labels.astype(np.int64)


def _with_missing(labels: np.ndarray, n_rows: int, n_classes: int, name: str, missing: int | str) -> np.ndarray:
    """:func:`check_labels` of the labelled rows, the others (NaN, or equal to ``missing``) set to
    :data:`MISSING_LABEL`."""
    if missing != "null" and (isinstance(missing, (bool, float)) or not isinstance(missing, (int, np.integer))):
        raise UsageError(f"the missing-label marker is 'null' or an integer; got {missing!r}")
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    absent = np.zeros(labels.shape, dtype=bool)
    if labels.ndim == 1 and np.issubdtype(labels.dtype, np.floating):
        absent |= np.isnan(labels)
    if isinstance(missing, (int, np.integer)) and labels.ndim == 1 and labels.dtype.kind in "iuf":
        absent |= np.equal(labels, missing)
    if not absent.any():
        return check_labels(labels, n_rows, n_classes, name)
    checked = check_labels(np.where(absent, 0, labels), n_rows, n_classes, name)
    checked[absent] = MISSING_LABEL
    return checked


def lacks_labels(labels: np.ndarray | None) -> bool:
    """True when some row has no label (no labels at all, or :data:`MISSING_LABEL` somewhere): such
    rows are estimated (calib.estimation)."""
    return labels is None or bool((np.asarray(labels) == MISSING_LABEL).any())
