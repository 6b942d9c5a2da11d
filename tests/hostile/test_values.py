"""Hostile artifacts against the value rule: quoted numbers past the gates, and huge exponents.

An infeasible answer keeps the scored metrics at the anchor and quotes the infeasible values, hoping
the gates read "missing evidence" (a warning) while nothing else changes. The honest record: the gates
read the quoted numbers like the scorer does → the hard gate (the heliostat's mirror sides, one of the
seed's hard-gate classes) fails: O-Eval 0, BO-Eval −1. A 247-byte ``1E+999999999`` is a non-numeric
value for both — scored, not a crash.
"""

from __future__ import annotations

import json
import resource

import pytest

from anchorage.runtime.local import sandbox
from anchorage.tasks import Task, load_task, resolve_task
from hostile.conftest import RunAttack

pytestmark = pytest.mark.sandbox


def _artifact_code(task: Task, change: dict[str, str]) -> str:
    text = json.dumps(json.loads(task.expected_result_path.read_text()))
    for old, new in change.items():
        assert old in text, old
        text = text.replace(old, new)
    return f"open('/root/results/{task.artifact_name}', 'w').write({text!r})\n"


def test_quoted_infeasible_values_still_hit_the_hard_gates(attack: RunAttack, mech: sandbox.Mechanism) -> None:
    """Heliostat field, the seed's own hard-gate class (a mirror side below 2 m): every scored value at the
    anchor, the two infeasible mirror sides quoted."""
    task = load_task(resolve_task("cumcm-2023-a-heliostat-field"))
    data = json.loads(task.expected_result_path.read_text())
    design = data["reproduced"]["design_summary"][1]
    design["mirror_width_m"], design["mirror_height_m"] = "1.5", "1.5"
    code = f"open('/root/results/{task.artifact_name}', 'w').write({json.dumps(data)!r})\n"
    result = attack(code, mech, task=task)
    assert result.phase_reason == ("Succeeded", "completed"), result.record
    score = result.score
    assert score["profile"].startswith("paper")
    assert score["hard_gate_failed"] is True
    assert score["o_eval"] == 0.0 and score["bo_eval"] == -1.0
    failed = {g["name"] for g in score["gates"] if g["status"] == "failed" and g["severity"] == "hard"}
    assert {"q2_mirror_width_range", "q2_mirror_height_range"} <= failed, failed
    assert score["raw_before_gates"] == pytest.approx(1.0)  # without the gates it would have scored 1.0


def test_the_gates_read_quoted_numbers_like_the_scorer(attack: RunAttack, mech: sandbox.Mechanism,
                                                       smoke_task: Task) -> None:
    """The smoke task's gates are warnings in the paper profile: a quoted infeasible value is reported as a
    failed check (read as the number it is), not as missing evidence."""
    code = _artifact_code(smoke_task, {
        '"space_used_m3": 250.0': '"space_used_m3": "374.39"',
        '"capacity_binding": 1': '"capacity_binding": "0.37"',
        '"total_annual_cost": 6843.674463': '"total_annual_cost": "6843.674463"',
    })
    result = attack(code, mech)
    gates = {g["name"]: g for g in result.score["gates"]}
    assert gates["space_within_room_range"]["status"] == "failed"
    assert gates["binding_bit_finite_domain"]["status"] == "failed"
    cost = next(m for m in result.score["metrics"] if m["path"] == "experiment_result.total_annual_cost")
    assert cost["status"] == "scored" and "coerced" in cost["reason"]  # the same number for both readers


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
