"""Estimates for batches without labels: what the calibrated model expects the batch's accuracy, log
loss and Brier score to be (confidence-based performance estimation, as NannyML's CBPE), the same
under the batch's own class priors (EM, Saerens, Latinne and Decaestecker 2002), with intervals that
count the batch's sampling and the calibration map's own error, and the checks that say when such an
estimate cannot be trusted (docs/estimation.md).

- :mod:`.expectations`: each score's realised value on a row, its expectation and variance under the row's
  calibrated probabilities;
- :mod:`.reference`: what an estimate needs of the labelled rows the map was fitted on;
- :mod:`.checks`: the support check and the two-sample test beyond label shift;
- :mod:`.labelled`: the calibration test on the rows of a batch that have labels;
- :mod:`.batch`: the estimates of one batch, their intervals, gates and report.
"""

from .batch import ESTIMATES, BatchEstimate, estimate_batch
from .reference import ReferenceRows

__all__ = ["ESTIMATES", "BatchEstimate", "ReferenceRows", "estimate_batch"]
