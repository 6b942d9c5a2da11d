"""The seed's seven whole-task penalties (G.4, four classes) as scores: under ``paper`` an answer of a class is
hard-gated (R = 0, O-Eval 0, BO-Eval −1, the penalty names the gate); v4 pro's published answers are not (the
seven fell on other entries); ``tbmm-report-2026-09`` applies the seven as the report did.

The seven, from the benchmark's feasibility audit (wxj630/terminal-bench-math-modeling
reports/terminus2-all-model-feasibility-audit-2023-2025.md @ 4a3807d, "明确硬错误"): four heliostat answers (rated
power 53.80, 59.997 and 55.46/54.97 MW; a mirror mounted at 1.9024 m), GLM-5.3-Flash's smoke plan (its replay gave
0.00 s), Kimi K3's Juneau answer (acceptance 1.5, sustainability 232.2) and Kimi K3's Olympics answer. Only
those values are published, not the artifacts: each is rebuilt here on the task's anchor with the published
value put in (Kimi K3's coach effects are not published; a coach effect above the class's bound stands in).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from anchorage.scoring import score_data
from anchorage.scoring.rebuild import artifact_from_values

TASKS = Path(__file__).resolve().parents[2] / "tasks"
PUBLISHED = Path(__file__).parent / "published"
ANSWERS: dict[str, dict[str, Any]] = json.loads((PUBLISHED / "v4-pro-answers.json").read_text())["v4 pro"]
HELIOSTAT, SMOKE = "cumcm-2023-a-heliostat-field", "cumcm-2025-a-smoke-screen"
JUNEAU, OLYMPICS = "mcm-2025-b-juneau-tourism", "mcm-2025-c-olympic-medals"
COMPAT = "tbmm-report-2026-09"


def read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def anchor(slug: str) -> dict[str, Any]:
    data: dict[str, Any] = read(TASKS / slug / "tests" / "expected_result.json")
    return data


def gated_by(record: Any) -> list[str]:
    return [g.name for g in record.gates if g.hard_error]


def assert_penalised(record: Any, gate: str) -> None:
    assert record.hard_gate_failed and record.raw == 0.0 and record.o_eval == 0.0 and record.bo_eval == -1.0
    assert record.penalty.startswith("hard gate failed: ") and gate in record.penalty, record.penalty
    assert gate in gated_by(record)


# --- paper: the must-shows ---------------------------------------------------------------------------------

def inflated_smoke_plan() -> dict[str, Any]:
    """This project's feasible plan with its first cloud claimed at 9.45 s (the whole-target replay gives it
    3.78 s, the seed's coverage replay 4.02 s); the union and total raised alike, so that only a replay can tell."""
    plan: dict[str, Any] = read(TASKS / SMOKE / "solution" / "reproduced_result.json")
    row = plan["q5"]["strategies"][0]
    assert row["individual_duration_s"] == pytest.approx(3.7792)
    extra = 9.45 - row["individual_duration_s"]
    row["individual_duration_s"] = row["durations_s"]["M1"] = 9.45
    plan["experiment_result"]["q5_union_duration_s"]["M1"] += extra
    plan["experiment_result"]["q5_union_duration_s"]["total"] += extra
    return plan


def test_an_inflated_smoke_plan_is_hard_gated_under_paper() -> None:
    record = score_data(TASKS / SMOKE, inflated_smoke_plan())
    assert record.profile == "paper" and record.raw_before_gates == 1.0     # it would score 1.0 otherwise
    assert_penalised(record, "smoke_q5_shielding_replay")
    assert gated_by(record) == ["smoke_q5_shielding_replay"]
    gate = {g.name: g for g in record.gates}["smoke_q5_shielding_replay"]
    assert "claims 9.45 s" in gate.message and "gives 4.02 s" in gate.message
    honest = score_data(TASKS / SMOKE, read(TASKS / SMOKE / "solution" / "reproduced_result.json"))
    assert honest.o_eval == 1.0 and not honest.hard_gate_failed


def mock_olympics_answer(seed: int = 0) -> dict[str, Any]:
    """The artifact the built-in mock agent writes for the task: the gateway's mock model asked as
    ``runtime/local/inside/mock_agent.py`` asks it (the instruction, then the task's output schema)."""
    from anchorage.gateway.mock import MockUpstream
    from anchorage.tasks import load_task

    task = load_task(TASKS / OLYMPICS)
    schema = (task.root / "environment" / "data" / "output_schema.json").read_text(encoding="utf-8")
    messages = [{"role": "system", "content": "Answer with one JSON object that follows the output schema."},
                {"role": "user", "content": task.instruction},
                {"role": "user", "content": f"output_schema:\n{schema}"}]
    answer: dict[str, Any] = json.loads(MockUpstream().answer({"model": "mock-model", "messages": messages,
                                                               "seed": seed}).text)
    return answer


def test_the_mock_s_olympics_placeholder_is_hard_gated_under_paper() -> None:
    """The mock's coach effect of ~87 medals (seed 0) against the anchor's 1.67 scored O-Eval 1.0 before."""
    answer = mock_olympics_answer(0)
    gains = [r["estimated_medal_count_gain"] for r in answer["great_coach_model"]["recommendations"]]
    assert gains[0] == pytest.approx(86.9862)
    record = score_data(TASKS / OLYMPICS, answer)
    assert record.raw_before_gates >= record.oracle_raw                     # one-sided: it would score 1.0
    assert_penalised(record, "olympics_coach_effect_1")
    assert "implausibly large" in {g.name: g for g in record.gates}["olympics_coach_effect_1"].message
    for seed in (1, 2):   # the demo's other seeds: each has a placeholder above the bound
        assert score_data(TASKS / OLYMPICS, mock_olympics_answer(seed)).hard_gate_failed


@pytest.mark.parametrize("gain", [0.0, -2.0, float("nan"), "Infinity", 1e400, 50.0], ids=repr)
def test_a_degenerate_coach_effect_is_hard_gated_under_paper(gain: Any) -> None:
    answer = anchor(OLYMPICS)
    answer["great_coach_model"]["recommendations"][1]["estimated_medal_count_gain"] = gain
    assert_penalised(score_data(TASKS / OLYMPICS, answer), "olympics_coach_effect_2")


def test_v4_pro_s_published_juneau_answer_is_not_penalised_under_paper() -> None:
    record = score_data(TASKS / JUNEAU, artifact_from_values(ANSWERS[JUNEAU]))
    assert not record.hard_gate_failed and record.o_eval == pytest.approx(0.454020, abs=1e-6)
    seed = {g.name: g for g in record.gates if g.name in ("juneau_acceptance_units", "juneau_sustainability_units")}
    assert {g.status for g in seed.values()} == {"passed"} and {g.severity for g in seed.values()} == {"hard"}
    # this project's pinned unit scale still penalises it under strict (a project gate, not the seed's class)
    strict = score_data(TASKS / JUNEAU, artifact_from_values(ANSWERS[JUNEAU]), profile="strict")
    assert strict.hard_gate_failed and "acceptance_index_range" in strict.penalty


@pytest.mark.parametrize("profile", ["paper", COMPAT])
def test_no_published_v4_pro_cell_is_hard_gated(profile: str) -> None:
    """The seed's seven penalties fell on other entries; the report gated none of v4 pro's cells."""
    scores = read(PUBLISHED / "v4-pro-scores.json")["v4 pro"]
    for slug, values in ANSWERS.items():
        record = score_data(TASKS / slug, artifact_from_values(values), profile=profile)
        assert not record.hard_gate_failed, (slug, record.penalty)
        assert scores[slug]["views"]["report@4a3807d"]["hard_gated"] is False


# --- the seven, rebuilt: penalised under paper and under the report's profile ------------------------------

def heliostat(**changes: float) -> dict[str, Any]:
    data = anchor(HELIOSTAT)
    rows = data["reproduced"]["design_summary"]
    for key, value in changes.items():
        if key == "q2_power":
            rows[1]["annual_thermal_power_mw"] = data["target_comparison"]["q2_annual_thermal_power_mw"]["actual"] = value
        elif key == "q3_power":
            rows[2]["annual_thermal_power_mw"] = data["target_comparison"]["q3_annual_thermal_power_mw"]["actual"] = value
        elif key == "q3_height":
            rows[2]["installation_height_m"] = value
    return data


def smoke_covering_nothing() -> dict[str, Any]:
    plan: dict[str, Any] = read(TASKS / SMOKE / "solution" / "reproduced_result.json")
    for row in plan["q5"]["strategies"]:
        row["explode_y"] += 400.0
    return plan


def juneau_kimi() -> dict[str, Any]:
    data = anchor(JUNEAU)
    data["experiment_result"].update(resident_acceptance_index=1.5, sustainability_score=232.2)
    return data


def olympics_too_large() -> dict[str, Any]:
    data = anchor(OLYMPICS)
    for row, gain in zip(data["great_coach_model"]["recommendations"], (48.0, 55.0, 61.0), strict=False):
        row["estimated_medal_count_gain"] = gain
    return data


SEVEN: list[tuple[str, str, Any, str]] = [
    ("v4 flash baseline: Q2/Q3 53.80 MW", HELIOSTAT, lambda: heliostat(q2_power=53.795541, q3_power=53.795541),
     "q3_rated_power_range"),
    ("opencode + deepseek-flash (max): 59.997 MW", HELIOSTAT,
     lambda: heliostat(q2_power=59.997149, q3_power=59.997149), "q2_design_power_range"),
    ("GLM-5.3: a Q3 mirror mounted at 1.9024 m", HELIOSTAT, lambda: heliostat(q3_height=1.9024),
     "heliostat_design2_installation_height"),
    ("Gemini 3.7 Flash: Q2 55.46, Q3 54.97 MW", HELIOSTAT, lambda: heliostat(q2_power=55.46, q3_power=54.966),
     "q3_design_power_range"),
    ("GLM-5.3-Flash (ox-alpha): the replay gives 0 s", SMOKE, smoke_covering_nothing, "smoke_q5_shielding_replay"),
    ("Kimi K3: acceptance 1.5, sustainability 232.2", JUNEAU, juneau_kimi, "juneau_sustainability_units"),
    ("Kimi K3: an implausible coach effect", OLYMPICS, olympics_too_large, "olympics_coach_effect_1"),
]


@pytest.mark.parametrize(("case", "slug", "build", "gate"), SEVEN, ids=[c[0] for c in SEVEN])
def test_each_of_the_seed_s_seven_is_penalised_under_paper(case: str, slug: str, build: Any, gate: str) -> None:
    record = score_data(TASKS / slug, build())
    assert_penalised(record, gate)
    assert record.hard_gate_failed, case


COMPAT_GATE = {JUNEAU: "juneau_report_acceptance_units"}   # the report's own Juneau gate (its unit rule)


@pytest.mark.parametrize(("case", "slug", "build", "gate"), SEVEN, ids=[c[0] for c in SEVEN])
def test_the_report_s_profile_applies_the_seed_s_seven(case: str, slug: str, build: Any, gate: str) -> None:
    record = score_data(TASKS / slug, build(), profile=COMPAT)
    assert_penalised(record, COMPAT_GATE.get(slug, gate))
    if slug == JUNEAU:   # both of Kimi's values stay off the unit scale after the report's percentage reading
        assert {"juneau_report_acceptance_units", "juneau_report_sustainability_units"} <= set(gated_by(record))
        assert not {"juneau_acceptance_units", "juneau_sustainability_units"} & set(gated_by(record))


def test_the_report_s_juneau_gate_reads_percentages_as_the_report_did() -> None:
    """75.8 / 68.6 (v4 pro) read as 0.758 / 0.686: no penalty (the report's cell is not gated); 1.5 is."""
    assert not score_data(TASKS / JUNEAU, artifact_from_values(ANSWERS[JUNEAU]), profile=COMPAT).hard_gate_failed
    answer = copy.deepcopy(anchor(JUNEAU))
    answer["experiment_result"]["resident_acceptance_index"] = 1.5
    assert_penalised(score_data(TASKS / JUNEAU, answer, profile=COMPAT), "juneau_report_acceptance_units")
    assert not score_data(TASKS / JUNEAU, answer).hard_gate_failed      # paper: 1.5 may be on a 0–100 scale
