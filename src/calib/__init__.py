"""calib: calibrate classifier logits, and measure how far probabilities are from trustworthy.

The public names below load on first use (PEP 562), so ``import calib`` and the command line pay
only for the modules a command needs: ``apply`` never imports the metric stack, ``evaluate`` never
imports the conformal calibrators' training code.
"""

import importlib

__version__ = "0.1.0"

#: public name -> the module that defines it
_PUBLIC = {
    "Bundle": ".bundle", "State": ".bundle", "read_bundle": ".bundle", "write_bundle": ".bundle",
    "Calibrator": ".calibrators", "TemperatureScaling": ".calibrators",
    "BundleError": ".errors", "CalibError": ".errors", "InputError": ".errors", "UsageError": ".errors",
    "Predictions": ".io", "read_predictions": ".io",
    "METRICS": ".metrics", "MetricConfig": ".metrics",
    "apply_calibrator": ".pipeline", "fit_calibrator": ".pipeline", "load_calibrator": ".pipeline",
    "save_calibrator": ".pipeline",
    "CALIBRATORS": ".registry", "calibrator_class": ".registry",
    "evaluate": ".evaluation",
}


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'calib' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name], __name__), name)
    globals()[name] = value  # kept: later lookups skip this hook
    return value


def __dir__():
    return sorted([*globals(), *_PUBLIC])


__all__ = sorted(["__version__", *_PUBLIC])
