"""`anchorage lean gen|check|audit` on the command line: files written, which checker ran, exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.lean.runner import lake_path
from invariants.anchors import TASKS, anchor_path

SLUG = "cumcm-2024-a-dragon-dance"


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    if not anchor_path(SLUG).is_file():
        pytest.skip("dragon anchor missing")
    target = tmp_path / "dragon_result.json"
    shutil.copy(anchor_path(SLUG), target)
    return target


def test_gen_writes_the_package(tmp_path: Path, artifact: Path) -> None:
    out = tmp_path / "pkg"
    result = CliRunner().invoke(app, ["lean", "gen", "--task", str(TASKS / SLUG), str(artifact), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "Obligations" / "DragonDance.lean").is_file() and (out / "lakefile.toml").is_file()
    assert "17 theorems, 0 skipped" in result.output


def test_check_reports_which_checker_ran(tmp_path: Path, artifact: Path) -> None:
    result = CliRunner().invoke(app, ["lean", "check", "--task", str(TASKS / SLUG), str(artifact),
                                      "--report-dir", str(tmp_path / "reports")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "reports" / "dragon_result.lean-check.json").read_text(encoding="utf-8"))
    if lake_path() is None:
        assert report["checker"] == "python" and "checker=python" in result.output
        assert "lake not on PATH" in result.output and report["lean"]["ran"] is False
    else:
        assert report["checker"] == "python+lean" and report["counts"]["disagreements"] == 0
    assert report["counts"]["failed"] == 0 and report["counts"]["total"] == 17


def test_check_fails_on_a_false_obligation_and_names_its_path(tmp_path: Path, artifact: Path) -> None:
    data = json.loads(artifact.read_text(encoding="utf-8"))
    data["experiment_result"]["q5"]["max_head_speed_mps"] = 1.406276
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    result = CliRunner().invoke(app, ["lean", "check", "--task", str(TASKS / SLUG), str(bad), "--no-lean"])
    assert result.exit_code == 1
    assert "FAILED DragonDance.q5_head_ratio_identity" in result.output
    assert "experiment_result.q5.max_head_speed_mps" in result.output


def test_audit_runs_the_grep_and_says_so(tmp_path: Path, artifact: Path) -> None:
    result = CliRunner().invoke(app, ["lean", "audit", "--task", str(TASKS / SLUG), str(artifact),
                                      "-o", str(tmp_path / "pkg")])
    assert result.exit_code == 0, result.output
    expected = "source grep + #print axioms" if lake_path() else "checker=source grep"
    assert expected in result.output and "OK" in result.output


def test_bad_task_is_an_input_error(tmp_path: Path, artifact: Path) -> None:
    result = CliRunner().invoke(app, ["lean", "gen", "--task", str(tmp_path), str(artifact), "-o", str(tmp_path / "o")])
    assert result.exit_code != 0
