"""calib: calibrate classifier logits, and measure how far probabilities are from trustworthy."""

__version__ = "0.1.0"

from .bundle import Bundle, State, read_bundle, write_bundle  # noqa: E402
from .calibrators import Calibrator, TemperatureScaling  # noqa: E402
from .errors import BundleError, CalibError, InputError, UsageError  # noqa: E402
from .io import Predictions, read_predictions  # noqa: E402
from .metrics import METRICS, MetricConfig  # noqa: E402
from .pipeline import apply_calibrator, fit_calibrator, load_calibrator, save_calibrator  # noqa: E402
from .registry import CALIBRATORS, calibrator_class  # noqa: E402



def __getattr__(name):
    """``calib.evaluate`` on first use: the metric stack is not needed by fit/apply (start-up time)."""
    if name == "evaluate":
        from .evaluate import evaluate

        return evaluate
    raise AttributeError(f"module 'calib' has no attribute {name!r}")


__all__ = [
    "Bundle", "BundleError", "CALIBRATORS", "CalibError", "Calibrator", "InputError", "METRICS",
    "MetricConfig", "Predictions", "State", "TemperatureScaling", "UsageError", "__version__",
    "apply_calibrator", "calibrator_class", "evaluate", "fit_calibrator", "load_calibrator",
    "read_bundle", "read_predictions", "save_calibrator", "write_bundle",
]
