"""Calibrators: every ``calib fit --method`` plugs in here."""

from .base import Calibrator
from .temperature import TemperatureScaling

__all__ = ["Calibrator", "TemperatureScaling"]
