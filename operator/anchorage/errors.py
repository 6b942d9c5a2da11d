"""The small set of error types Anchorage raises on purpose.

Every error carries what was wrong and how to fix it, so the CLI (and the operator's status
conditions) can show a user one clear message instead of a traceback.
"""

from __future__ import annotations


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
