"""Hostile artifacts against the value rule: quoted numbers past the gates, and huge exponents.

The smoke task's hard gates: the storage room holds 250 m³ (``space_within_room``) and the binding
flag is 0 or 1 (``binding_bit``). An infeasible answer keeps the scored metrics at the anchor and
quotes the infeasible values, hoping the gates read "missing evidence" (a warning) while nothing else
changes. The honest record: the gates read the quoted numbers like the scorer does → hard gate, O-Eval
0, BO-Eval −1. A 247-byte ``1E+999999999`` is a non-numeric value for both — scored, not a crash.
"""

from __future__ import annotations

import json
import resource

import pytest

from anchorage.runtime.local import sandbox
from anchorage.tasks import Task
from hostile.conftest import RunAttack

pytestmark = pytest.mark.sandbox


def _artifact_code(task: Task, change: dict[str, str]) -> str:
    text = json.dumps(json.loads(task.expected_result_path.read_text()))
    for old, new in change.items():
        assert old in text, old
        text = text.replace(old, new)
    return f"open('/root/results/{task.artifact_name}', 'w').write({text!r})\n"


def test_quoted_infeasible_values_still_hit_the_hard_gates(attack: RunAttack, mech: sandbox.Mechanism,
                                                           smoke_task: Task) -> None:
    code = _artifact_code(smoke_task, {
        '"space_used_m3": 250.0': '"space_used_m3": "374.39"',           # over the 250 m3 room
        '"capacity_binding": 1': '"capacity_binding": "0.37"',           # a decision bit of 0.37
        '"total_annual_cost": 6843.674463': '"total_annual_cost": "6843.674463"',  # scored, quoted
    })
    result = attack(code, mech)
    assert result.phase_reason == ("Succeeded", "completed"), result.record
    score = result.score
    assert score["hard_gate_failed"] is True
    assert score["o_eval"] == 0.0 and score["bo_eval"] == -1.0
    failed = {g["name"] for g in score["gates"] if g["status"] == "failed" and g["severity"] == "hard"}
    assert {"space_within_room_range", "binding_bit_finite_domain"} <= failed, failed
    cost = next(m for m in score["metrics"] if m["path"] == "experiment_result.total_annual_cost")
    assert cost["status"] == "scored" and "coerced" in cost["reason"]  # the same number for both readers
    assert score["raw_before_gates"] == pytest.approx(1.0)


def test_huge_exponents_are_non_numeric_for_both_and_cost_nothing(attack: RunAttack, mech: sandbox.Mechanism,
                                                                  smoke_task: Task) -> None:
    code = _artifact_code(smoke_task, {
        '"space_multiplier": 10.48549': '"space_multiplier": 1E+999999999',
        '"space_used_m3": 250.0': '"space_used_m3": "1E+999999999"',
    })
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = attack(code, mech)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.phase_reason == ("Succeeded", "completed"), result.record  # scored: never an infra failure
    score = result.score
    multiplier = next(m for m in score["metrics"] if m["path"] == "experiment_result.space_multiplier")
    assert multiplier["status"] == "non_numeric" and "beyond ±400" in multiplier["reason"]
    gates = {g["name"]: g for g in score["gates"]}
    assert gates["multiplier_nonneg_sign"]["status"] == "missing"   # missing evidence: a warning
    assert gates["space_within_room_range"]["status"] == "missing"
    assert score["o_eval"] < 1.0 and not score["hard_gate_failed"]
    assert grown_mib < 100, grown_mib
