"""calib: calibrate classifier logits, and measure how far probabilities are from trustworthy.

The Python API (docs/api.md): ``calib.evaluate(scores, labels, ...) -> Report``,
``calib.calibrator(name, **options)`` with ``fit / predict_proba / predict_sets / save``,
``calib.load(bundle)``, ``calib.compare(ref, new)`` (what changed between two batches), the functional metrics ``calib.metrics.ece(scores, labels)`` and so on,
and ``calib.InputError`` (a ValueError). The public names load on first use (PEP 562), so
``import calib`` and the command line pay only for the modules a command needs.
"""

import importlib as _importlib

from ._version import __version__ as __version__

#: public name -> the module that defines it
_PUBLIC = {
    "Bundle": ".bundle",
    "State": ".bundle",
    "read_bundle": ".bundle",
    "write_bundle": ".bundle",
    "Calibrator": ".calibrators",
    "TemperatureScaling": ".calibrators",
    "BundleError": ".errors",
    "CalibError": ".errors",
    "InputError": ".errors",
    "ExportError": ".errors",
    "NotFittedError": ".errors",
    "UsageError": ".errors",
    "EvaluationRequest": ".evaluation.request",
    "Predictions": ".io",
    "read_predictions": ".io",
    "METRICS": ".metrics",
    "MetricConfig": ".metrics",
    "apply_calibrator": ".pipeline",
    "fit_calibrator": ".pipeline",
    "load_calibrator": ".pipeline",
    "save_calibrator": ".pipeline",
    "CALIBRATORS": ".registry",
    "calibrator_class": ".registry",
    "Calibration": ".api",
    "Report": ".api",
    "calibrator": ".api",
    "evaluate": ".api",
    "estimate": ".api",
    "EstimationSettings": ".estimation.report",
    "load": ".api",
    "sample_path": ".api",
    "compare": ".drift",
    "ComparisonRequest": ".drift",
    "ComparisonReport": ".drift",
}


#: subpackages reachable as attributes without their own import (``calib.metrics.ece(...)``)
_SUBPACKAGES = ("metrics",)


def __getattr__(name):
    if name in _SUBPACKAGES:
        return _importlib.import_module(f".{name}", __name__)
    if name not in _PUBLIC:
        raise AttributeError(f"module 'calib' has no attribute {name!r}")
    value = getattr(_importlib.import_module(_PUBLIC[name], __name__), name)
    globals()[name] = value  # kept: later lookups skip this hook
    return value


def __dir__():
    return sorted([*(name for name in globals() if not name.startswith("_") or name.startswith("__")), *_PUBLIC])


__all__ = sorted(["__version__", *_PUBLIC])
