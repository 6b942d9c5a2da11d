"""The ``anchorage`` command.

Each command group lives in its own module under ``anchorage.commands`` and exposes
``register(app: typer.Typer) -> None``; this module only assembles them and turns
:class:`anchorage.errors.AnchorageError` into a clear message and its exit code (2 bad input, 3 an
infrastructure failure; see :mod:`anchorage.commands`).
Command modules import their heavy dependencies inside the command functions, so
``anchorage --help`` stays fast.
"""

from __future__ import annotations

import sys
from types import FunctionType

import typer

from anchorage import __version__, commands
from anchorage.commands import EXIT_BAD_INPUT, EXIT_CODES_HELP, EXIT_INFRASTRUCTURE
from anchorage.errors import AnchorageError, InfrastructureError
from anchorage.registry import declared
from anchorage.text import readable

app = typer.Typer(
    name="anchorage",
    help="Verifiable evaluation campaigns for AI agents on mathematical-modelling tasks.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"anchorage {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Verifiable evaluation campaigns for AI agents on mathematical-modelling tasks."""


def _register_commands() -> None:
    for register in declared(commands.__name__, commands.__path__, "register", FunctionType):
        register(app)


_register_commands()


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except InfrastructureError as exc:
        typer.echo(f"error: {readable(str(exc))}", err=True)
        sys.exit(EXIT_INFRASTRUCTURE)
    except AnchorageError as exc:
        typer.echo(f"error: {readable(str(exc))}", err=True)   # a message may quote what an agent wrote
        sys.exit(EXIT_BAD_INPUT)
