"""aps: V = A(x, y), the sum of p over the classes ranked at or above y (Romano, Sesia & Candès
2020); randomised V - (1 - u) p_y."""

from ...core import kernels
from .base import Score


class AdaptivePredictionSets(Score):
    name = "aps"
    order = 1

    def rank_terms(self, options, k):
        return kernels.CUMULATIVE, None

    def randomised(self, start, probs, u, options):
        start -= (1.0 - u) * probs
        return start


SCORE = AdaptivePredictionSets()
