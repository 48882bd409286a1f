"""Selective prediction: how well the top-label confidence tells right answers from wrong ones.

Rows sorted by confidence, most confident first, a model that answers only its k most confident rows
has coverage k / n and selective risk r_k = (its errors among them) / k. Rows of equal confidence
cannot be told apart by any threshold, so every quantity here is its expectation over the order of
tied rows: in a run of m tied rows holding e errors after a rows with E_a errors, the first
k - a of the run hold (k - a) e / m errors on average, so

    r_k = (E_a + (k - a) e / m) / k,    a < k <= a + m,

the same whatever order the rows came in (with no ties, the plain sorted curve).

- AURC (Geifman et al. 2019) = (1 / n) sum_{k=1}^{n} r_k, the area under the risk-coverage curve at
  coverages 1/n, 2/n, ..., 1.
- E-AURC = AURC - AURC*, AURC* the oracle's: its w errors last, r*_k = max(0, k - (n - w)) / k.
- AUROC of the confidence as a detector of correct answers: the probability that a correct row is
  more confident than a wrong one, ties counting 1/2 (Mann-Whitney; scikit-learn's
  ``roc_auc_score(correct, confidence)``); undefined with no correct or no wrong row.
- Selective accuracy at coverage c: 1 - r_k at k = ceil(c n) rows (HELM's ``selective_acc@10``
  keeps floor(0.1 n) + 1 rows in sort order: ``helm_selective_acc_10``, calib.metrics.conventions).
- Coverage at risk r: the largest k / n a confidence threshold can keep (k at the end of a run of
  tied rows, or 0) with r_k <= r.
"""

from __future__ import annotations

import math

import numpy as np


def expected_risks(confidence: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(r_k for k = 1..n, whether k ends a run of tied confidences) of the rows sorted most
    confident first, each r_k its expectation over the order of tied rows (module docstring)."""
    order = np.argsort(-np.asarray(confidence, dtype=np.float64), kind="stable")
    values = np.asarray(confidence, dtype=np.float64)[order]
    errors = 1.0 - np.asarray(correct, dtype=np.float64)[order]
    n = len(values)
    if n == 0:
        return np.zeros(0), np.zeros(0, dtype=bool)
    ends = np.append(values[1:] != values[:-1], True)
    run = np.cumsum(np.concatenate(([True], ends[:-1]))) - 1
    run_end = np.flatnonzero(ends) + 1  # k at each run's end
    run_start = np.concatenate(([0], run_end[:-1]))  # a: rows before the run
    errors_to_end = np.cumsum(errors)[run_end - 1]
    run_errors = np.diff(np.concatenate(([0.0], errors_to_end)))  # e
    before = errors_to_end - run_errors  # E_a
    k = np.arange(1, n + 1, dtype=np.float64)
    into = k - run_start[run]
    expected = before[run] + into * run_errors[run] / (run_end - run_start)[run]
    return expected / k, ends


def aurc(confidence: np.ndarray, correct: np.ndarray) -> float | None:
    """Area under the risk-coverage curve, (1 / n) sum_k r_k; None on no rows."""
    if len(confidence) == 0:
        return None
    return float(expected_risks(confidence, correct)[0].mean())


def oracle_aurc(correct: np.ndarray) -> float | None:
    """AURC* of the oracle that answers its correct rows first: (1 / n) sum_k max(0, k - c) / k, c
    the correct rows."""
    n = len(correct)
    if n == 0:
        return None
    k = np.arange(1, n + 1, dtype=np.float64)
    return float((np.maximum(0.0, k - float(np.sum(correct))) / k).mean())


def excess_aurc(confidence: np.ndarray, correct: np.ndarray) -> float | None:
    """E-AURC = AURC - AURC*."""
    found, best = aurc(confidence, correct), oracle_aurc(correct)
    return None if found is None or best is None else found - best


def auroc_of_correct(confidence: np.ndarray, correct: np.ndarray) -> float | None:
    """P(confidence of a correct row > of a wrong row) + 1/2 P(equal), by average ranks; None
    without both correct and wrong rows."""
    hit = np.asarray(correct, dtype=bool)
    n_right, n_wrong = int(hit.sum()), int((~hit).sum())
    if n_right == 0 or n_wrong == 0:
        return None
    values = np.asarray(confidence, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    stops = np.append(starts[1:], len(ordered))
    average_rank = (starts + stops + 1) / 2.0  # ranks 1..n, ties their run's mean
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(average_rank, stops - starts)
    u = ranks[hit].sum() - n_right * (n_right + 1) / 2.0
    return float(u / (n_right * n_wrong))


def selective_accuracy(confidence: np.ndarray, correct: np.ndarray, coverage: float) -> float | None:
    """1 - r_k at k = ceil(coverage n): the accuracy of the most confident share ``coverage`` of the
    rows; None when that is no row."""
    n = len(confidence)
    kept = math.ceil(round(coverage * n, 6))  # a share written in decimal: 0.1 x 1000 = 100.00000000000001 keeps 100
    if kept == 0:
        return None
    return float(1.0 - expected_risks(confidence, correct)[0][kept - 1])


def coverage_at_risk(confidence: np.ndarray, correct: np.ndarray, risk: float) -> float | None:
    """The largest share k / n of rows a confidence threshold keeps with selective risk r_k <= ``risk``
    (k at the end of a run of tied confidences), 0 when none does; None on no rows."""
    n = len(confidence)
    if n == 0:
        return None
    risks, ends = expected_risks(confidence, correct)
    allowed = np.flatnonzero(ends & (risks <= risk))
    return float((allowed[-1] + 1) / n) if len(allowed) else 0.0
