"""Errors raised by the library. The command line maps each to one stderr line and an exit code.

Every message names the thing at fault, the rule and the value, e.g.
``preds.npy: scores contain NaN (first at row 12, column 3)``.
"""

from __future__ import annotations

import re


class CalibError(ValueError):
    """Base class: a problem the user can fix (a ValueError, so ``except ValueError`` catches it).
    The command line prints ``calib: error: <message>`` and exits with code 2. Messages name the
    thing at fault in the library's terms, never a command-line flag."""

    def __init__(self, message: str, *, cli_hint: str | None = None):
        super().__init__(message)
        #: The command-line flag that fixes it (e.g. "--labels FILE"); the CLI appends it, the library does not.
        self.cli_hint = cli_hint


class InputError(CalibError):
    """An input file or array breaks the input contract (missing, unreadable, NaN, wrong shape...)."""


class BundleError(CalibError):
    """A bundle directory cannot be written or fails verification on load."""


class NotFittedError(CalibError):
    """A calibrator asked to transform, build sets or save before it was fitted (or loaded)."""


class UsageError(CalibError):
    """Options that do not fit together (unknown method, option the method does not take...)."""


class ExportError(CalibError):
    """A fitted calibrator that cannot be written in another format (e.g. an ONNX graph), with why."""


#: How a calib error raised on another process's worker reads in the traceback text its engine reports.
_WORKER_ERROR = re.compile(r"calib\.errors\.(\w+): ([^\n]*)")


def error_from_worker(text: str) -> CalibError | None:
    """The calib error that the last line "calib.errors.<Name>: <message>" of an engine's error
    text (a Spark task's Python traceback, a Ray task's) names, to raise on the driver as itself,
    one line; None when the text holds none."""
    found = _WORKER_ERROR.findall(text)
    if not found:
        return None
    name, message = found[-1]
    error = globals().get(name)
    return (error if isinstance(error, type) and issubclass(error, CalibError) else InputError)(message.strip())
