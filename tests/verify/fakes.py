"""A scripted in-process ModelClient for unit tests of the protocols (the end-to-end tests use the gateway)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from anchorage.errors import InfrastructureError
from anchorage.verify.models import Completion, Message

Script = Callable[[str, int], str]   # (user message, seed) -> reply; raise InfrastructureError to fail a call


class ScriptedClient:
    """Answers each call from a script and records (user message, seed) of every call."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.calls: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def complete(self, messages: list[Message], *, model: str, seed: int | None = None,
                 temperature: float | None = None, run_id: str | None = None) -> Completion:
        user = messages[-1]["content"]
        with self._lock:
            self.calls.append((user, seed or 0))
        return Completion(self.script(user, seed or 0), model=f"{model}-scripted")

    def roles(self) -> list[str]:
        return [u.split("role=", 1)[1].split()[0] for u, _ in self.calls]


HOLDS = "**Verdict**: HOLDS"
HOLE = "**Verdict**: HOLE FOUND\n- Location: step 2\n- Pattern: other\n- Why it breaks: {why}\n- Fixable?: yes"


def fail(message: str = "upstream unreachable") -> str:
    raise InfrastructureError(message)
