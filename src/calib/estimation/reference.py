"""What an estimate without labels needs of the labelled rows a calibration map was fitted on (the
reference rows), recorded once at the fit and kept in the bundle.

- the label counts, and the mean calibrated probability of each class: the priors the map is
  calibrated for, which EM starts from and corrects (the mean probabilities, not the label shares:
  on rows like the reference's EM then finds no shift, whatever the map's calibration in the large,
  and a class absent from the rows keeps the small share the map still gives it);
- per score (:mod:`.expectations`) and class, the sum and the sum of squares of the residuals
  r_i = s(p_i, y_i) - E_{p_i}[s] of the reference rows of that class: the map's own error in the
  large. An estimate from the map is off by the mean residual d (the map's bias where it is
  misspecified: temperature scaling leaves CIFAR-10's ResNet-110 a point overconfident), which the
  estimate adds back, give or take sd(r) / sqrt(m) (:meth:`ReferenceRows.map_error`). Under other
  priors pi' the rows of class y weigh w_y = pi'_y / pi_y: d = sum_k w_k S_k / sum_k w_k n_k, the
  same weights in the variance, and m the weighted rows' effective size (sum_k w_k n_k)^2 /
  sum_k w_k^2 n_k;
- the margins of the uncalibrated scores, log p_(1) - log p_(2) (the largest less the second
  largest; z_(1) - z_(2) for logits), with the rows' labels, at most :data:`KEPT_ROWS` of them (a
  seeded subsample): the support of the map, and the distribution a batch's margins must follow under
  label shift alone (:mod:`.checks`);
- the calibrated probabilities of the first m of those rows (m = min(kept, :data:`PROB_CELLS` / K),
  the kept rows in a seeded order, float32): the residuals under other priors
  (:meth:`ReferenceRows.shifted_map_error`). Under the batch's priors pi' the estimate reads each
  row's score under q_i ∝ p_i pi'/pi, so the map's residual must too: r_i = s(p_i, y_i) -
  E_{q_i}[s], not - E_{p_i}[s]. The residuals under p, reweighted, carry the adaptation's own
  effect E_w[q_c - p_c] as if it were the map's error: on CIFAR-100 batches resampled to
  Dirichlet(1) class shares the shifted accuracy came out 0.9 points low on average (1.3 with the
  true priors), and 0.2 (0.02) with the residuals under q.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..bundle import RECORD_KEY
from ..errors import InputError
from .expectations import SCORES, expected, mean_expectations, predicted_class, ratio_expectations, realised

#: The most reference rows whose margins are kept (a seeded subsample above it)
KEPT_ROWS = 20_000
#: The most probabilities kept of the reference rows (rows x classes; float32, 4 MB)
PROB_CELLS = 1_000_000
#: The bundle arrays and manifest key the record is kept under
MARGINS, LABELS = "reference_margins", "reference_labels"
COUNTS, SUMS, SQUARES = "reference_label_counts", "reference_residual_sums", "reference_residual_squares"
MEANS = "reference_mean_probs"
ARRAYS = (COUNTS, MEANS, SUMS, SQUARES, MARGINS, LABELS)
#: The kept rows' calibrated probabilities: absent from the bundles of earlier versions
PROBS = "reference_probs"


def margins(logits: np.ndarray) -> np.ndarray:
    """z_(1) - z_(2) of each row of log-space scores (N, K >= 2): the top two's distance, which a
    softmax's shift leaves alone."""
    top_two = np.partition(np.asarray(logits, dtype=np.float64), -2, axis=1)[:, -2:]
    return top_two[:, 1] - top_two[:, 0]


@dataclass(frozen=True)
class ReferenceRows:
    """The record of the reference rows (module docstring)."""

    n: int
    label_counts: np.ndarray
    #: (K,) the mean calibrated probability of each class over the reference rows
    mean_probs: np.ndarray
    #: (scores, K) sums of the residuals of each class's rows, and of their squares (scores in SCORES' order)
    residual_sums: np.ndarray
    residual_squares: np.ndarray
    margins: np.ndarray
    labels: np.ndarray
    #: (m, K) calibrated probabilities of the first m kept rows (labels[:m]); None in older bundles
    probs: np.ndarray | None = None

    @classmethod
    def of(cls, calibrated: np.ndarray, logits: np.ndarray, labels: np.ndarray, seed: int = 0) -> ReferenceRows:
        """The record of labelled rows: their calibrated probabilities (N, K), their uncalibrated
        log-space scores and labels."""
        labels = np.asarray(labels, dtype=np.int64)
        predicted = predicted_class(calibrated)
        means = expected(calibrated, predicted)
        values = realised(calibrated, predicted, labels)
        k = calibrated.shape[1]
        residuals = np.array([values[score] - means[score][0] for score in SCORES])
        sums = np.array([np.bincount(labels, weights=r, minlength=k) for r in residuals])
        squares = np.array([np.bincount(labels, weights=r * r, minlength=k) for r in residuals])
        kept = np.random.default_rng([seed, 67]).permutation(len(labels))[:KEPT_ROWS]
        with_probs = kept[: max(1, PROB_CELLS // k)]
        counts = np.bincount(labels, minlength=k).astype(np.float64)
        probs = np.asarray(calibrated[with_probs], dtype=np.float32)
        return cls(len(labels), counts, calibrated.mean(axis=0), sums, squares, margins(logits[kept]), labels[kept], probs)

    @property
    def n_classes(self) -> int:
        return len(self.label_counts)

    @property
    def priors(self) -> np.ndarray:
        """The priors the map is calibrated for: its mean probabilities on the reference rows."""
        return self.mean_probs / self.mean_probs.sum()

    def class_weights(self, priors: np.ndarray) -> np.ndarray:
        """w_y = pi'_y / pi_y of the reference rows of each class under the batch's ``priors`` pi'
        (pi the label shares; 0 for a class without rows, which no row carries)."""
        shares = self.label_counts / self.n
        return np.divide(priors, shares, out=np.zeros(len(shares)), where=shares > 0)

    @property
    def absent_classes(self) -> list[int]:
        return [int(k) for k in np.flatnonzero(self.label_counts == 0)]

    def map_error(self, score: str, prior_ratio: np.ndarray | None = None) -> tuple[float, float]:
        """(d, var(r) / m): the map's mean residual on the reference rows, each class's rows weighted
        by ``prior_ratio`` pi' / pi (None: all rows alike), and the variance of that mean
        (module docstring)."""
        row = SCORES.index(score)
        weights = np.ones(self.n_classes) if prior_ratio is None else np.asarray(prior_ratio, dtype=np.float64)
        weighted_rows = float(weights @ self.label_counts)
        mean = float(weights @ self.residual_sums[row]) / weighted_rows
        variance = max(float(weights @ self.residual_squares[row]) / weighted_rows - mean * mean, 0.0)
        effective = weighted_rows**2 / float((weights * weights) @ self.label_counts)
        return mean, variance / effective

    def shifted_map_error(self, priors: np.ndarray) -> dict[str, tuple[float, float]]:
        """{score: (d, var(r) / m)} of the map under the batch's ``priors`` pi' (module docstring):
        the kept rows' residuals r_i = s(p_i, y_i) - E_{q_i}[s], q_i ∝ p_i pi'/pi, each row of class y
        weighted by w_y = pi'_y / pi_y, m the weighted rows' effective size. Without kept
        probabilities (an older bundle), :meth:`map_error` under the same weights."""
        ratio = self.class_weights(priors)
        if self.probs is None:
            return {score: self.map_error(score, ratio) for score in SCORES}
        residuals = self._shifted_residuals(priors)
        weights = ratio[self.labels[: len(self.probs)]]
        total = float(weights.sum())
        effective = total**2 / float(weights @ weights)
        found = {}
        for score, r in residuals.items():
            mean = float(weights @ r) / total
            found[score] = (mean, max(float(weights @ (r * r)) / total - mean * mean, 0.0) / effective)
        return found

    def shifted_map_biases(self, priors: np.ndarray) -> dict[str, np.ndarray]:
        """{score: (R,)} the map's mean residual d under each of the rows of ``priors`` (R, K)
        (:meth:`shifted_map_error`'s first value for each, all R at once)."""
        if self.probs is None:
            return {score: self.map_biases(score, priors) for score in SCORES}
        probs, labels, predicted, values = self._kept
        weights = np.stack([self.class_weights(row) for row in priors])[:, labels]  # (R, m)
        expectations = mean_expectations(probs, predicted, priors / self.priors, weights)
        total = weights.sum(axis=1)
        return {score: weights @ values[score] / total - expectations[score] for score in SCORES}

    @functools.cached_property
    def _kept(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """(the kept rows' probabilities in float64, their labels, predicted classes, realised
        scores), made once: every estimate under other priors reads them."""
        probs = np.asarray(self.probs, dtype=np.float64)
        labels = self.labels[: len(probs)]
        predicted = predicted_class(probs)
        return probs, labels, predicted, realised(probs, predicted, labels)

    def _shifted_residuals(self, priors: np.ndarray) -> dict[str, np.ndarray]:
        """{score: r_i} of the kept rows under the batch's ``priors`` (:meth:`shifted_map_error`)."""
        probs, _, predicted, values = self._kept
        means = ratio_expectations(probs, predicted, (priors / self.priors)[None, :])
        return {score: values[score] - means[score][:, 0] for score in SCORES}

    def map_biases(self, score: str, priors: np.ndarray) -> np.ndarray:
        """(R,) the map's mean residual d under each of the rows of ``priors`` (R, K) (:meth:`map_error`'s
        first value for each)."""
        row = SCORES.index(score)
        shares = self.label_counts / self.n
        weights = np.divide(priors, shares, out=np.zeros(priors.shape), where=shares > 0)
        return (weights @ self.residual_sums[row]) / (weights @ self.label_counts)

    def to_manifest(self) -> dict:
        """The JSON of the record (its arrays are :meth:`arrays`)."""
        return {"n": self.n, "kept_rows": len(self.labels), "scores": list(SCORES), "arrays": list(self.arrays())}

    def arrays(self) -> dict[str, np.ndarray]:
        values = (self.label_counts, self.mean_probs, self.residual_sums, self.residual_squares, self.margins, self.labels)
        return {**dict(zip(ARRAYS, values)), **({PROBS: self.probs} if self.probs is not None else {})}

    @classmethod
    def from_bundle(cls, manifest: dict, arrays: dict[str, np.ndarray], where: str) -> ReferenceRows | None:
        """The record a bundle keeps, None for a bundle without one (fitted before it was kept, or on a
        multi-label input); an incomplete record is an error naming ``where``."""
        entry = manifest.get(RECORD_KEY)
        if entry is None:
            return None
        try:
            probs = np.asarray(arrays[PROBS]) if PROBS in entry.get("arrays", ()) else None
            counts, means, sums, squares, kept_margins, kept_labels = (np.asarray(arrays[name]) for name in ARRAYS)
            record = cls(int(entry["n"]), counts, means, sums, squares, kept_margins, kept_labels, probs)
            consistent = (
                list(entry["scores"]) == list(SCORES)
                and record.residual_sums.shape == record.residual_squares.shape == (len(SCORES), record.n_classes)
                and record.mean_probs.shape == (record.n_classes,)
                and len(record.margins) == len(record.labels) == int(entry["kept_rows"])
                and record.label_counts.sum() == record.n
                and (
                    probs is None or (probs.ndim == 2 and probs.shape[1] == record.n_classes and len(probs) <= len(record.labels))
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where}: the bundle's record of its reference rows is incomplete ({exc!r})") from None
        if not consistent:
            raise InputError(
                f"{where}: the bundle's record of its reference rows is inconsistent (its counts and shapes disagree)"
            )
        return record
