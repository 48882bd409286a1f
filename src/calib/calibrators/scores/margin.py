"""margin: V = max_{y' != y} p_y' - p_y, how far the label's probability falls short of the best
other class's (Löfström et al. 2015; TorchCP's Margin). Needs no ranking beyond the top two."""

import numpy as np

from .base import Score


class Margin(Score):
    name = "margin"
    order = 5
    randomizable = False

    def summed_terms(self, options, k):
        return 1  # one subtraction: equal scores come from equal probabilities, compared exactly

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

    def onnx(self, graph, probs, options):
        """The best other class's p: the second largest p in the top class's column (TopK keeps the
        lower index first among ties, as argmax does), the largest elsewhere."""
        ranked, order = graph.op("TopK", probs, graph.const([2], np.int64), axis=1, largest=1, sorted=1, outputs=2)
        first, second, top_column = graph.column(ranked, 0), graph.column(ranked, 1), graph.column(order, 0)
        is_top = graph.op("Equal", graph.const(np.arange(graph.n_classes)[None, :], np.int64), top_column)
        return graph.op("Sub", graph.where(is_top, second, first), probs)


SCORE = Margin()
