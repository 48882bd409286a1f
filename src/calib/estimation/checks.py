"""What can be checked without labels before an estimate is trusted. An estimate assumes the
calibration map still holds on the batch: p(y | x) as on the reference rows, the priors p(y) free to
move (label shift, which EM corrects). Two checks read the batch's margins m = log p_(1) - log p_(2)
of the uncalibrated scores (:func:`calib.estimation.reference.margins`):

- support: rows whose margin lies beyond the reference margins' range [min, max] are outside what
  the map was fitted on; of exchangeable rows a share 2 / (m + 1) lies there (m reference margins).
  The check fails when the count k of n rows is improbable under that share (the binomial tail
  P(K >= k) < :data:`ALPHA`) and k / n >= :data:`SUPPORT_SHARE`;
- beyond label shift: under label shift alone the margins of class y keep their distribution, so the
  batch's margins follow the reference margins weighted by w_j = pi'_{y_j} / pi_{y_j} (pi' EM's
  priors of the batch). The two-sample Kolmogorov-Smirnov distance D = sup_t |F_batch(t) -
  F_ref,w(t)|, its p-value from Kolmogorov's limit at n_e = n m_e / (n + m_e) (m_e = (sum w)^2 /
  sum w^2, the weighted sample's effective size). The check fails when p < :data:`ALPHA` and
  D >= :data:`SHIFT_DISTANCE`: a shift both real and large enough to matter.

A concept change that leaves the scores' distribution alone (p(y | x) moved, p(x) not) cannot be
seen without labels; labelled rows test for it (:mod:`.labelled`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The tail probability below which a check calls the batch foreign
ALPHA = 1e-3
#: The least share of rows outside the support that makes the estimate unreliable
SUPPORT_SHARE = 0.01
#: The least Kolmogorov-Smirnov distance beyond label shift that makes it unreliable
SHIFT_DISTANCE = 0.05


@dataclass(frozen=True)
class Check:
    """One check's outcome: ``failed`` (the estimate is unreliable), its statistic and p-value, and
    one sentence saying what it found."""

    name: str
    failed: bool
    statistic: float
    p_value: float
    finding: str

    def to_json(self) -> dict:
        return {
            "check": self.name,
            "failed": self.failed,
            "statistic": self.statistic,
            "p_value": self.p_value,
            "finding": self.finding,
        }


def foreign(p_value: float, size: float, least: float) -> bool:
    """A check's rule: the finding is improbable under the map (p < :data:`ALPHA`) and at least as
    large as ``least`` (its size ``size``: a share of rows, a distance)."""
    return p_value < ALPHA and size >= least


def outside_support(batch_margins: np.ndarray, reference_margins: np.ndarray) -> np.ndarray:
    """True for each margin beyond the reference margins' range (a margin on an end is inside)."""
    return (batch_margins < reference_margins.min()) | (batch_margins > reference_margins.max())


def support_check(outside: int, n: int, reference_margins: np.ndarray) -> Check:
    """``outside`` of ``n`` rows beyond the reference margins' range (module docstring)."""
    low, high = float(reference_margins.min()), float(reference_margins.max())
    share = 2.0 / (len(reference_margins) + 1.0)
    from scipy import stats  # imported when a batch is checked: not on every command's start

    p_value = float(stats.binom.sf(outside - 1, n, share)) if outside else 1.0
    failed = foreign(p_value, outside / n, SUPPORT_SHARE)
    finding = f"{outside} of {n} rows ({outside / n:.1%}) have margins outside the reference's [{low:.4g}, {high:.4g}]" + (
        ": the map is extrapolated there" if failed else ""
    )
    return Check("support", failed, outside / n, p_value, finding)


def absent_classes_check(absent: list[int], priors: np.ndarray, reference_priors: np.ndarray) -> Check:
    """How much more of the batch, by EM, than the map itself gives them lies in the classes the
    reference rows never had (the map has not seen them). Fails when the excess is
    :data:`SUPPORT_SHARE` of the rows or more (no test: the share is the finding)."""
    share, own = float(priors[absent].sum()), float(reference_priors[absent].sum())
    failed = share - own >= SUPPORT_SHARE
    finding = f"the batch puts {share:.1%} of its rows (by EM) in classes its reference rows never had, {absent}; the map itself {own:.1%}"
    return Check("classes the map has not seen", failed, share - own, 0.0 if failed else 1.0, finding)


def weighted_ks(batch: np.ndarray, reference: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    """(D, m_e): the largest distance between the batch's empirical distribution function and the
    weighted one of ``reference``, evaluated at every value of either (ties counted at once), and the
    weighted sample's effective size."""
    points = np.unique(np.concatenate([batch, reference]))
    batch_cdf = np.searchsorted(np.sort(batch), points, side="right") / len(batch)
    order = np.argsort(reference, kind="stable")
    cumulative = np.concatenate([[0.0], np.cumsum(weights[order])]) / weights.sum()
    reference_cdf = cumulative[np.searchsorted(reference[order], points, side="right")]
    return float(np.max(np.abs(batch_cdf - reference_cdf))), float(weights.sum() ** 2 / np.sum(weights * weights))


def shift_check(
    batch_margins: np.ndarray, reference_margins: np.ndarray, reference_labels: np.ndarray, prior_ratio: np.ndarray
) -> Check:
    """The weighted two-sample test beyond label shift (module docstring); ``prior_ratio`` pi' / pi."""
    weights = prior_ratio[reference_labels]
    distance, effective = weighted_ks(batch_margins, reference_margins, weights)
    n = len(batch_margins)
    from scipy import stats

    p_value = float(stats.kstwobign.sf(distance * np.sqrt(n * effective / (n + effective))))
    failed = foreign(p_value, distance, SHIFT_DISTANCE)
    finding = f"the margins' distance to the reference's under label shift alone is {distance:.3f} (Kolmogorov-Smirnov, p = {p_value:.2g})"
    if failed:
        finding += ": the scores moved in a way label shift does not explain"
    return Check("beyond label shift", failed, distance, p_value, finding)
