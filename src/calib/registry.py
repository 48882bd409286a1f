"""Name -> calibrator class; unknown names list the valid ones."""

from __future__ import annotations

from .calibrators.base import Calibrator
from .calibrators.temperature import TemperatureScaling
from .errors import UsageError

CALIBRATORS: dict[str, type[Calibrator]] = {cls.name: cls for cls in (TemperatureScaling,)}


def calibrator_class(name: str) -> type[Calibrator]:
    try:
        return CALIBRATORS[name]
    except KeyError:
        raise UsageError(f"unknown method {name!r}; choose one of {', '.join(sorted(CALIBRATORS))}") from None
