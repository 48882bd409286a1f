"""Progress of long library work, for whoever shows it: a fit that iterates says where it is
(``report("Newton step 12")``), and the caller that wants to show it installs a callback for the
duration of the work (``with reporting(callback): ...``; the command line's progress display on a
terminal). Without one, reports go nowhere. The callback is held per thread and per task
(``contextvars``), so concurrent work reports to its own caller, and a library call never prints."""

from __future__ import annotations

import contextlib
import contextvars
from typing import Callable

_CALLBACK: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar("calib_progress", default=None)


def report(status: str) -> None:
    """Tell the installed callback (if any) where the work is."""
    callback = _CALLBACK.get()
    if callback is not None:
        callback(status)


@contextlib.contextmanager
def reporting(callback: Callable[[str], None] | None):
    """Send the reports of the work inside the block to ``callback``."""
    token = _CALLBACK.set(callback)
    try:
        yield
    finally:
        _CALLBACK.reset(token)
