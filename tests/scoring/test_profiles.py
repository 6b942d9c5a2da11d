"""Scoring profiles on the repository's tasks: paper parity by default, each addition named and listed.

* ``paper``: every task's anchor scores O-Eval 1.0 and fails none of its hard gates; the published crop and
  smoke-screen anchors score 1.0; an answer at the paper's dragon values (1.406276 / 1.422195) is a scored
  miss with no penalty while the continuous-time answer scores 1.0; only the seed's four classes penalise.
* ``strict`` / ``errata``: each difference from ``paper`` is listed by ``anchorage tasks show``.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.errors import InputError
from anchorage.scoring import score_data
from anchorage.scoring.describe import differences, tally
from anchorage.scoring.profiles import PROFILES, get_profile
from anchorage.tasks import list_tasks
from anchorage.tasks.profiles import SEED_GATE_CLASSES, load_profiles

TASKS = Path(__file__).resolve().parents[2] / "tasks"
SLUGS = [p.name for p in list_tasks(TASKS)]
DRAGON, CROP, SMOKE = "cumcm-2024-a-dragon-dance", "cumcm-2024-c-crop-planting", "cumcm-2025-a-smoke-screen"


def expected(slug: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((TASKS / slug / "tests" / "expected_result.json").read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("slug", SLUGS)
def test_paper_anchor_scores_one_and_passes_every_paper_gate(slug: str) -> None:
    record = score_data(TASKS / slug, expected(slug))
    assert record.profile == "paper" and record.profile_ref == "paper@1"
    assert record.o_eval == 1.0 and record.raw == 1.0
    assert not record.hard_gate_failed and not [g.name for g in record.gates if g.hard_error]


def test_only_four_tasks_have_seed_class_gates_and_only_the_seed_s_classes() -> None:
    with_gates = {slug: {g.seed_class for g in load_profiles(TASKS / slug).gates.paper} for slug in SLUGS}
    assert {s: c for s, c in with_gates.items() if c} == {
        "cumcm-2023-a-heliostat-field": {"heliostat_infeasibility"},
        "cumcm-2025-a-smoke-screen": {"smoke_coverage_replay"},
        "mcm-2025-b-juneau-tourism": {"juneau_units"},
        "mcm-2025-c-olympic-medals": {"olympics_coach_effect"},
    }
    assert set(SEED_GATE_CLASSES) == {c for cs in with_gates.values() for c in cs}


def test_published_crop_anchor_scores_one_under_paper_and_strict() -> None:
    answer = expected(CROP)
    q1 = answer["experiment_result"]["q1"]
    assert (q1["waste_profit_yuan"], q1["discount_profit_yuan"]) == (40418876.72, 58718967.38)
    for profile in ("paper", "strict"):
        assert score_data(TASKS / CROP, answer, profile=profile).o_eval == 1.0
    errata = score_data(TASKS / CROP, answer, profile="errata")
    assert errata.o_eval == pytest.approx(0.3374, abs=1e-4) and errata.anchor_source.startswith("errata")


def test_published_smoke_plan_scores_one_under_paper_and_is_gated_only_under_strict() -> None:
    plan = expected(SMOKE)
    assert plan["experiment_result"]["q5_union_duration_s"]["total"] == 19.9
    paper = score_data(TASKS / SMOKE, plan)
    assert paper.o_eval == 1.0 and not paper.hard_gate_failed
    heading = {g.name: g for g in paper.gates}["smoke_q5_one_heading"]
    assert heading.status == "failed" and heading.severity == "warning" and "hard gate under strict" in heading.message
    strict = score_data(TASKS / SMOKE, plan, profile="strict")
    assert strict.hard_gate_failed and "smoke_q5_one_heading" in strict.penalty and strict.bo_eval == -1.0


def test_paper_dragon_values_are_a_scored_miss_and_the_continuous_answer_scores_one() -> None:
    answer = copy.deepcopy(expected(DRAGON))
    q5 = answer["experiment_result"]["q5"]
    assert (q5["max_head_speed_mps"], q5["max_speed_ratio_when_head_1mps"]) == (1.246266, 1.604793)
    assert score_data(TASKS / DRAGON, answer).o_eval == 1.0
    q5["max_head_speed_mps"], q5["max_speed_ratio_when_head_1mps"] = 1.406276, 1.422195
    miss = score_data(TASKS / DRAGON, answer)
    assert not miss.hard_gate_failed and miss.penalty == ""
    assert miss.o_eval == pytest.approx(0.4982, abs=1e-4)     # the seed's 49.82 % (G.5)
    assert "dragon_q5_handle_limit" in {g.name for g in miss.gates if g.status == "failed"}
    strict = score_data(TASKS / DRAGON, answer, profile="strict")
    assert strict.hard_gate_failed and "dragon_q5_handle_limit" in strict.penalty


@pytest.mark.parametrize("slug", [s for s in SLUGS if load_profiles(TASKS / s).anchors.errata])
def test_every_erratum_is_checkable_and_its_result_scores_one_under_errata(slug: str) -> None:
    for erratum in load_profiles(TASKS / slug).anchors.errata:
        assert (TASKS / slug / erratum.script).is_file() and erratum.reason.strip()
        result = json.loads((TASKS / slug / erratum.result).read_text(encoding="utf-8"))
        record = score_data(TASKS / slug, result, profile="errata")
        assert record.o_eval == 1.0 and not record.hard_gate_failed
        config = {m.path: m.anchor for m in score_data(TASKS / slug, result).metrics}
        for metric in erratum.metrics:
            assert metric.published == config[metric.path]       # paper still scores the published value


def test_strict_lists_the_project_gates_with_their_source() -> None:
    dragon = differences(TASKS / DRAGON, "strict")
    added = {g["gate"]: g for g in dragon.gates_added}
    assert "dragon_q5_handle_limit" in added and added["dragon_q5_handle_limit"]["source"].startswith("replay")
    assert not dragon.anchors and not dragon.gates_removed
    smoke = {g["gate"] for g in differences(TASKS / SMOKE, "strict").gates_added}
    assert "smoke_q5_one_heading" in smoke and "smoke_q5_total" not in smoke   # a seed-class gate already in paper


def test_errata_lists_the_replaced_anchors_with_numbers_script_and_reason() -> None:
    crop = differences(TASKS / CROP, "errata")
    anchors = {a["path"]: a for a in crop.anchors}
    waste = anchors["experiment_result.q1.waste_profit_yuan"]
    assert (waste["paper"], waste["profile"]) == (40418876.72, 58618020.0)
    assert waste["script"] == "solution/solve.sh" and "different model" in waste["reason"]
    assert crop.gates_added   # errata = strict + anchors


def test_compat_lists_its_anchors_baseline_and_arithmetic() -> None:
    dragon = differences(TASKS / DRAGON, "tbmm-report-2026-09")
    assert {a["profile"] for a in dragon.anchors} == {1.406277, 1.422195}
    assert dragon.baseline is not None and dragon.baseline["raw"] == 1.34759 and "line 219" in dragon.baseline["source"]
    assert any("overshoot" in line for line in dragon.arithmetic)


@pytest.mark.parametrize("profile", ["strict", "errata", "tbmm-report-2026-09"])
def test_tasks_show_prints_the_differences(profile: str) -> None:
    result = CliRunner().invoke(app, ["tasks", "show", SMOKE, "--profile", profile])
    assert result.exit_code == 0, result.output
    assert f"profile {get_profile(profile).ref}" in result.stdout and "differences from paper:" in result.stdout
    if profile != "tbmm-report-2026-09":
        assert "+ hard gate smoke_q5_one_heading" in result.stdout
    if profile == "errata":
        assert "anchor experiment_result.q5_union_duration_s.total: 19.9 -> 27.3108" in result.stdout
    as_json = json.loads(CliRunner().invoke(app, ["tasks", "show", SMOKE, "--profile", profile, "--json"]).stdout)
    assert as_json["profile"] == get_profile(profile).ref


def test_tally_follows_the_seed() -> None:
    tallies = {t.task: t for t in (tally(TASKS / s) for s in SLUGS if s != "smoke-inventory")}
    assert sum(t.declared for t in tallies.values()) == 62 and sum(t.scored for t in tallies.values()) == 58
    excluded = {(t.task, p) for t in tallies.values() for p, _ in t.excluded}
    assert excluded == {
        ("mcm-2023-c-wordle", "target_comparison.eerie_group.actual"),
        ("mcm-2025-c-olympic-medals", "great_coach_model.recommendations[3].estimated_medal_count_gain"),
        ("mcm-2024-a-lamprey", "experiment_result.parasite_coexistence_case.final_parasite_index"),
        ("mcm-2024-a-lamprey", "experiment_result.parasite_coexistence_case.host_fish_index"),
    }
    olympics = dict(tallies["mcm-2025-c-olympic-medals"].excluded)
    reason = olympics["great_coach_model.recommendations[3].estimated_medal_count_gain"]
    assert "declared" in reason and "62" not in reason and "beyond the seed" not in reason
    listed = CliRunner().invoke(app, ["tasks", "list", "--metrics"])
    assert listed.exit_code == 0 and "62 declared" in listed.stdout and "the seed" in listed.stdout


def test_coach_gain_gate_covers_the_scored_recommendations_only() -> None:
    answer = copy.deepcopy(expected("mcm-2025-c-olympic-medals"))
    recommendations = answer["great_coach_model"]["recommendations"]
    assert len(recommendations) == 4
    recommendations[3]["estimated_medal_count_gain"] = -1.0      # the excluded 4th recommendation
    assert not score_data(TASKS / "mcm-2025-c-olympic-medals", answer).hard_gate_failed
    recommendations[0]["estimated_medal_count_gain"] = 0.0       # a scored one: degenerate coach effect (G.4)
    gated = score_data(TASKS / "mcm-2025-c-olympic-medals", answer)
    assert gated.hard_gate_failed and gated.penalty.startswith("hard gate failed: olympics_coach_effect_1 ")


def test_unknown_profile_is_one_clear_error() -> None:
    with pytest.raises(InputError, match="unknown scoring profile 'paperr'"):
        get_profile("paperr")
    with pytest.raises(InputError, match="version"):
        get_profile("paper@2")
    assert [get_profile(f"{name}@1").name for name in PROFILES] == list(PROFILES)
    result = CliRunner().invoke(app, ["score", "--task", DRAGON, str(TASKS / DRAGON / "tests" / "expected_result.json"),
                                      "--profile", "nope"])
    assert isinstance(result.exception, InputError) and "use one of: paper, strict" in (result.exception.hint or "")


def test_tasks_readme_states_each_anchor_per_profile() -> None:
    readme = (TASKS / "README.md").read_text(encoding="utf-8")
    assert "sit where a *total*-output cap lands" not in readme          # a claim the numbers do not support
    script = TASKS.parent / "tools" / "profile_table.py"
    check = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr            # the table is what the tasks' files say
    table = readme[readme.index("<!-- profile-table:begin"):readme.index("<!-- profile-table:end")]
    for slug in SLUGS:
        declared = load_profiles(TASKS / slug)
        row = next(line for line in table.splitlines() if line.startswith(f"| `{slug}` |"))
        assert declared.anchors.paper.source in row
        for erratum in declared.anchors.errata:
            assert f"`{erratum.id}`" in row
        for gate in declared.gates.paper:
            assert gate.seed_class in row
    smoke = next(line for line in table.splitlines() if line.startswith(f"| `{SMOKE}` |"))
    assert "the anchor fails `smoke_q5_one_heading`" in smoke
    assert "mean O-Eval: published 58.44 %; `paper` " in table      # the published answers under each profile


def test_the_default_profiles_name_is_written_once_in_the_registry() -> None:
    """``"paper"`` is spelled only where the registry defines the profiles; every other module names
    ``PAPER`` / ``DEFAULT_PROFILE`` (a renamed or re-defaulted profile then changes in one place)."""
    package = Path(__file__).resolve().parents[2] / "operator" / "anchorage"
    spelled = sorted(str(path.relative_to(package)) for path in package.rglob("*.py")
                     if re.search(r"""["']paper["']""", path.read_text(encoding="utf-8")))
    assert spelled == ["scoring/profiles.py"], spelled
