"""Command groups of the ``anchorage`` CLI: one module per group, each with ``register(app)``.

Shared here: the help texts every command uses for the same thing (one spelling: a task is always
``--task``), the exit codes, and the JSON printer behind every ``--json``.

Exit codes (every command; the root ``--help`` says so): 0 — done, every trial or artifact scored;
1 — a model's failure (a trial Failed, an ungradable artifact, a verdict that did not hold); 2 — bad input
(one message saying what, where and how to fix it); 3 — an infrastructure failure (sandbox, store, gateway,
cluster), which is never a model's zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import typer

from anchorage.text import json_text, readable

EXIT_OK, EXIT_MODEL_FAILURE, EXIT_BAD_INPUT, EXIT_INFRASTRUCTURE = 0, 1, 2, 3

EXIT_CODES_HELP = ("Exit codes: 0 done (every trial or artifact scored); 1 a model's failure (a trial Failed, an "
                   "ungradable artifact, a verdict that did not hold); 2 bad input (one message: what, where, the fix); "
                   "3 an infrastructure failure (never a model's zero).")

TASK_HELP = "Task directory, or a task name looked up in ./tasks, the repo's tasks/ and $ANCHORAGE_TASKS."

JSON_HELP = "Print the result as JSON on stdout (messages go to stderr)."

PROFILE_HELP = ("Scoring profile: paper (default: the seed's rules and anchors), strict (+ this project's feasibility "
                "gates), errata (+ its re-derived anchors) or tbmm-report-2026-09 (the published report's "
                "arithmetic); see docs/design-notes.md 'Scoring profiles'.")


def task_option(required: bool = True) -> Any:
    """The one spelling of a command's task: ``--task`` / ``-t``."""
    return typer.Option(... if required else None, "--task", "-t", help=TASK_HELP)


def phases_exit_code(phases: Iterable[str | None]) -> int:
    """The exit code of a set of finished trials: 3 when any failed for the platform, else 1 when any was the
    model's failure, else 0."""
    seen = {str(p) for p in phases}
    if "InfrastructureFailed" in seen:
        return EXIT_INFRASTRUCTURE
    return EXIT_MODEL_FAILURE if "Failed" in seen else EXIT_OK


def print_json(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout (NaN refused: an unknown number is null); safe to print whatever
    an agent wrote into it (:func:`anchorage.text.json_text`: no lone surrogate, control characters escaped)."""
    typer.echo(json_text(value, indent=2, allow_nan=False, default=str))


def shown(value: Any) -> str:
    """Text that may hold what an agent wrote, for a terminal line (:func:`anchorage.text.readable`)."""
    return readable(value)


def markup(value: Any) -> str:
    """:func:`shown` for Rich: also escaped, so a ``[tag]`` in it is printed, never taken for markup."""
    from rich.markup import escape

    return escape(readable(value))


def legacy_task_argument() -> Any:
    """The positional task some commands took before ``--task`` was the one spelling (hidden; still read)."""
    return typer.Argument(None, hidden=True, show_default=False)


def one_task(option: str | None, positional: str | None, command: str) -> str:
    """The task of a command from ``--task`` (or, for old scripts, the hidden positional, with a note)."""
    from anchorage.errors import InputError

    if option is not None and positional is not None and option != positional:
        raise InputError(f"two tasks given: --task {option} and {positional}", hint="give the task once, as --task")
    if option is None and positional is None:
        raise InputError(f"anchorage {command} needs a task", hint=f"anchorage {command} --task NAME_OR_DIR")
    if option is None:
        typer.secho(f"note: the task is given as --task now: anchorage {command} --task {positional}", err=True,
                    fg="yellow")
    return str(option or positional)
