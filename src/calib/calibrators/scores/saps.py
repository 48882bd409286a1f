"""saps: V = p_max at rank 1, else p_max + (r(x, y) - 1) lambda (Huang et al. 2024); randomised
u p_max at rank 1, else p_max + (r - 2 + u) lambda."""

import numpy as np

from ...core import kernels
from .base import Score


class SortedAdaptivePredictionSets(Score):
    name = "saps"
    order = 3
    parameters = ("saps_lambda",)

    def rank_terms(self, options, k):
        rank = np.arange(1.0, k + 1.0)
        if options.randomize:  # the rank itself: randomised() takes it
            return kernels.NO_BASE, rank
        return kernels.TOP, (rank - 1.0) * options.saps_lambda

    def randomised(self, start, probs, u, options):
        top = probs.max(axis=1, keepdims=True)
        scores = top + (start - 2.0 + u) * options.saps_lambda
        np.copyto(scores, u * top, where=start == 1.0)
        return scores


SCORE = SortedAdaptivePredictionSets()
