"""``anchorage rescore-published`` and ``tools/rescore_published.py`` on any published entry's answers.

Three answers files of the published shape (``{ENTRY: {TASK: {METRIC_PATH: value}}}``): v4 pro's (complete but
for crop planting's discount profit), the DeepSeek/Terminus-2 entry of the benchmark's docs/EVALUATION_RESULTS.md
(three tasks with no answer at all, one answered only on a retired metric panel, 0.0 answers of a timed-out job)
and five entries quoted in the benchmark's feasibility audit (a value or two each, one entry with none). Every
one is rescored without a crash; a task without answers is reported missing — no score, out of the means —
never a zero; a partly answered task is marked; a file of another shape is one clear error (exit 2).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import anchorage_cli
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.errors import InputError
from anchorage.scoring.published import benchmark_tasks, load_answers, rescore_entry

PUBLISHED = Path(__file__).parent / "published"
REPO = Path(__file__).resolve().parents[2]
V4_PRO, V4_PRO_SCORES = PUBLISHED / "v4-pro-answers.json", PUBLISHED / "v4-pro-scores.json"
DEEPSEEK, AUDIT = PUBLISHED / "deepseek-terminus2-answers.json", PUBLISHED / "audit-entries-answers.json"
CROP = "cumcm-2024-c-crop-planting"


def run(*args: str) -> Any:
    result = CliRunner().invoke(app, ["rescore-published", *args])
    return result


def as_json(*args: str) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_the_benchmark_is_the_18_tasks_with_a_published_anchor() -> None:
    names = [p.name for p in benchmark_tasks()]
    assert len(names) == 18 and "smoke-inventory" not in names


def test_v4_pro_under_the_report_s_profile_reproduces_17_published_cells() -> None:
    entry = as_json(str(V4_PRO), "--profile", "tbmm-report-2026-09", "--scores", str(V4_PRO_SCORES))["entries"][0]
    assert entry["entry"] == "v4 pro" and entry["profile"] == "tbmm-report-2026-09"
    same = [t["task"] for t in entry["tasks"]
            if f"{100 * t['o_eval']:.2f}" == f"{100 * t['published']['o_eval']:.2f}"
            and f"{100 * t['bo_eval']:.2f}" == f"{100 * t['published']['bo_eval']:.2f}"]
    assert len(same) == 17 and CROP not in same
    crop = next(t for t in entry["tasks"] if t["task"] == CROP)
    assert crop["status"] == "partial" and crop["unanswered"] == ["experiment_result.q1.discount_profit_yuan"]
    assert sorted(crop["unused_answers"]) == ["experiment_result.q2_q3.best_correlated_cvar10_profit_yuan",
                                              "experiment_result.q2_q3.spearman_price_cost"]
    summary = entry["summary"]
    assert summary["scored"] == 18 and summary["missing"] == [] and summary["partial"] == [CROP]
    assert f"{100 * summary['published_mean_o_eval']:.2f}" == "58.44" and summary["hard_gated"] == []


def test_an_entry_with_tasks_unanswered_reports_them_missing_never_zero() -> None:
    entry = as_json(str(DEEPSEEK), "--profile", "paper")["entries"][0]
    by_task = {t["task"]: t for t in entry["tasks"]}
    missing = {"cumcm-2023-a-heliostat-field", "cumcm-2023-b-multibeam-lines", "cumcm-2025-a-smoke-screen", CROP}
    assert set(entry["summary"]["missing"]) == missing
    for slug in missing:
        assert by_task[slug]["status"] == "missing"
        assert by_task[slug]["o_eval"] is None and by_task[slug]["bo_eval"] is None and by_task[slug]["raw"] is None
    assert by_task[CROP]["note"] == "no answer for any scored metric"     # answered on the retired q2_q3 panel
    assert len(by_task[CROP]["unused_answers"]) == 2
    scored = [t for t in entry["tasks"] if t["status"] != "missing"]
    assert len(scored) == 14 == entry["summary"]["scored"]
    mean = sum(t["o_eval"] for t in scored) / len(scored)
    assert entry["summary"]["mean_o_eval"] == pytest.approx(mean, abs=1e-6)   # over the answered tasks only
    dragon = by_task["cumcm-2024-a-dragon-dance"]       # 0.0 answers are answers (a scored miss), not missing
    assert dragon["status"] == "complete" and dragon["o_eval"] == 0.0
    olympics = by_task["mcm-2025-c-olympic-medals"]     # the 4th recommendation is excluded: not counted missing
    assert olympics["status"] == "complete" and olympics["unanswered"] == []


def test_several_entries_few_answers_and_an_empty_entry() -> None:
    data = as_json(str(AUDIT))
    entries = {e["entry"]: e for e in data["entries"]}
    assert len(entries) == 5
    empty = entries["GLM-5.3-Flash (ox-alpha)"]["summary"]
    assert empty["scored"] == 0 and len(empty["missing"]) == 18 and empty["mean_o_eval"] is None
    deepseek_max = {t["task"]: t for t in entries["opencode + deepseek-flash (max)"]["tasks"]}
    assert deepseek_max["cumcm-2025-a-smoke-screen"]["status"] == "missing"       # N/A in the audit: null
    helio = deepseek_max["cumcm-2023-a-heliostat-field"]
    assert helio["status"] == "partial" and helio["hard_gates"] == ["q3_rated_power_range"] and helio["o_eval"] == 0.0
    kimi = {t["task"]: t for t in entries["Kimi K3"]["tasks"]}
    assert kimi["mcm-2025-b-juneau-tourism"]["hard_gates"] == ["juneau_sustainability_units"]   # 232.2
    assert entries["Kimi K3"]["summary"]["hard_gated"] == ["mcm-2025-b-juneau-tourism"]
    only = as_json(str(AUDIT), "--entry", "Kimi K3")["entries"]
    assert [e["entry"] for e in only] == ["Kimi K3"]


def test_unknown_tasks_and_paths_are_listed_not_fatal(tmp_path: Path) -> None:
    answers = {"_about": "constructed", "me": {
        "mcm-2025-b-juneau-turism": {"experiment_result.annual_visitors": 1.0},        # a misspelt slug
        "mcm-2023-c-wordle": {"target_comparison.lightgbm_like_accuracy.actual": "0.31", "no.such.path": 1,
                              "target_comparison.eerie_group.actual": None},   # weight 0: not a scored metric
    }}
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(answers), encoding="utf-8")
    entry = rescore_entry("me", load_answers(path)["me"], "paper")
    by_task = {t.task: t for t in entry.tasks}
    unknown = by_task["mcm-2025-b-juneau-turism"]
    assert unknown.status == "unknown_task" and "mcm-2025-b-juneau-tourism" in unknown.note
    wordle = by_task["mcm-2023-c-wordle"]
    assert wordle.status == "complete" and wordle.unused == ["no.such.path", "target_comparison.eerie_group.actual"]
    assert wordle.record is not None and wordle.record.metrics[1].number == 0.31    # a numeric string is read
    text = run(str(path)).stdout
    assert "answers for tasks the suite does not have: mcm-2025-b-juneau-turism" in text
    assert "1 of 18 benchmark tasks scored" in text


@pytest.mark.parametrize(("content", "message"), [
    ("not json", "is not valid JSON"),
    ("[1, 2]", "holds a JSON list, not an object"),
    ('{"_about": "notes only"}', "names no entry"),
    ('{"e": [1]}', "entry 'e' holds a JSON list"),
    ('{"e": {"mcm-2023-c-wordle": 0.3}}', "task 'mcm-2023-c-wordle' holds a JSON float"),
])
def test_a_file_of_another_shape_is_one_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "answers.json"
    path.write_text(content, encoding="utf-8")
    error = run(str(path)).exception
    assert isinstance(error, InputError) and message in error.message and "{ENTRY: {TASK_SLUG" in (error.hint or "")


def test_bad_input_exits_2_with_the_message_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "answers.json").write_text("[1, 2]", encoding="utf-8")
    proc = anchorage_cli("rescore-published", str(tmp_path / "answers.json"), timeout=120)
    assert proc.returncode == 2 and "holds a JSON list" in proc.stderr and "fix:" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_an_unknown_entry_and_a_missing_file_are_bad_input(tmp_path: Path) -> None:
    error = run(str(V4_PRO), "--entry", "v4 por").exception
    assert isinstance(error, InputError) and "did you mean 'v4 pro'" in error.message
    error = run(str(tmp_path / "none.json")).exception
    assert isinstance(error, InputError) and "does not exist" in error.message


def test_the_tool_takes_any_answers_file() -> None:
    """tools/rescore_published.py (every profile side by side) on the files that made its old copy fail."""
    for path in (DEEPSEEK, AUDIT):
        proc = subprocess.run([sys.executable, str(REPO / "tools" / "rescore_published.py"), str(path), "--json"],
                              capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr
        table = json.loads(proc.stdout)
        statuses = {row["task"]: row["status"] for row in table["tasks"]}
        assert "missing" in statuses.values()
        for row in table["tasks"]:
            if row["status"] == "missing":
                assert all(row[p] is None for p in ("paper", "strict", "errata", "tbmm-report-2026-09"))
