"""The `calib` command: parses, calls the library, renders; library errors become one line, exit 2."""

from __future__ import annotations

import os
import sys

import typer

from .._version import version_line
from ..operations import CalibError, keep_freed_memory
from . import render
from .apply import apply
from .compare import compare
from .diagnose import diagnose
from .evaluate import evaluate, merge_states
from .export import export
from .fit import fit
from .methods import methods
from .notebook_imports import skip_notebook_imports
from .options import Command
from .process_exit import exit_without_teardown
from .synth import app as synth_app

try:  # typer 0.2x carries its own copy of click; older typer uses click itself
    from typer._click import exceptions as parser_errors
except ImportError:  # pragma: no cover - depends on the installed typer
    from click import exceptions as parser_errors  # type: ignore[no-redef]


app = typer.Typer(
    name="calib",
    help="Calibrate classifier logits: fit, apply, evaluate, diagnose. Exit codes: 0 ok, 1 a gate failed, 2 usage or input error.",
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
)
app.command(cls=Command)(fit)
app.command(cls=Command)(apply)
app.command(cls=Command)(evaluate)
app.command(cls=Command)(diagnose)
app.command(cls=Command)(compare)
app.command(cls=Command)(export)
app.command("merge-states", cls=Command)(merge_states)
app.command(cls=Command)(methods)
app.add_typer(synth_app, name="synth")


def _version(value: bool) -> None:
    if value:
        print(version_line())
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version.")) -> None:
    """Calibrate classifier logits: fit, apply, evaluate."""


#: The exit code of an internal error (a bug, not the input): never 1, which a CI job reads as a failed gate.
INTERNAL_ERROR = 3


def main() -> None:
    """Console entry point: maps errors to exit codes (0 ok, 1 gate failed, 2 usage/input error, 3
    internal error). Usage errors of the parser read like every other error: one line, exit 2; any
    other exception is a bug in calib, said in one line (``CALIB_DEBUG=1`` shows the traceback)."""
    keep_freed_memory()
    skip_notebook_imports()
    try:
        code = app(standalone_mode=False, prog_name="calib")
    except parser_errors.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx is not None else "calib"
        render.error(f"{exc.format_message()} (see '{command} --help')")
        sys.exit(2)
    except parser_errors.ClickException as exc:
        render.error(exc.format_message())
        sys.exit(exc.exit_code)
    except (typer.Abort, getattr(parser_errors, "Abort", typer.Abort)):
        render.error("interrupted")
        sys.exit(130)
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
    except Exception as exc:  # noqa: BLE001 - the last resort: a bug must not read as a failed gate
        if os.environ.get("CALIB_DEBUG"):
            raise
        message = " ".join(str(exc).split())[:300]
        render.error(
            f"internal error: {exc.__class__.__name__}: {message} (a bug in calib, not in the input: "
            "please report it; CALIB_DEBUG=1 shows the traceback)"
        )
        sys.exit(INTERNAL_ERROR)
    sys.exit(code if isinstance(code, int) else 0)


def console_main() -> None:
    """The ``calib`` program (console script and ``python -m calib``): :func:`main`, then the process
    ends without the interpreter's teardown (:mod:`calib.cli.process_exit`)."""
    code: str | int | None = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    exit_without_teardown(code)


if __name__ == "__main__":
    console_main()
