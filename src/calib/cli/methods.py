"""`calib methods`: the calibrators and metrics, one line each."""

from __future__ import annotations

from . import render
from .fit import FLAG_OPTIONS


def methods() -> None:
    """List the calibrators (with their options) and the metrics.

    Example: calib methods
    """
    from ..reporting.text import method_rows

    render.methods_table(*method_rows(FLAG_OPTIONS))
