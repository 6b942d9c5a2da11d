"""Score records for tests of what reads them: :class:`ScoreRecord` with the fields a test names, the rest neutral."""

from __future__ import annotations

from typing import Any

from anchorage.invariants.results import GateResult
from anchorage.scoring.records import ScoreRecord

NEUTRAL: dict[str, Any] = {
    "task": "t", "artifact": None, "gradable": False, "raw": 0.0, "raw_before_gates": 0.0, "oracle_raw": 1.0,
    "oracle_source": "oracle", "baseline_raw": 0.0, "baseline_source": "task configuration", "gap": 1.0,
    "bo_branch": "", "o_eval": 0.0, "bo_eval": -1.0, "scoring_version": "test",
}


def score_record(**fields: Any) -> ScoreRecord:
    """A score record of ``fields`` over :data:`NEUTRAL`."""
    return ScoreRecord(**{**NEUTRAL, **fields})


def gate(name: str, status: str, severity: str = "hard") -> GateResult:
    """A gate result of the form ``range`` on path ``x``."""
    return GateResult(name=name, form="range", paths=("x",), status=status, severity=severity)  # type: ignore[arg-type]
