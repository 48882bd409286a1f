"""Whether a calibration map still holds on a batch, read on the batch's rows that have labels.

An estimate for the batch's other rows assumes the map holds there. The rows with labels test it,
at the map's own level: a temperature beta applied to the batch's calibrated log-probabilities,
q_i(beta) = softmax(beta log q_i) (q the probabilities under the batch's priors, as the shifted
estimates take them), fitted by maximum likelihood. A map that still holds has beta = 1; one that
decayed (the scores grew or shrank since the fit, a new concept) moves it. The profile-likelihood
interval of beta at the level, {beta: 2 (l(beta_hat) - l(beta)) <= chi2_1(level)}, read against
the band [1 / (1 + t), 1 + t] (t = :data:`TOLERANCE`) of temperatures too small to matter, gives
the gates' three outcomes:

    broken        the interval lies outside the band (the map no longer holds)
    holds         the interval lies inside the band
    inconclusive  otherwise (too few labelled rows to tell)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.numerics import log_of_probs, log_softmax

#: Relative change of the temperature within which a map counts as holding
TOLERANCE = 0.1
#: Search range of the fitted temperature beta
BETA_RANGE = (1e-3, 1e3)
HOLDS, BROKEN, INCONCLUSIVE = "holds", "broken", "inconclusive"


@dataclass(frozen=True)
class CalibrationTest:
    """The test's outcome, beta's fit and interval, the band and the rows it read."""

    outcome: str
    beta: float
    interval: tuple[float, float]
    band: tuple[float, float]
    rows: int
    level: float

    @property
    def finding(self) -> str:
        low, high = self.interval
        said = {
            BROKEN: "the calibration map no longer holds on the labelled rows",
            HOLDS: "the calibration map holds on the labelled rows",
            INCONCLUSIVE: "too few labelled rows to tell whether the calibration map holds",
        }[self.outcome]
        return (
            f"{said}: their temperature {self.beta:.3g} ({self.level:g} interval [{low:.3g}, {high:.3g}], "
            f"band [{self.band[0]:.3g}, {self.band[1]:.3g}], {self.rows} rows)"
        )

    def to_json(self) -> dict:
        return {
            "outcome": self.outcome,
            "beta": self.beta,
            "interval": list(self.interval),
            "band": list(self.band),
            "rows": self.rows,
            "level": self.level,
            "finding": self.finding,
        }


def _log_likelihood(log_q: np.ndarray, labels: np.ndarray, beta: float) -> float:
    return float(log_softmax(beta * log_q)[np.arange(len(labels)), labels].sum())


def calibration_test(probs: np.ndarray, labels: np.ndarray, level: float = 0.95) -> CalibrationTest:
    """The test of the module docstring on labelled rows' probabilities (n, K) and labels."""
    from scipy import optimize, stats  # imported when labelled rows are tested: not on every command's start

    log_q = log_of_probs(np.asarray(probs, dtype=np.float64))
    labels = np.asarray(labels, dtype=np.int64)
    low_end, high_end = np.log(BETA_RANGE[0]), np.log(BETA_RANGE[1])
    fit = optimize.minimize_scalar(
        lambda t: -_log_likelihood(log_q, labels, float(np.exp(t))),
        bounds=(low_end, high_end),
        method="bounded",
        options={"xatol": 1e-8},
    )
    beta, best = float(np.exp(fit.x)), -float(fit.fun)
    drop = stats.chi2.ppf(level, 1) / 2.0

    def excess(t: float) -> float:
        return best - _log_likelihood(log_q, labels, float(np.exp(t))) - drop

    ends = []
    for end in (low_end, high_end):
        ends.append(
            float(np.exp(end))
            if excess(end) <= 0
            else float(np.exp(optimize.brentq(excess, min(fit.x, end), max(fit.x, end), xtol=1e-10)))
        )
    band = (1.0 / (1.0 + TOLERANCE), 1.0 + TOLERANCE)
    return CalibrationTest(outcome_of(ends[0], ends[1], band), beta, (ends[0], ends[1]), band, len(labels), level)


def outcome_of(lower: float, upper: float, band: tuple[float, float]) -> str:
    """broken when the interval [lower, upper] lies outside the band (an end on the band's edge is
    inside it), holds when it lies inside, inconclusive otherwise."""
    if upper < band[0] or lower > band[1]:
        return BROKEN
    if band[0] <= lower and upper <= band[1]:
        return HOLDS
    return INCONCLUSIVE
