"""topk: V = r(x, y), so the sets are the top-q classes; randomised r - 1 + u."""

import numpy as np

from ...core import kernels
from .base import Score


class TopK(Score):
    name = "topk"
    order = 4

    def rank_terms(self, options, k):
        return kernels.NO_BASE, np.arange(1.0, k + 1.0)

    def randomised(self, start, probs, u, options):
        return start - (1.0 - u)


SCORE = TopK()
