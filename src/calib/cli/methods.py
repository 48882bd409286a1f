"""`calib methods`: the calibrators and metrics, one line each."""

from __future__ import annotations

from ..api import CALIBRATORS
from . import render
from .fit import FLAG_OPTIONS


def methods() -> None:
    """List the calibrators (with their options) and the metrics.

    Example: calib methods
    """
    from ..api import METRICS

    render.methods_table(CALIBRATORS, METRICS, FLAG_OPTIONS)
