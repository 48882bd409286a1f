"""msp: V = 1 - p_y (MAPIE's LAC, TorchCP's THR)."""

from .base import Score


class MaxSoftmax(Score):
    name = "msp"
    order = 0
    randomizable = False

    def summed_terms(self, options, k):
        return 1  # one subtraction: equal scores come from equal probabilities, compared exactly

    def direct(self, probs, options):
        return 1.0 - probs

    def onnx(self, graph, probs, options):
        return graph.op("Sub", graph.const(1.0), probs)


SCORE = MaxSoftmax()
