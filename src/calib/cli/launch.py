"""The ``calib`` program's entry point: ``calib --version`` answers from the version module (no NumPy,
no command line parser: 0.07 s where the whole program takes 0.3 s to load); every other command
loads the program (:func:`calib.cli.app.console_main`)."""

from __future__ import annotations

import sys


def console_main() -> None:
    if sys.argv[1:] == ["--version"]:
        from .._version import version_line

        print(version_line())
        return
    from .app import console_main as run

    run()
