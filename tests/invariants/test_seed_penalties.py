"""The checks behind the seed's G.4 penalty classes that need more than an invariant: the smoke-screen coverage
replay (``smoke_q5_shielding_replay``), the Juneau units (``juneau_units``) and the Olympics coach effect
(``olympics_coach_effect``), on the published answers, the anchors and constructed artifacts.

The scoring consequences (O-Eval 0 and the penalty named under ``paper``; the compatibility profile) are in
``tests/scoring/test_seed_penalties.py``.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anchorage.invariants.gates import check
from anchorage.invariants.replays import get
from anchorage.invariants.replays import smoke_screen as smoke
from anchorage.invariants.replays.juneau_tourism import FIELDS
from anchorage.invariants.replays.olympic_medals import MAX_COACH_GAIN, largest_rise
from anchorage.invariants.units import parse_scale, report_percent_reading

from .anchors import TASKS
from .smoke_grid import grid_counts, hidden_samples, random_clouds

SMOKE, JUNEAU, OLYMPICS = "cumcm-2025-a-smoke-screen", "mcm-2025-b-juneau-tourism", "mcm-2025-c-olympic-medals"
PUBLISHED = json.loads((TASKS.parent / "tests" / "scoring" / "published" / "v4-pro-answers.json")
                       .read_text(encoding="utf-8"))["v4 pro"]


def read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def results(check_name: str, data: Any) -> dict[str, Any]:
    return {r.name: r for r in get(check_name).run(data)}


# --- smoke screen: the seed's coverage replay -------------------------------------------------------------

def seed_times(cloud: smoke._Cloud) -> Any:
    """Every grid time at which the cloud hides at least 7 of the 27 samples: all samples at every step."""
    ring = [(7.0 * math.cos(2 * math.pi * k / 8), 200.0 + 7.0 * math.sin(2 * math.pi * k / 8)) for k in range(8)]
    samples = np.array([(x, y, z) for z in (0.0, 5.0, 10.0) for x, y in [(0.0, 200.0), *ring]])
    t, hidden = hidden_samples(cloud, samples)
    return t[np.sum(hidden, axis=1) >= 7]


def clouds_of(plan: dict[str, Any]) -> list[smoke._Cloud]:
    return [smoke._Cloud(r["target_missile"], r["explode_time_s"], r["explode_x"], r["explode_y"], r["explode_z"])
            for r in plan["q5"]["strategies"]]


def test_the_seed_replay_equals_counting_every_sample_at_every_step() -> None:
    rng = np.random.default_rng(2026)
    groups = [clouds_of(read(TASKS / SMOKE / "tests" / "expected_result.json")),
              clouds_of(read(TASKS / SMOKE / "solution" / "reproduced_result.json"))]
    groups += [random_clouds(rng, int(rng.integers(1, 10)), spread=8.0) for _ in range(12)]
    covering = 0
    for clouds in groups:
        parts, unions = grid_counts(clouds, seed_times)
        assert smoke._seed_replay(clouds) == (parts, unions), clouds
        covering += sum(n > 0 for n in parts)
    assert covering >= 30   # not vacuous: most clouds cover the target for a while


def test_the_whole_target_replay_is_a_lower_bound_of_the_seed_s() -> None:
    """A cloud hiding the whole target hides all 27 samples: part by part and union by union, never more."""
    rng = np.random.default_rng(11)
    for _ in range(12):
        clouds = random_clouds(rng, int(rng.integers(1, 10)), spread=8.0)
        (whole, whole_unions), (seed, seed_unions) = smoke._replay(clouds), smoke._seed_replay(clouds)
        assert all(w <= s for w, s in zip(whole, seed, strict=True))
        assert all(whole_unions[m] <= seed_unions[m] for m in smoke.MISSILES)


@pytest.mark.parametrize("factor", [0.5, 1.0, 1.1, 1.25, 1.4, 1.6, 2.0, 3.0])
@pytest.mark.parametrize("source", ["tests/expected_result.json", "solution/reproduced_result.json"])
def test_the_gate_s_verdict_is_the_full_seed_replay_s(source: str, factor: float) -> None:
    """Claims scaled up and down: the gate (which skips the seed replay where the whole-target one already
    supports a missile's claims) decides as holding every claim to the full seed replay would."""
    plan = read(TASKS / SMOKE / source)
    for row in plan["q5"]["strategies"]:
        row["individual_duration_s"] *= factor
        if isinstance(row.get("durations_s"), dict):
            row["durations_s"] = {m: v * factor for m, v in row["durations_s"].items()}
    claimed = plan["experiment_result"]["q5_union_duration_s"]
    for key in claimed:
        claimed[key] *= factor
    clouds = clouds_of(plan)
    parts, unions = smoke._seed_replay(clouds)
    slack = lambda c: max(smoke.SEED_TOL_ABS, smoke.SEED_TOL_REL * c)  # noqa: E731
    fails = any(r["individual_duration_s"] > n * smoke.REPLAY_DT + slack(r["individual_duration_s"])
                for r, n in zip(plan["q5"]["strategies"], parts, strict=True))
    fails |= any(claimed[m] > unions[m] * smoke.REPLAY_DT + slack(claimed[m]) for m in smoke.MISSILES)
    gate = results("smoke_screen_coverage", plan)["smoke_q5_shielding_replay"]
    assert gate.status == ("failed" if fails else "passed"), gate.message


def test_the_seed_replay_supports_the_published_plan_to_within_its_rounding() -> None:
    """The 27-sample reading of the reference's criterion replays each published part to within 0.08 s."""
    plan = read(TASKS / SMOKE / "tests" / "expected_result.json")
    parts, _ = smoke._seed_replay(clouds_of(plan))
    claimed = [r["individual_duration_s"] for r in plan["q5"]["strategies"]]
    assert max(abs(p * smoke.REPLAY_DT - c) for p, c in zip(parts, claimed, strict=True)) <= 0.08 + 1e-9
    gate = results("smoke_screen_coverage", plan)["smoke_q5_shielding_replay"]
    assert gate.status == "passed" and gate.severity == "hard"


def inflated(claim: float = 9.45) -> dict[str, Any]:
    """The reproduction's plan with its first cloud (3.78 s whole-target) claimed at ``claim`` s, the union
    and total raised alike (so the union and total identities still hold: only a replay can tell)."""
    plan = read(TASKS / SMOKE / "solution" / "reproduced_result.json")
    row = plan["q5"]["strategies"][0]
    extra = claim - row["individual_duration_s"]
    row["individual_duration_s"] = row["durations_s"]["M1"] = claim
    plan["experiment_result"]["q5_union_duration_s"]["M1"] += extra
    plan["experiment_result"]["q5_union_duration_s"]["total"] += extra
    return plan


def test_an_inflated_claim_fails_the_seed_replay_and_nothing_else_of_the_seed_class() -> None:
    found = results("smoke_screen_coverage", inflated())
    assert found["smoke_q5_whole_target_replay"].status == "failed"
    assert "the whole-target replay gives 3.78 s" in found["smoke_q5_whole_target_replay"].message
    gate = found["smoke_q5_shielding_replay"]
    assert gate.hard_error and "claims 9.45 s" in gate.message and "gives 4.02 s" in gate.message
    assert not [n for n, r in found.items() if r.hard_error and n != "smoke_q5_shielding_replay"]


def test_the_seed_tolerance_passes_a_claim_a_quarter_above_the_replay_and_fails_beyond() -> None:
    within = results("smoke_screen_coverage", inflated(4.02 / 0.76))["smoke_q5_shielding_replay"]   # 5.29 s
    beyond = results("smoke_screen_coverage", inflated(4.02 / 0.74))["smoke_q5_shielding_replay"]   # 5.43 s
    assert within.status == "passed" and beyond.hard_error


def test_a_plan_whose_clouds_cover_nothing_fails_the_seed_replay() -> None:
    """The seed's smoke penalty (GLM-5.3-Flash: its replay gave 0.00 s): every cloud moved off the sight lines."""
    plan = read(TASKS / SMOKE / "solution" / "reproduced_result.json")
    for row in plan["q5"]["strategies"]:
        row["explode_y"] += 400.0
    gate = results("smoke_screen_coverage", plan)["smoke_q5_shielding_replay"]
    assert gate.hard_error and "gives 0.00 s" in gate.message


def test_a_plan_without_burst_points_is_missing_evidence_for_both_replays() -> None:
    plan = read(TASKS / SMOKE / "solution" / "reproduced_result.json")
    for row in plan["q5"]["strategies"]:
        del row["explode_x"]
    found = results("smoke_screen_coverage", plan)
    for name in ("smoke_q5_shielding_replay", "smoke_q5_whole_target_replay"):
        assert found[name].status == "missing" and found[name].severity == "warning"


# --- Juneau: invalid acceptance/sustainability units -----------------------------------------------------

def juneau(acceptance: Any, sustainability: Any, **extra: Any) -> dict[str, Any]:
    data = read(TASKS / JUNEAU / "tests" / "expected_result.json")
    data["experiment_result"].update(resident_acceptance_index=acceptance, sustainability_score=sustainability,
                                     **extra)
    policy = data["dynamic_programming"]["optimal_terminal_policy"]
    policy.update(resident_acceptance_index=acceptance, sustainability_score=sustainability)
    return data


def seed_failures(data: Any) -> set[str]:
    return {n for n, r in results("juneau_units", data).items() if r.hard_error and "report" not in n}


def report_failures(data: Any) -> set[str]:
    return {n for n, r in results("juneau_units", data).items() if r.hard_error and "report" in n}


def test_v4_pro_s_published_juneau_answer_is_not_invalid_units() -> None:
    """75.8 / 68.6 on a 0–100 scale: not wrong under a schema that does not pin the range (seed F.1)."""
    from anchorage.scoring.rebuild import artifact_from_values

    found = results("juneau_units", artifact_from_values(PUBLISHED[JUNEAU]))
    assert {r.status for r in found.values()} == {"passed"}
    assert "0–100 scale" in found["juneau_acceptance_units"].message and "F.1" in found["juneau_acceptance_units"].message
    assert "read as 0.758" in found["juneau_report_acceptance_units"].message


def test_the_answer_the_seed_penalised_is_invalid_under_both_readings() -> None:
    """Kimi K3: acceptance 1.5 and sustainability 232.2 (the report's audit, "unit/scale invalid")."""
    data = juneau(1.5, 232.2)
    assert seed_failures(data) == {"juneau_sustainability_units"}       # 232.2 fits no scale; 1.5 may be 0–100
    assert "fits no scale" in results("juneau_units", data)["juneau_sustainability_units"].message
    assert report_failures(data) == {"juneau_report_acceptance_units", "juneau_report_sustainability_units"}


@pytest.mark.parametrize(("acceptance", "sustainability", "failing"), [
    (1.0, 1.007, set()),                                   # the anchor
    (0.9669, 0.9191, set()),                               # the errata reproduction
    (75.8, 0.9, set()),                                    # one index as a percentage: nothing contradicts it
    (100.0, 100.0, set()),
    (-0.2, 0.9, {"juneau_acceptance_units"}),               # negative: no scale
    (0.9, 100.5, {"juneau_sustainability_units"}),          # above every scale
    (float("nan"), 0.9, {"juneau_acceptance_units"}),
    (0.9, "Infinity", {"juneau_sustainability_units"}),
    (0.9, "1e400", {"juneau_sustainability_units"}),
])
def test_the_seed_units_rule(acceptance: Any, sustainability: Any, failing: set[str]) -> None:
    assert seed_failures(juneau(acceptance, sustainability)) == failing


def test_a_scale_the_artifact_declares_is_held_to() -> None:
    declared_unit = juneau(75.8, 0.9, resident_acceptance_index_scale="0-1 share of residents")
    assert seed_failures(declared_unit) == {"juneau_acceptance_units"}
    message = results("juneau_units", declared_unit)["juneau_acceptance_units"].message
    assert "0–1 scale the artifact declares (experiment_result.resident_acceptance_index_scale)" in message
    declared_hundred = juneau(75.8, 68.6, scales={"sustainability_score": "0-100 multiattribute utility"})
    assert not seed_failures(declared_hundred)
    assert "declared 0–100" in results("juneau_units", declared_hundred)["juneau_sustainability_units"].message
    top_level = juneau(0.9, 68.6)
    top_level["units"] = {"experiment_result.sustainability_score": [0, 1]}
    assert seed_failures(top_level) == {"juneau_sustainability_units"}


def test_a_scale_the_artifact_restates_otherwise_is_a_contradiction() -> None:
    data = juneau(75.8, 0.9)
    data["dynamic_programming"]["optimal_terminal_policy"]["resident_acceptance_index"] = 0.758
    assert seed_failures(data) == {"juneau_acceptance_units"}
    assert "restates it as 0.758" in results("juneau_units", data)["juneau_acceptance_units"].message
    near = juneau(0.99, 0.9)   # 0.99 against 1.02: both near 1, not two scales
    near["dynamic_programming"]["optimal_terminal_policy"]["resident_acceptance_index"] = 1.02
    assert not seed_failures(near)


def test_absent_or_non_numeric_indices_are_missing_evidence() -> None:
    for data in ({}, {"experiment_result": {}}, juneau(None, "high")):
        assert {r.status for r in results("juneau_units", data).values()} == {"missing"}
        assert not any(r.hard_error for r in results("juneau_units", data).values())


def test_the_unit_scales_are_the_task_schema_s_pinned_ranges() -> None:
    schema = read(TASKS / JUNEAU / "environment" / "data" / "output_schema.json")["$scored_fields"]
    for field in FIELDS:
        assert tuple(schema[f"experiment_result.{field.key}"]["range"]) == field.unit


def test_scale_declarations_and_the_report_reading() -> None:
    assert parse_scale("0–100 multiattribute utility") == (0.0, 100.0)
    assert parse_scale("1 (index on 0-1, not %)") == (0.0, 1.0)
    assert parse_scale("percent") == (0.0, 100.0) and parse_scale({"min": 0, "max": 10}) == (0.0, 10.0)
    assert parse_scale("index") is None and parse_scale(None) is None
    assert report_percent_reading(75.8) == pytest.approx(0.758) and report_percent_reading(10.0) == 10.0
    assert report_percent_reading(232.2) == 232.2 and report_percent_reading(0.9) == 0.9


# --- Olympics: a degenerate coach effect -----------------------------------------------------------------

def olympics(*gains: Any) -> dict[str, Any]:
    data = read(TASKS / OLYMPICS / "tests" / "expected_result.json")
    for row, gain in zip(data["great_coach_model"]["recommendations"], gains, strict=False):
        row["estimated_medal_count_gain"] = gain
    return data


def coach_failures(data: Any) -> set[str]:
    return {n for n, r in results("olympics_coach_effect", data).items() if r.hard_error}


def test_the_bound_is_derived_from_the_task_s_medal_counts() -> None:
    attachments = TASKS / OLYMPICS / "environment" / "data" / "attachments"
    rise = largest_rise(attachments / "summerOly_medal_counts.csv", attachments / "summerOly_hosts.csv")
    assert (rise.country, rise.year_before, rise.year, rise.before, rise.after) == ("East Germany", 1968, 1972, 25, 66)
    assert rise.medals == MAX_COACH_GAIN


def test_the_anchor_and_v4_pro_have_a_sound_coach_effect() -> None:
    from anchorage.scoring.rebuild import artifact_from_values

    for data in (olympics(), artifact_from_values(PUBLISHED[OLYMPICS])):   # 1.67/2/3; v4 pro's 2/2/2
        found = results("olympics_coach_effect", data)
        assert [r.status for r in found.values()] == ["passed"] * 3, [r.message for r in found.values()]
    # the reproduction cannot compute the gains without summerOly_athletes.csv (null): missing evidence only
    found = results("olympics_coach_effect", read(TASKS / OLYMPICS / "solution" / "reproduced_result.json"))
    assert [r.status for r in found.values()] == ["missing"] * 3


@pytest.mark.parametrize(("gain", "why"), [
    (0, "zero"), (0.0, "zero"), (-1.5, "negative"), (float("nan"), "not finite"), (float("inf"), "not finite"),
    ("-inf", "not finite"), ("NaN", "not finite"), ("1e400", "not finite"), (41.01, "implausibly large"),
    (86.9862, "implausibly large"),
])
def test_a_degenerate_coach_effect_fails(gain: Any, why: str) -> None:
    found = results("olympics_coach_effect", olympics(2.0, gain, 3.0))
    assert coach_failures(olympics(2.0, gain, 3.0)) == {"olympics_coach_effect_2"}
    assert why in found["olympics_coach_effect_2"].message and "seed G.4" in found["olympics_coach_effect_2"].message


def test_the_bound_itself_passes_and_a_missing_gain_is_missing_evidence() -> None:
    assert not coach_failures(olympics(MAX_COACH_GAIN, 0.5, "3.5"))
    data = olympics(2.0, None, "about 2")
    statuses = {n: r.status for n, r in results("olympics_coach_effect", data).items()}
    assert statuses == {"olympics_coach_effect_1": "passed", "olympics_coach_effect_2": "missing",
                        "olympics_coach_effect_3": "missing"}
    short = copy.deepcopy(olympics())
    del short["great_coach_model"]["recommendations"][1:]
    assert [r.status for r in results("olympics_coach_effect", short).values()] == ["passed", "missing", "missing"]


def test_the_checks_run_through_the_task_invariants_files() -> None:
    names = {r.name for r in check(TASKS / OLYMPICS, olympics())} | {r.name for r in check(TASKS / JUNEAU, juneau(1, 1))}
    assert {"olympics_coach_effect_1", "juneau_acceptance_units", "juneau_report_sustainability_units"} <= names
