"""The score record: what one scored artifact produced, with every input needed to recompute it.

Built by :mod:`anchorage.scoring.scorer`; consumed by ``anchorage score --json``, the local engine
(``score.json`` in the trial folder), the operator (ScoringRun status) and the leaderboard. Both drivers pass the
record itself into the trial's record (``TrialRecord.apply_score``); ``to_dict()`` is what ``score.json`` holds
(the protocol steps add their blocks beside it) and :meth:`ScoreRecord.from_dict` reads it back where it is read
(the operator takes the verifier's from the store). Field meanings are documented in docs/design-notes.md
"Scoring".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from anchorage.invariants.results import GateResult
from anchorage.scoring.profiles import PAPER

SCORER_VERSION = "anchorage-scorer/1"


@dataclass(slots=True)
class MetricResult:
    """One metric of one artifact: the inputs of its reward, the reward and why.

    ``scorer._result`` passes the fields positionally, in this order (keep the two in step).
    """

    path: str
    value: Any                      # as read from the artifact (summarised when not a scalar)
    number: float | None            # the number the reward used, after the value rule
    reward: float | None            # None when excluded
    status: str                     # scored | missing | non_numeric | domain_violation | endpoint_invalid | excluded
                                    # | invalid (the tbmm-report-2026-09 profile's validity rules)
    reason: str
    mode: str
    direction: str
    normalization_direction: str
    anchor: float
    oracle_value: float | None
    baseline_value: float | None
    outstanding_value: float | None
    rel_scale: float
    abs_scale: float
    weight: float
    configured_weight: float
    domain: str | None
    unit: str | None
    band: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "value": self.value, "number": self.number, "reward": self.reward,
            "status": self.status, "reason": self.reason, "mode": self.mode, "direction": self.direction,
            "normalization_direction": self.normalization_direction, "anchor": self.anchor,
            "oracle_value": self.oracle_value, "baseline_value": self.baseline_value,
            "outstanding_value": self.outstanding_value, "rel_scale": self.rel_scale,
            "abs_scale": self.abs_scale, "weight": self.weight, "configured_weight": self.configured_weight,
            "domain": self.domain, "unit": self.unit, "band": dict(self.band),
        }


@dataclass(slots=True)
class ScoreRecord:
    """One artifact scored against one task. ``to_dict()`` is the JSON record of DESIGN.md."""

    task: str
    artifact: str | None
    gradable: bool
    raw: float
    raw_before_gates: float
    oracle_raw: float
    oracle_source: str
    baseline_raw: float
    baseline_source: str
    gap: float
    bo_branch: str
    o_eval: float
    bo_eval: float
    scoring_version: str
    profile: str = PAPER.name       # the scoring profile that made this record (records from before profiles: paper)
    profile_ref: str = PAPER.ref    # name@version
    anchor_source: str = ""         # which anchors the profile scored against (paper / errata ids / compat)
    scorer_version: str = SCORER_VERSION
    recovered_from: str | None = None
    recovery_note: str = ""
    hard_gate_failed: bool = False
    penalty: str = ""
    error: str | None = None
    metrics: list[MetricResult] = field(default_factory=list)
    gates: list[GateResult] = field(default_factory=list)
    obligations: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task, "artifact": self.artifact, "gradable": self.gradable,
            "raw": self.raw, "raw_before_gates": self.raw_before_gates, "oracle_raw": self.oracle_raw,
            "oracle_source": self.oracle_source, "baseline_raw": self.baseline_raw,
            "baseline_source": self.baseline_source, "gap": self.gap, "bo_branch": self.bo_branch,
            "o_eval": self.o_eval, "bo_eval": self.bo_eval, "scoring_version": self.scoring_version,
            "profile": self.profile, "profile_ref": self.profile_ref, "anchor_source": self.anchor_source,
            "scorer_version": self.scorer_version, "recovered_from": self.recovered_from,
            "recovery_note": self.recovery_note, "hard_gate_failed": self.hard_gate_failed,
            "penalty": self.penalty, "error": self.error,
            "metrics": [m.to_dict() for m in self.metrics],
            "gates": [_gate_dict(g) for g in self.gates],
            "obligations": dict(self.obligations),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScoreRecord:
        """Rebuild a record from ``to_dict()`` output (a trial's ``score.json`` where it is read: the operator takes
        the verifier's from the store). Keys that are not the scorer's are left out: the blocks the protocol steps
        add to ``score.json`` (``panel``, ``cbu``) and anything a newer scorer wrote. ValueError when ``data`` is not
        a score record."""
        known = {f.name for f in dataclasses.fields(cls)} - {"metrics", "gates"}
        try:
            fields = {k: v for k, v in data.items() if k in known}
            metrics = [MetricResult(**m) for m in data.get("metrics", [])]
            gates = [GateResult(**{**{k: v for k, v in g.items() if k != "hard_error"}, "paths": tuple(g["paths"])})
                     for g in data.get("gates", [])]
            return cls(**fields, metrics=metrics, gates=gates)
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"not a score record: {exc}") from None

    def reward_map(self) -> dict[str, float]:
        """Harbor ``reward.json``: a flat map of numbers; ``reward`` is O-Eval (in [0, 1])."""
        return {
            "reward": self.o_eval, "raw": self.raw, "oracle_raw": self.oracle_raw,
            "baseline_raw": self.baseline_raw, "o_eval": self.o_eval, "bo_eval": self.bo_eval,
            "gradable": 1.0 if self.gradable else 0.0, "hard_gate_failed": 1.0 if self.hard_gate_failed else 0.0,
        }


def _gate_dict(gate: GateResult) -> dict[str, Any]:
    """``GateResult.to_dict()`` without its deep copy (hot when thousands of records are written)."""
    values = gate.values
    safe = dict(values) if all(type(v) is str for v in values.values()) else _json_safe(values)  # invariants: text
    return {"name": gate.name, "form": gate.form, "paths": list(gate.paths), "status": gate.status,
            "severity": gate.severity, "message": gate.message, "values": safe, "hard_error": gate.hard_error}


def _json_safe(value: Any) -> Any:
    """Gate values may hold NaN/inf read from an artifact: write them as strings (JSON has no literal)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value
