"""Calibration errors as other tools and papers compute them, each under its own key, so a number
from calib can be set beside the number a paper or a peer printed (docs/metrics.md, "Which ECE is
this"). They read every row's confidence and correctness (:class:`AnswerValues`): the top label's
probability and whether the label is it; for a binary input (K = 2), P(class 1) and whether the
label is 1, as a confidence-and-correctness file is read (class 1 = correct) and as scikit-learn
and the LLM literature bin a binary model.

- ``rms_ce``: the root-mean-square calibration error with adaptive bins of :data:`ROWS_PER_BIN`
  rows, as in Hendrycks et al. (2019) and the LLM literature (Humanity's Last Exam, Phan et al.
  2025): the rows sorted by confidence, consecutive bins of 100 rows, the last holding the rest
  (with fewer than 100 rows, one bin); sqrt(sum_b (n_b / N) (mean_b conf - mean_b correct)^2).
- ``rms_ce_hle``: the same as the reference code computes it, which skips its last bin (its loop
  runs over ``range(len(bins) - 1)``): the last bin's rows count in N but not in the sum, and with
  fewer than 200 rows the value is 0. Reproduced to compare with published numbers; ``rms_ce`` is
  the error.
- ``ece_extra_bin``: top-label ECE as torchmetrics bins it: edges ``linspace(0, 1, B + 1)``, a
  row in bin b when e_b <= conf < e_{b+1} (``bucketize(..., right=True) - 1``), so a confidence of
  exactly 1.0 lands in a bin of its own, B + 1 bins in all (here in float64; torchmetrics in float32).
- ``ece_pos_quantile``: the ECE of scikit-learn's ``calibration_curve(y, p, n_bins=B,
  strategy="quantile")`` bins, each weighted by its rows: edges at the B + 1 percentiles of p
  (``np.percentile``), a row in bin ``searchsorted(edges[1:-1], p)`` (a value on an interior edge
  in the bin below it), empty bins dropped.

- ``helm_ece_10``, ``helm_ece_1``, ``helm_platt_ece_10``, ``helm_selective_acc_10``,
  ``helm_selective_area``: HELM's calibration numbers (Liang et al. 2023; its
  ``compute_calibration_metrics``, which calls Kumar et al.'s ``uncertainty-calibration``
  package), from each row's top-label confidence (HELM's ``max_prob``) and correctness
  (:func:`helm_ece`, :func:`helm_selective`, :func:`helm_platt_ece`).

Rows of equal confidence are ordered for the adaptive bins as NumPy's default ``argsort`` orders
them, as the reference code does: a bin edge may split tied rows.
"""

from __future__ import annotations

import numpy as np

from .accumulators import Additive
from .batch import Batch

#: Rows a bin of the adaptive RMS calibration error (the reference code's ``beta``)
ROWS_PER_BIN = 100


def answer_pairs(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(confidence in each row's answer, 1.0 where it was right): the top label's probability, or
    for K = 2, P(class 1) against y = 1."""
    if probs.shape[1] == 2:
        return probs[:, 1].copy(), (labels == 1).astype(np.float64)
    top = probs.argmax(axis=1)
    return probs[np.arange(len(probs)), top], (top == labels).astype(np.float64)


class TopLabelClassValues(Additive):
    """Every row's top-label confidence, its predicted class and whether it is right (O(N) memory):
    for the top-label ECE within each predicted class (:func:`top_label_ece`)."""

    STATE = ("confidence", "predicted", "correct")
    VIEWS = ("confidence", "correct")

    def __init__(self):
        self.confidence: list[np.ndarray] = []
        self.predicted: list[np.ndarray] = []
        self.correct: list[np.ndarray] = []

    def update(self, batch: Batch) -> None:
        self.confidence.append(batch.confidence.copy())
        self.predicted.append(batch.predicted.astype(np.float64))
        self.correct.append(batch.correct.astype(np.float64))
        self._keep_clusters(batch)

    def values(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return tuple(np.concatenate(part) if part else np.zeros(0) for part in (self.confidence, self.predicted, self.correct))


class AnswerValues(Additive):
    """Every row's confidence in its answer and whether the answer is right (O(N) memory): the
    top label's for K > 2, P(class 1) against y = 1 for K = 2."""

    STATE = ("confidence", "correct")

    def __init__(self):
        self.confidence: list[np.ndarray] = []
        self.correct: list[np.ndarray] = []

    def update(self, batch: Batch) -> None:
        confidence, correct = answer_pairs(batch.probs, batch.labels)
        self.confidence.append(confidence)
        self.correct.append(correct)
        self._keep_clusters(batch)

    def values(self) -> tuple[np.ndarray, np.ndarray]:
        return np.concatenate(self.confidence), np.concatenate(self.correct)


def adaptive_bins(n: int, rows_per_bin: int = ROWS_PER_BIN) -> list[tuple[int, int]]:
    """[start, stop) of the adaptive bins of ``n`` sorted rows: floor(n / rows_per_bin) bins of
    ``rows_per_bin`` rows, the last one extended to n; one bin of all rows when n < rows_per_bin."""
    count = max(n // rows_per_bin, 1)
    return [(i * rows_per_bin, n if i == count - 1 else (i + 1) * rows_per_bin) for i in range(count)]


def rms_calibration_error(confidence: np.ndarray, correct: np.ndarray, *, skip_last: bool = False) -> float:
    """sqrt(sum_b (n_b / N) (mean_b conf - mean_b correct)^2) over :func:`adaptive_bins` of the
    rows sorted by confidence; ``skip_last`` leaves the last bin out of the sum (not out of N), as
    the reference code does."""
    order = np.argsort(confidence)
    confidence, correct = confidence[order], correct[order]
    bins = adaptive_bins(len(confidence))
    total = 0.0
    for start, stop in bins[:-1] if skip_last else bins:
        total += (stop - start) / len(confidence) * (confidence[start:stop].mean() - correct[start:stop].mean()) ** 2
    return float(np.sqrt(total))


def torch_float32_edges(n_bins: int) -> np.ndarray:
    """torch.linspace(0, 1, B + 1, dtype=torch.float32) on a CPU, to the bit: step = 1 / B in
    float32, edge i = step i below the middle and 1 - step (B - i) from it (i >= (B + 1) // 2),
    each rounded once to float32 (PyTorch's linspace kernel, whose multiply-add is fused). Edge 7
    of 10 is 0.699999988, below 0.7 as float32, so a confidence of 0.7 falls in bin 7, where
    linspace in float64 (0.7000000000000001) puts it in bin 6; checked against torch for every B up
    to 2,000."""
    step = np.float64(np.float32(1.0) / np.float32(n_bins))
    i = np.arange(n_bins + 1)
    return np.where(i < (n_bins + 1) // 2, step * i, 1.0 - step * (n_bins - i)).astype(np.float32)


def extra_bin_ece(confidence: np.ndarray, correct: np.ndarray, n_bins: int) -> float:
    """torchmetrics' multiclass ECE (``multiclass_calibration_error(norm="l1")``), computed as it
    computes it: the confidences and outcomes in float32 (torchmetrics casts them), B + 1 bins,
    b = bucketize(conf, edges, right=True) - 1 = #{j : e_j <= conf} - 1 with the edges torch's
    float32 linspace (:func:`torch_float32_edges`), so a confidence on an edge goes up and one of
    1.0 is a bin of its own; each bin's sums accumulated in float32 in row order (its
    ``scatter_add_``), then sum_b (n_b / N) |mean_b correct - mean_b conf|. Agrees with torchmetrics
    to about 1e-8 (float32 rounding of the last sums); exact sums would differ from it by up to
    1e-6 at 3,000 rows."""
    stored = np.asarray(confidence, dtype=np.float32)
    index = np.searchsorted(torch_float32_edges(n_bins), stored, side="right") - 1
    sums = np.zeros((3, n_bins + 1), dtype=np.float32)  # count, confidence, correct
    np.add.at(sums[0], index, np.float32(1.0))
    np.add.at(sums[1], index, stored)
    np.add.at(sums[2], index, np.asarray(correct, dtype=np.float32))
    count = sums[0].astype(np.float64)
    kept = count > 0
    gap = np.abs(sums[2][kept] / sums[0][kept] - sums[1][kept] / sums[0][kept]).astype(np.float64)
    return float(np.sum(gap * count[kept] / count.sum()))


def top_label_ece(confidence: np.ndarray, predicted: np.ndarray, correct: np.ndarray, n_bins: int) -> float:
    """Gupta & Ramdas' (2022) top-label ECE (their ``toplabel_ece``): within each predicted class l,
    the ECE of the confidences against the label being l, in uniform-mass bins
    (:func:`calib.core.binning.uniform_mass_upper_edges`), or one bin per distinct confidence when
    the class's confidences take at most n_l / 10 values (a discrete model, theirs too); weighted
    by the class's share n_l / N. A class with fewer rows than bins gets a bin per row (their code
    stops on it)."""
    from ..core.binning import uniform_mass_upper_edges, upper_edge_bins

    total = 0.0
    for label in np.unique(predicted):
        rows = predicted == label
        scores, hits = confidence[rows], correct[rows]
        distinct = np.unique(scores)
        if len(distinct) <= len(scores) / 10:
            edges = distinct
        else:
            edges = uniform_mass_upper_edges(scores, min(n_bins, len(scores)))
        gap = np.bincount(upper_edge_bins(scores, edges), weights=scores - hits, minlength=len(edges))
        total += np.abs(gap).sum()
    return float(total / len(confidence))


def quantile_curve_ece(confidence: np.ndarray, correct: np.ndarray, n_bins: int) -> float:
    """sum_b (n_b / N) |mean_b correct - mean_b conf| over the bins of scikit-learn's
    ``calibration_curve(strategy="quantile")``: edges ``np.percentile(p, linspace(0, 100, B + 1))``,
    bin ``searchsorted(edges[1:-1], p)``, empty bins dropped."""
    edges = np.percentile(confidence, np.linspace(0.0, 1.0, n_bins + 1) * 100)
    index = np.searchsorted(edges[1:-1], confidence)
    gap = np.bincount(index, weights=correct - confidence, minlength=n_bins)
    return float(np.abs(gap).sum() / len(confidence))


def helm_equal_mass_edges(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    """The upper edges of HELM's equal-mass bins (``calibration.get_equal_bins``): the sorted
    confidences split into min(B, n) nearly equal parts (``np.array_split``), an edge halfway
    between each part's last value and the next part's first, then 1.0; duplicate edges merged."""
    parts = np.array_split(np.sort(confidence), min(n_bins, len(confidence)))
    edges = [(parts[i][-1] + parts[i + 1][0]) / 2.0 for i in range(len(parts) - 1)] + [1.0]
    return np.array(sorted(set(edges)))


def helm_ece(confidence: np.ndarray, correct: np.ndarray, n_bins: int, equal_mass: bool = True) -> float | None:
    """HELM's ECE (``calibration.get_ece_em``, or with ``equal_mass`` False ``get_ece``'s equal-width
    edges b / B): a row in the first bin whose upper edge is >= its confidence (``searchsorted``,
    left; past the last edge, the last bin), sum_b (n_b / N) |mean_b conf - mean_b correct|. None
    on no rows."""
    if len(confidence) == 0:
        return None
    edges = helm_equal_mass_edges(confidence, n_bins) if equal_mass else np.arange(1, n_bins + 1) / n_bins
    index = np.minimum(np.searchsorted(edges, confidence), len(edges) - 1)
    count = np.bincount(index, minlength=len(edges)).astype(np.float64)
    kept = count > 0
    conf_mean = np.bincount(index, weights=confidence, minlength=len(edges))[kept] / count[kept]
    correct_mean = np.bincount(index, weights=correct, minlength=len(edges))[kept] / count[kept]
    return float(np.dot(count[kept] / len(confidence), np.abs(conf_mean - correct_mean)))


def helm_selective(confidence: np.ndarray, correct: np.ndarray) -> tuple[float, float] | None:
    """(HELM's ``selective_cov_acc_area``, ``selective_acc@10``; ``calibration.get_selective_stats``):
    the rows in ``np.argsort(-confidence)``'s order (ties as NumPy's default sort leaves them),
    accuracy a_k of the first k, the mean of a_k over k = 1..n and a_k at k = floor(0.1 n) + 1 (one
    row more than a tenth). None on no rows."""
    if len(confidence) == 0:
        return None
    in_order = np.asarray(correct, dtype=np.float64)[np.argsort(-np.asarray(confidence))]
    accuracy = np.cumsum(in_order) / np.arange(1, len(in_order) + 1)
    return float(np.mean(accuracy)), float(accuracy[int(0.1 * len(in_order))])


#: HELM's Platt scaling of the confidences: its logistic regression (scikit-learn, nearly unregularised).
PLATT_C, PLATT_CLIP = 1e10, 1e-12


def helm_platt_ece(confidence: np.ndarray, correct: np.ndarray, n_bins: int = 10) -> float | None:
    """HELM's ``platt_ece_10_bin``: x = logit(clip(conf, 1e-12, 1 - 1e-12)), scikit-learn's
    ``LogisticRegression(C=1e10, solver="lbfgs")`` of correctness on x (``calibration.get_platt_scaler``),
    then :func:`helm_ece` of sigmoid(a x + b) (on float64 rows); 0 when every row is right or every
    row wrong, as HELM sets it; None on no rows. Needs scikit-learn (the fit is HELM's own, so the
    numbers are its numbers)."""
    if len(confidence) == 0:
        return None
    right = np.asarray(correct).astype(np.int64)
    if right.sum() in (0, len(right)):
        return 0.0
    from ..core.extras import require

    logistic = require("sklearn.linear_model").LogisticRegression(C=PLATT_C, solver="lbfgs")
    x = np.clip(np.asarray(confidence, dtype=np.float64), PLATT_CLIP, 1 - PLATT_CLIP)
    x = np.log(x / (1 - x))
    logistic.fit(x[:, None], right)
    scaled = 1 / (1 + np.exp(-(x * logistic.coef_[0] + logistic.intercept_)))
    return helm_ece(scaled, right.astype(np.float64), n_bins)
