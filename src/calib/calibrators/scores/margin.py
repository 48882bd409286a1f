"""margin: V = max_{y' != y} p_y' - p_y, how far the label's probability falls short of the best
other class's (Löfström et al. 2015; TorchCP's Margin). Needs no ranking beyond the top two."""

import numpy as np

from .base import Score


class Margin(Score):
    name = "margin"
    order = 5
    randomizable = False

    def direct(self, probs, options):
        probs = np.asarray(probs, dtype=np.float64)
        rows = np.arange(len(probs))
        top = probs.argmax(axis=1)
        without_top = probs.copy()
        without_top[rows, top] = -np.inf
        best_other = np.where(
            np.arange(probs.shape[1]) == top[:, None], without_top.max(axis=1)[:, None], probs[rows, top][:, None]
        )
        return best_other - probs


SCORE = Margin()
