"""Errors raised by the library. The command line maps each to one stderr line and an exit code.

Every message names the thing at fault, the rule and the value, e.g.
``preds.npy: scores contain NaN (first at row 12, column 3)``.
"""

from __future__ import annotations


class CalibError(Exception):
    """Base class: a problem the user can fix. The CLI prints ``calib: error: <message>``, exit 2."""


class InputError(CalibError):
    """An input file or array breaks the contract of cli.md (missing, unreadable, NaN, wrong shape...)."""


class BundleError(CalibError):
    """A bundle directory cannot be written or fails verification on load."""


class UsageError(CalibError):
    """Options that do not fit together (unknown method, option the method does not take...)."""
