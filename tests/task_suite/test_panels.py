"""Final-question panels: the tally, the exclusions, the anchor corrections, pinned units, oracle scores O-Eval 1."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from anchorage.scoring import score_artifact
from anchorage.tasks import load_task

from .helpers import ALL_SLUGS, REFERENCE_SLUGS, TASKS, get_path, read_json, set_path

EXCLUDED = {
    ("mcm-2023-c-wordle", "target_comparison.eerie_group.actual"),
    ("mcm-2025-c-olympic-medals", "great_coach_model.recommendations[3].estimated_medal_count_gain"),
    ("mcm-2024-a-lamprey", "experiment_result.parasite_coexistence_case.final_parasite_index"),
    ("mcm-2024-a-lamprey", "experiment_result.parasite_coexistence_case.host_fish_index"),
}


def metrics(slug: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = read_json(TASKS / slug / "tests" / "score_config.json")["metrics"]
    return found


def score(slug: str, artifact: Path) -> dict[str, Any]:
    record: dict[str, Any] = score_artifact(load_task(TASKS / slug), artifact).to_dict()
    return record


def test_tally_62_declared_58_in_panels() -> None:
    declared = [(s, m) for s in REFERENCE_SLUGS for m in metrics(s)]
    assert len(declared) == 62
    excluded = {(s, m["path"]) for s, m in declared if "exclude_reason" in m}
    assert excluded == EXCLUDED
    assert len(declared) - len(excluded) == 58
    for slug in REFERENCE_SLUGS:
        config = read_json(TASKS / slug / "tests" / "score_config.json")
        assert config["metric_count"] == len(config["metrics"])
        assert config["effective_metric_count"] == sum("exclude_reason" not in m for m in config["metrics"])


def test_tally_table_in_readme_matches_configs() -> None:
    readme = (TASKS / "README.md").read_text(encoding="utf-8")
    for slug in REFERENCE_SLUGS:
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{slug}`"))
        declared = len(metrics(slug))
        scored = sum("exclude_reason" not in m for m in metrics(slug))
        assert f"| {declared} / {scored} |" in row, row


def test_lamprey_exclusion_is_the_raw_index_rule() -> None:
    for metric in metrics("mcm-2024-a-lamprey"):
        rule = "_index" in metric["path"] and abs(metric["oracle_value"]) > 5
        assert ("exclude_reason" in metric) == rule, metric["path"]


@pytest.mark.parametrize("slug", ALL_SLUGS)
def test_expected_result_scores_o_eval_one_and_passes_gates(slug: str) -> None:
    record = score(slug, TASKS / slug / "tests" / "expected_result.json")
    assert record["gradable"] and record["o_eval"] == 1.0 and record["raw"] == 1.0
    assert not record["hard_gate_failed"], [g for g in record["gates"] if g["hard_error"]]
    for metric in record["metrics"]:
        if (slug, metric["path"]) in EXCLUDED:
            assert metric["status"] == "excluded" and metric["weight"] == 0


def test_excluded_metrics_are_excluded_for_any_entry(tmp_path: Path) -> None:
    """The exclusions are configuration: a different value at an excluded path changes nothing."""
    for slug in ("mcm-2025-c-olympic-medals", "mcm-2024-a-lamprey"):
        data = read_json(TASKS / slug / "tests" / "expected_result.json")
        changed = copy.deepcopy(data)
        for s, path in EXCLUDED:
            if s == slug:
                set_path(changed, path, -12345.0)
        artifact = tmp_path / f"{slug}_result.json"
        artifact.write_text(json.dumps(changed), encoding="utf-8")
        assert score(slug, artifact)["raw_before_gates"] == 1.0   # gates may still reject the value itself


def test_dragon_anchor_is_the_continuous_time_peak(tmp_path: Path) -> None:
    slug = "cumcm-2024-a-dragon-dance"
    by_path = {m["path"]: m for m in metrics(slug)}
    speed = by_path["experiment_result.q5.max_head_speed_mps"]
    ratio = by_path["experiment_result.q5.max_speed_ratio_when_head_1mps"]
    assert speed["oracle_value"] == pytest.approx(1.246266, abs=1e-6)
    assert ratio["oracle_value"] == pytest.approx(1.604793, abs=1e-6)
    for key in ("direction", "semantic_direction", "normalization_direction"):
        assert speed[key] == "target_value"
    expected = read_json(TASKS / slug / "tests" / "expected_result.json")["experiment_result"]["q5"]
    assert expected["max_head_speed_mps"] == pytest.approx(1.246266, abs=1e-6)
    assert expected["max_speed_ratio_when_head_1mps"] == pytest.approx(1.604793, abs=1e-6)
    assert abs(1.246266 * 1.604793 - 2) < 0.02
    toml = (TASKS / slug / "task.toml").read_text(encoding="utf-8")
    assert "1.246266" in toml and "不可行" in toml and "infeasible" in toml
    # the paper's value overshoots the target: it no longer earns full credit on the speed metric
    paper = copy.deepcopy(read_json(TASKS / slug / "tests" / "expected_result.json"))
    paper["experiment_result"]["q5"]["max_head_speed_mps"] = 1.406276
    artifact = tmp_path / f"{slug}_result.json"
    artifact.write_text(json.dumps(paper), encoding="utf-8")
    speed_record = next(m for m in score(slug, artifact)["metrics"] if m["path"] == speed["path"])
    assert speed_record["reward"] < 0.6


def test_crop_planting_is_flagged() -> None:
    slug = "cumcm-2024-c-crop-planting"
    toml = (TASKS / slug / "task.toml").read_text(encoding="utf-8")
    assert "anchor_flag" in toml and "MILP" in toml
    assert "MILP" in (TASKS / slug / "README.md").read_text(encoding="utf-8")
    assert "MILP" in (TASKS / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("slug", ALL_SLUGS)
def test_every_scored_field_has_unit_and_range_pinned_in_the_schema(slug: str) -> None:
    schema = read_json(TASKS / slug / "environment" / "data" / "output_schema.json")["$scored_fields"]
    expected = read_json(TASKS / slug / "tests" / "expected_result.json")
    for metric in metrics(slug):
        pinned = schema[metric["path"]]
        assert metric["unit"] and pinned["unit"] == metric["unit"]
        assert pinned["range"] == metric["range"] and len(metric["range"]) == 2
        lo, hi = metric["range"]
        anchor = metric["oracle_value"]
        assert (lo is None or lo <= anchor) and (hi is None or anchor <= hi), (metric["path"], anchor, metric["range"])
        assert get_path(expected, metric["path"]) == anchor


def test_juneau_sustainability_scale_is_pinned() -> None:
    metric = next(m for m in metrics("mcm-2025-b-juneau-tourism") if m["path"] == "experiment_result.sustainability_score")
    assert metric["oracle_value"] == 1.007
    assert metric["range"] == [0, 1.1] and "not %" in metric["unit"]
    acceptance = next(m for m in metrics("mcm-2025-b-juneau-tourism") if m["path"].endswith("resident_acceptance_index"))
    assert acceptance["domain"] == "unit_interval" and acceptance["range"] == [0, 1]


def test_newest_reference_configurations_are_used() -> None:
    """v3 final-question legacy panels for 15 tasks, v5 endpoint target-minmax for Wordle, stair wear, Juneau."""
    versions = {s: read_json(TASKS / s / "tests" / "score_config.json")["scoring_version"] for s in REFERENCE_SLUGS}
    minmax = {s for s, v in versions.items() if v == "tb-mathmodeling-v5-final-question-endpoint-target-minmax"}
    legacy = {s for s, v in versions.items() if v == "tb-mathmodeling-v3-final-question-legacy-baseline-panel"}
    assert minmax == {"mcm-2023-c-wordle", "mcm-2025-a-stair-wear", "mcm-2025-b-juneau-tourism"}
    assert len(legacy) == 15
    for slug in REFERENCE_SLUGS:
        config = read_json(TASKS / slug / "tests" / "score_config.json")
        assert config["question_scope"] == "final_question_only"
        assert all(m["question_scope"] == "final_question_only" for m in config["metrics"])


@pytest.mark.parametrize("slug", REFERENCE_SLUGS)
def test_numeric_checks_agree_with_the_anchor(slug: str) -> None:
    checks_path = TASKS / slug / "tests" / "numeric_checks.json"
    if not checks_path.is_file():
        pytest.skip(f"{slug}: the reference has no numeric_checks.json")
    expected = read_json(TASKS / slug / "tests" / "expected_result.json")
    for check in read_json(checks_path):
        assert get_path(expected, check["path"]) == check["expected"], check["path"]
