"""Mass rescaling, ``mr`` (paper 000, section 3.2, eq. 6; calibrators.md).

With C = C_alpha(x), P_in = sum_{y in C} p_y and P_out = sum_{y not in C} p_y:
  p~_y = p_y (1 - alpha) / P_in  for y in C,   p~_y = p_y alpha / P_out  otherwise,
the KL projection argmin_{q(C) = 1 - alpha} KL(q || p) (paper 000, appendix A). Rows with an empty
or full set, or with P_in or P_out below 1e-12, are left unchanged and counted.
"""

from __future__ import annotations

import numpy as np

from .conformal import EMPTY, FEASIBLE, FULL, TINY_MASS
from .set_based import SetCalibrator

#: Below this in-set or out-of-set mass the rescaling factor is not trusted (calibrators.md).
MIN_MASS = 1e-12


class MassRescaling(SetCalibrator):
    name = "mr"
    summary = "conformal mass rescaling: put exactly 1 - alpha of the mass on the conformal set (paper 000)"

    def _factors(self, probs, in_set):
        """Per row: log((1 - alpha) / P_in), log(alpha / P_out) (0 for rows left unchanged), category."""
        alpha = self.options.alpha
        p_in = np.sum(probs, axis=1, where=in_set)
        p_out = np.sum(probs, axis=1, where=~in_set)
        size = in_set.sum(axis=1)
        category = np.full(len(probs), FEASIBLE, dtype=np.int8)
        category[(p_in < MIN_MASS) | (p_out < MIN_MASS)] = TINY_MASS
        category[size == 0] = EMPTY
        category[size == in_set.shape[1]] = FULL
        ok = category == FEASIBLE
        shift_in = np.where(ok, np.log1p(-alpha) - np.log(np.where(ok, p_in, 1.0)), 0.0)
        shift_out = np.where(ok, np.log(alpha) - np.log(np.where(ok, p_out, 1.0)), 0.0)
        return shift_in, shift_out, category

    def calibrate(self, logits, log_probs, probs, scores, in_set):
        """log p~ = log p + log((1 - alpha) / P_in) in the set, + log(alpha / P_out) outside."""
        shift_in, shift_out, category = self._factors(probs, in_set)
        log_probs += shift_out[:, None]
        np.add(log_probs, (shift_in - shift_out)[:, None], out=log_probs, where=in_set)
        return log_probs, category

    def calibrate_probs(self, logits, log_probs, probs, scores, in_set):
        """p~ = p (1 - alpha) / P_in in the set, p alpha / P_out outside: no exp needed."""
        shift_in, shift_out, category = self._factors(probs, in_set)
        probs *= np.exp(shift_out)[:, None]
        np.multiply(probs, np.exp(shift_in - shift_out)[:, None], out=probs, where=in_set)
        return probs, category
