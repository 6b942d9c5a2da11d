"""The small set of error types Anchorage raises on purpose.

Every error carries what was wrong and how to fix it, so the CLI (and the operator's status
conditions) can show a user one clear message instead of a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AnchorageError(Exception):
    """Base class: ``message`` says what was wrong, ``hint`` how to fix it."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  fix: {self.hint}" if self.hint else self.message


class InputError(AnchorageError):
    """Bad user input: a manifest, a task directory, an artifact, a flag."""


class InfrastructureError(AnchorageError):
    """The platform failed (sandbox, storage, gateway, cluster), not the model under test.

    Trials that end in an infrastructure error are marked as such and never scored as a model's zero.
    """


def did_you_mean(name: str, choices: Iterable[str], *, what: str = "") -> str | None:
    """"did you mean 'x'?" for the choices closest to a misspelt ``name`` (None when nothing is close).

    Used by every message about an unknown name a user typed: manifest fields, task names, campaigns,
    profiles, entries.
    """
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.6)
    if not close:
        return None
    return f"did you mean {' or '.join(repr(c) for c in close)}{f' ({what})' if what else ''}?"
