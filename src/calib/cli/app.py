"""The `calib` command: parses, calls the library, renders; library errors become one line, exit 2."""

from __future__ import annotations

import os
import sys

import typer

from .. import __version__
from ..errors import CalibError
from . import render
from .apply import apply
from .diagnose import diagnose
from .evaluate import evaluate, merge_states
from .fit import fit
from .methods import methods
from .synth import app as synth_app

app = typer.Typer(
    name="calib",
    help="Calibrate classifier logits: fit, apply, evaluate, diagnose. Exit codes: 0 ok, 1 a gate failed, 2 usage or input error.",
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
)
app.command()(fit)
app.command()(apply)
app.command()(evaluate)
app.command()(diagnose)
app.command("merge-states")(merge_states)
app.command()(methods)
app.add_typer(synth_app, name="synth")


def _version(value: bool) -> None:
    if value:
        from ..kernels import BACKEND

        print(f"calib {__version__} (kernels: {BACKEND})")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version.")) -> None:
    """Calibrate classifier logits: fit, apply, evaluate."""


def main() -> None:
    """Console entry point: maps errors to exit codes (0 ok, 1 gate failed, 2 usage/input error)."""
    try:
        app()
    except CalibError as exc:
        render.error(str(exc) if exc.cli_hint is None else f"{exc} ({exc.cli_hint})")
        sys.exit(2)
    except KeyboardInterrupt:
        render.error("interrupted")
        sys.exit(130)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except (OSError, MemoryError) as exc:
        if os.environ.get("CALIB_DEBUG"):
            raise
        render.error(f"{exc.__class__.__name__}: {exc}")
        sys.exit(2)


if __name__ == "__main__":
    main()
