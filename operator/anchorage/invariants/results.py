"""The outcome of one gate check, shared by the programmatic checker, the replay checks,
the Lean layer and the score record's ``gates[]``.

A *hard error* (``status == "failed"`` and ``severity == "hard"``) penalises the whole task
(SPEC §4, G.4). Missing evidence (``status == "missing"``) is a warning, never a hard error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

GateStatus = Literal["passed", "failed", "missing"]
Severity = Literal["hard", "warning"]


@dataclass(frozen=True)
class GateResult:
    name: str                      # invariant or replay-check name, unique within the task
    form: str                      # range | ordering | identity | finite_domain | sign | interval | replay
    paths: tuple[str, ...]         # JSON paths the check read
    status: GateStatus
    severity: Severity = "hard"
    message: str = ""              # what was seen and why it passes or fails
    values: dict[str, Any] = field(default_factory=dict)  # the values read, for the record

    @property
    def hard_error(self) -> bool:
        return self.status == "failed" and self.severity == "hard"

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["paths"] = list(self.paths)
        record["hard_error"] = self.hard_error
        return record
