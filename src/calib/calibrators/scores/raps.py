"""raps: V = A(x, y) + lambda max(0, r(x, y) - k_reg) (Angelopoulos, Bates, Malik & Jordan 2021);
randomised V - (1 - u) p_y."""

import numpy as np

from ...core import kernels
from .base import Score


class RegularizedAdaptivePredictionSets(Score):
    name = "raps"
    order = 2
    parameters = ("raps_lambda", "raps_kreg")

    def rank_terms(self, options, k):
        rank = np.arange(1.0, k + 1.0)
        return kernels.CUMULATIVE, options.raps_lambda * np.maximum(rank - options.raps_kreg, 0.0)

    def randomised(self, start, probs, u, options):
        start -= (1.0 - u) * probs
        return start


SCORE = RegularizedAdaptivePredictionSets()
