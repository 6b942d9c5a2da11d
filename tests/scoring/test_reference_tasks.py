"""Every reference task's expected result scores a raw panel of exactly 1.0 under its own configuration.

Read straight from the shared reference pack (``reference_dir``), and from the repository's own
``tasks/`` when it has tasks with a scoring configuration.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anchorage.scoring import score_artifact
from anchorage.tasks import load_task
from anchorage.tasks.loading import REPO_TASKS

REFERENCE_SLUGS = [
    "cumcm-2023-a-heliostat-field", "cumcm-2023-b-multibeam-lines", "cumcm-2023-c-vegetable-pricing",
    "cumcm-2024-a-dragon-dance", "cumcm-2024-b-production-decision", "cumcm-2024-c-crop-planting",
    "cumcm-2025-a-smoke-screen", "cumcm-2025-b-sic-thickness", "cumcm-2025-c-nipt",
    "mcm-2023-a-plant-community", "mcm-2023-b-maasai-mara", "mcm-2023-c-wordle", "mcm-2024-a-lamprey",
    "mcm-2024-b-submersible-search", "mcm-2024-c-tennis-momentum", "mcm-2025-a-stair-wear",
    "mcm-2025-b-juneau-tourism", "mcm-2025-c-olympic-medals",
]
REPO_SCORED = sorted(p.name for p in REPO_TASKS.glob("*") if (p / "tests" / "score_config.json").is_file()) \
    if REPO_TASKS.is_dir() else []


def test_the_pack_has_the_18_tasks(reference_dir: Path) -> None:
    assert sorted(p.name for p in (reference_dir / "tasks").iterdir()) == REFERENCE_SLUGS


def _assert_oracle_scores_one(root: Path) -> None:
    task = load_task(root)
    record = score_artifact(task, root / "tests" / "expected_result.json", gates=False)
    included = [m for m in record.metrics if m.status != "excluded"]
    assert included, "a task needs at least one included metric"
    assert [(m.path, m.reward) for m in included] == [(m.path, 1.0) for m in included]
    assert record.raw == 1.0 and record.oracle_raw == 1.0 and record.o_eval == 1.0
    assert record.oracle_source == "expected_result.json"
    json.dumps(record.to_dict(), allow_nan=False)


@pytest.mark.parametrize("slug", REFERENCE_SLUGS)
def test_reference_expected_result_scores_one(reference_dir: Path, slug: str) -> None:
    _assert_oracle_scores_one(reference_dir / "tasks" / slug)


@pytest.mark.parametrize("slug", REPO_SCORED or ["(none)"])
def test_repo_task_expected_result_scores_one(slug: str) -> None:
    if slug == "(none)":
        pytest.skip(f"no task with tests/score_config.json under {REPO_TASKS} yet")
    _assert_oracle_scores_one(REPO_TASKS / slug)


@pytest.mark.parametrize(
    ("slug", "baseline", "source"),
    [("mcm-2023-a-plant-community", 0.5028046666666667, "config:baseline_endpoint.panel_score"),
     ("cumcm-2024-a-dragon-dance", 0.0, "config:baseline_endpoint.panel_score"),
     ("mcm-2025-a-stair-wear", 0.0, "config:baseline_endpoint.normalized_panel_score"),
     ("mcm-2023-c-wordle", 0.0, "config:baseline_endpoint.normalized_panel_score")],
)
def test_default_baseline_comes_from_the_config(reference_dir: Path, slug: str, baseline: float,
                                                source: str) -> None:
    root = reference_dir / "tasks" / slug
    record = score_artifact(root, root / "tests" / "expected_result.json", gates=False)
    assert (record.baseline_raw, record.baseline_source) == (baseline, source)


def test_wordle_constant_endpoint_is_excluded(reference_dir: Path) -> None:
    root = reference_dir / "tasks" / "mcm-2023-c-wordle"
    record = score_artifact(root, root / "tests" / "expected_result.json", gates=False)
    statuses = {m.path: m.status for m in record.metrics}
    assert statuses == {"target_comparison.eerie_group.actual": "excluded",
                        "target_comparison.lightgbm_like_accuracy.actual": "scored"}


def test_stair_wear_baseline_values_are_widened_off_zero(reference_dir: Path, tmp_path: Path) -> None:
    """The v5 baseline artifact sits at the min-max zero point of |O - B|, but the three stair-wear endpoints
    are 1.1-2.2 % apart: the degeneracy band (G.6) widens each denominator to 4.4 % of |O| and says so."""
    root = reference_dir / "tasks" / "mcm-2025-a-stair-wear"
    data = json.loads((root / "tests" / "expected_result.json").read_text())
    points = {"daily_use_pattern.peak_period_users": (27.3, 27.6),
              "daily_use_pattern.regular_hour_users_if_spread_over_10_hours": (4.5, 4.6),
              "experiment_result.estimated_daily_users": (72.67, 73.52)}
    data["daily_use_pattern"]["peak_period_users"] = 27.3
    data["daily_use_pattern"]["regular_hour_users_if_spread_over_10_hours"] = 4.5
    data["experiment_result"]["estimated_daily_users"] = 72.67
    artifact = tmp_path / "a.json"
    artifact.write_text(json.dumps(data))
    record = score_artifact(root, artifact, gates=False)
    for m in record.metrics:
        base, anchor = points[m.path]
        assert m.band["widened"] and m.band["width"] == pytest.approx(0.044 * anchor)
        assert m.reward == pytest.approx(1 - abs(base - anchor) / (0.044 * anchor))
        assert abs(base - anchor) / (0.044 * anchor) < 1   # unwidened, each would score exactly 0
