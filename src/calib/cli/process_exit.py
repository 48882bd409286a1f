"""How the `calib` process ends: at once when its command is done, without the interpreter's teardown.

A normal exit of CPython frees every module and object one by one and runs the C++ destructors of
the extensions it loaded: with NumPy, pandas and CatBoost loaded (a V-ECE run) that is 0.1 to 0.2
s, a fifth of a `calib evaluate` of 2,000 x 10 rows (docs/benchmarks.md). Nothing of it is needed
once the command is done: every output is written and closed before the command returns (atomic
writes: a temporary file renamed into place), and the operating system frees the memory.

What a normal exit does that matters is kept: the exit handlers (:mod:`atexit`: coverage, logging,
temporary folders, multiprocessing's children) run, and standard output and error are flushed; a
flush of standard output that fails ends the process with exit 1 when the reader has left (a closed
pipe, as a closed pipe during the command does) and otherwise with one error line and Python's own
status for it, 120. The process then ends with :func:`os._exit`. When any other thread is alive (a
background task, a Dask client), it exits the normal way, which waits for it.

Only the command line ends this way (the process is the program's); :func:`calib.cli.app.main`,
which tests call in-process, still raises :class:`SystemExit`.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

from . import render

#: Python's own exit status when flushing standard output fails at exit.
FLUSH_FAILED = 120


def exit_code(code) -> int:
    """The process exit status of ``SystemExit(code)`` as Python gives it: None is 0, an integer
    itself, anything else (a message) is printed to standard error and gives 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def exit_without_teardown(code) -> None:
    """End the process with ``SystemExit(code)``'s status (:func:`exit_code`) after the exit handlers
    and a flush of standard output and error, skipping the interpreter's teardown; the normal exit
    (raising :class:`SystemExit`) when another thread is alive or this Python has no way to run the
    exit handlers first."""
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if threading.active_count() > 1 or run_exit_handlers is None:
        sys.exit(code)
    status = exit_code(code)
    run_exit_handlers()
    try:
        if sys.stdout is not None:  # None without a console (pythonw)
            sys.stdout.flush()
    except BrokenPipeError:  # the reader left before the end
        status = status or 1
    except (OSError, ValueError) as exc:  # e.g. a full disk under a redirection
        render.error(f"standard output could not be written: {exc}")
        status = status or FLUSH_FAILED
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(status)
