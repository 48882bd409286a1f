"""What changed between two batches of predictions (REF, NEW): of one model over time, or of two
models on the same kind of rows, and what undoes it (docs/compare.md).

:func:`compare` measures, for both batches and the change between them with its interval:

- the registry's accuracy (top-1, and top-k where asked), Brier score over all K classes and log
  loss, and the accuracy at NEW's class shares (:mod:`calib.drift.analysis`);
- the CORP decompositions of the top-label problem and of the multiclass Brier score
  (:mod:`calib.drift.decomposition`);
- the class priors (label shares; EM's estimate for NEW without labels, :mod:`calib.drift.priors`);

and calls a verdict from tests taken in a fixed order (:mod:`calib.drift.verdict`): a performance
loss or gain, label shift, calibration decay or improvement, another change, or none. The remedy
it implies (:mod:`calib.drift.remedies`) is measured on held-out rows of NEW. The result is a
:class:`~calib.drift.report.ComparisonReport`; its gates are checked by the evaluation's gates
(:mod:`calib.evaluation.gates`) on its changes' replicates. The request
(:class:`~calib.drift.request.ComparisonRequest`) holds every setting and default.

The public names load on first use, so that the command line reads the request's defaults
without the metric stack.
"""

import importlib as _importlib

#: public name -> the module that defines it
_PUBLIC = {
    "compare": ".comparison",
    "remedy": ".comparison",
    "save_remedy": ".comparison",
    "comparison_steps": ".comparison",
    "ComparisonRequest": ".request",
    "GATE_KEYS": ".request",
    "MIN_ROWS": ".request",
    "ComparisonReport": ".report",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'calib.drift' has no attribute {name!r}")
    value = getattr(_importlib.import_module(_PUBLIC[name], __name__), name)
    globals()[name] = value
    return value
