"""The runnable anchor of CUMCM 2024 C (crop planting, Q1) and its replay check.

Runs ``tasks/cumcm-2024-c-crop-planting/solution/solve.sh`` (HiGHS 0/1 program) as a subprocess on
the task's data: its scored fields reproduce the task's erratum (this project's per-plot MILP), HiGHS
proves optimality (gap 0), the plans it writes obey the planting rules, and the replay check
``crop_planting_revenue`` accepts the anchor, rejects profits above the land's ceiling and never
hard-fails an empty artifact.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from anchorage.invariants.replays import get
from anchorage.invariants.replays.crop_planting import ceilings
from anchorage.tasks.profiles import load_profiles

from .reproduction import run_reproduction, value_at

SLUG = "cumcm-2024-c-crop-planting"
LEGUMES = {1, 2, 3, 4, 5, 17, 18, 19}


@pytest.fixture(scope="module")
def task(tasks_dir: Path) -> Path:
    return tasks_dir / SLUG


@pytest.fixture(scope="module")
def run_dir(task: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The results folder of one run of the oracle."""
    results = tmp_path_factory.mktemp("results")
    run_reproduction(task, results)
    return results


@pytest.fixture(scope="module")
def artifact(run_dir: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((run_dir / f"{SLUG}_result.json").read_text(encoding="utf-8"))
    return loaded


def test_scored_fields_match_the_erratum(task: Path, artifact: dict[str, Any]) -> None:
    """The reproduction is this project's per-plot MILP: it reproduces the errata anchor of tests/profiles.yaml
    (and its committed result) to the cent, not the published anchor the paper profile scores."""
    config = json.loads((task / "tests" / "score_config.json").read_text(encoding="utf-8"))
    committed = json.loads((task / "solution" / "reproduced_result.json").read_text(encoding="utf-8"))
    [erratum] = load_profiles(task).anchors.errata
    assert {m["path"] for m in config["metrics"]} == {m.path for m in erratum.metrics} == {
        "experiment_result.q1.waste_profit_yuan", "experiment_result.q1.discount_profit_yuan"}
    published = {m["path"]: m["oracle_value"] for m in config["metrics"]}
    for metric in erratum.metrics:
        ours = float(value_at(artifact, metric.path))
        assert metric.published == published[metric.path]          # paper keeps the published anchor
        assert ours == pytest.approx(metric.value, abs=0.01)        # the MILP optimum is deterministic
        assert ours == pytest.approx(float(value_at(committed, metric.path)), abs=0.01)
        assert ours > metric.published                              # a different model, a higher optimum


def test_highs_proves_optimality(artifact: dict[str, Any]) -> None:
    q1 = artifact["experiment_result"]["q1"]
    for case in ("waste", "discount"):
        solver = q1["solver"][case]
        assert solver["model_status"] == "Optimal"
        assert solver["mip_gap"] <= 1e-9
        assert solver["dual_bound_profit"] == pytest.approx(q1[f"{case}_profit_yuan"], abs=0.01)
        assert q1[f"{case}_revenue_yuan"] - q1[f"{case}_cost_yuan"] == pytest.approx(q1[f"{case}_profit_yuan"], abs=0.01)
    assert q1["discount_profit_yuan"] >= q1["waste_profit_yuan"]


def test_plans_obey_rotation_legume_and_dispersion_rules(artifact: dict[str, Any]) -> None:
    q1 = artifact["experiment_result"]["q1"]
    for case in ("waste", "discount"):
        plan = [tuple(row) for row in q1[f"{case}_plan"]]
        assert plan
        by_plot: dict[str, dict[tuple[int, int], set[int]]] = defaultdict(lambda: defaultdict(set))
        per_season: dict[tuple[int, str, int], int] = defaultdict(int)
        for year, plot, season, crop in plan:
            halves = (0, 1) if season == "单季" and plot.startswith("D") else ((1,) if season == "第二季" else (0,))
            for half in halves:
                assert not by_plot[plot][(year, half)], f"{case}: two crops on {plot} {year}/{half}"
                by_plot[plot][(year, half)].add(crop)
            per_season[(year, season, crop)] += 1
        assert max(per_season.values()) <= 5
        for plot, seasons in by_plot.items():
            halves = (0,) if plot[0] in "ABC" else (0, 1)
            order = [(year, half) for year in range(2024, 2031) for half in halves]
            for k1, k2 in itertools.pairwise(order):
                repeated = seasons.get(k1, set()) & seasons.get(k2, set())
                if k1[0] == k2[0]:
                    repeated -= {16}          # rice fills both halves of one year: one planting
                assert not repeated, f"{case}: {plot} repeats {repeated} in {k1}->{k2}"
            for start in range(2024, 2029):
                legume = any(crops & LEGUMES for (year, _), crops in seasons.items() if start <= year <= start + 2)
                assert legume, f"{case}: {plot} has no legume in {start}-{start + 2}"


def test_answer_templates_hold_the_plans(run_dir: Path, artifact: dict[str, Any]) -> None:
    import openpyxl

    q1 = artifact["experiment_result"]["q1"]
    assert artifact["experiment_result"]["artifacts"] == ["result1_1.xlsx", "result1_2.xlsx"]
    for case, name in (("waste", "result1_1.xlsx"), ("discount", "result1_2.xlsx")):
        book = openpyxl.load_workbook(run_dir / name, read_only=True)
        for year in range(2024, 2031):
            cells = [v for row in book[str(year)].iter_rows(min_row=2, max_row=83, min_col=3, values_only=True)
                     for v in row if isinstance(v, (int, float))]
            planted = [row for row in q1[f"{case}_plan"] if row[0] == year]
            assert len(cells) == len(planted), (name, year)
        book.close()


def test_replay_check_accepts_the_anchor(task: Path) -> None:
    expected = json.loads((task / "tests" / "expected_result.json").read_text(encoding="utf-8"))
    results = get("crop_planting_revenue").run(expected)
    assert len(results) == 6
    assert all(r.status == "passed" for r in results), [r.message for r in results if r.status != "passed"]


def test_replay_check_rejects_profit_above_the_ceiling(task: Path) -> None:
    limits = ceilings()
    assert limits is not None, "official attachments of the crop task not found"
    expected = json.loads((task / "tests" / "expected_result.json").read_text(encoding="utf-8"))
    forged = json.loads(json.dumps(expected))
    q1 = forged["experiment_result"]["q1"]
    q1["waste_profit_yuan"] = round(limits["waste_profit"] + 1000.0, 2)
    q1["waste_revenue_yuan"] = q1["waste_profit_yuan"] + q1["waste_cost_yuan"]
    results = {r.name: r for r in get("crop_planting_revenue").run(forged)}
    failed = {name for name, r in results.items() if r.hard_error}
    assert failed == {"crop_planting_waste_profit_ceiling"}   # revenue (+ real cost) stays below its own ceiling
    assert "ceiling" in results["crop_planting_waste_profit_ceiling"].message


def test_replay_check_flags_inconsistent_balance_as_warning(task: Path) -> None:
    expected = json.loads((task / "tests" / "expected_result.json").read_text(encoding="utf-8"))
    forged = json.loads(json.dumps(expected))
    forged["experiment_result"]["q1"]["discount_cost_yuan"] *= 3
    result = {r.name: r for r in get("crop_planting_revenue").run(forged)}["crop_planting_discount_balance"]
    assert result.status == "failed" and result.severity == "warning" and not result.hard_error


def test_replay_check_never_hard_fails_an_empty_artifact() -> None:
    artifacts: list[dict[str, Any]] = [{}, {"experiment_result": {}},
                                       {"experiment_result": {"q1": {"waste_profit_yuan": "n/a"}}}]
    for artifact in artifacts:
        results = get("crop_planting_revenue").run(artifact)
        assert results and all(r.status == "missing" and r.severity == "warning" for r in results)


def test_replay_check_without_the_official_data_is_missing_evidence(task: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from anchorage.invariants.replays import crop_planting

    monkeypatch.setattr(crop_planting, "_task_data_dirs", lambda: [tmp_path / "nowhere"])
    expected = json.loads((task / "tests" / "expected_result.json").read_text(encoding="utf-8"))
    results = {r.name: r for r in get("crop_planting_revenue").run(expected)}
    ceiling = results["crop_planting_waste_profit_ceiling"]
    assert ceiling.status == "missing" and ceiling.severity == "warning" and "not found" in ceiling.message
    assert results["crop_planting_waste_balance"].status == "passed"   # needs no data
