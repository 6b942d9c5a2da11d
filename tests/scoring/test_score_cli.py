"""``anchorage score``: JSON record, table, reward.json, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.errors import InputError

from .conftest import TaskFactory

METRICS = [{"path": "a.b", "oracle_value": 2.0, "direction": "higher_is_better"}]


@pytest.fixture
def task(make_task: TaskFactory) -> Path:
    return make_task(METRICS, {"a": {"b": 2.0}}, baseline_endpoint={"panel_score": 0.2})


def test_json_record(task: Path, write_json: Callable[..., Path]) -> None:
    result = CliRunner().invoke(app, ["score", "--task", str(task), str(write_json({"a": {"b": 1.76}})), "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["raw"] == pytest.approx(1 / (1 + 0.24 / 0.24))
    assert record["baseline_source"] == "config:baseline_endpoint.panel_score"
    assert record["metrics"][0]["path"] == "a.b" and record["metrics"][0]["status"] == "scored"


def test_reward_file_is_a_flat_map_of_numbers(task: Path, write_json: Callable[..., Path], tmp_path: Path) -> None:
    reward = tmp_path / "logs" / "verifier" / "reward.json"
    result = CliRunner().invoke(app, ["score", "--task", str(task), str(write_json({"a": {"b": 2.0}})),
                                      "--reward-file", str(reward)])
    assert result.exit_code == 0, result.output
    data = json.loads(reward.read_text())
    assert {"reward", "raw", "o_eval", "bo_eval", "oracle_raw", "baseline_raw"} <= set(data)
    assert all(isinstance(v, float) for v in data.values())
    assert (data["raw"], data["o_eval"], data["reward"], data["bo_eval"]) == (1.0, 1.0, 1.0, 1.0)


def test_table_output_names_the_numbers(task: Path, write_json: Callable[..., Path]) -> None:
    result = CliRunner().invoke(app, ["score", "--task", str(task), str(write_json({"a": {"b": "x"}}))])
    assert result.exit_code == 0, result.output
    assert "O-Eval" in result.stdout and "non_numeric" in result.stdout and "a.b" in result.stdout


def test_ungradable_artifact_is_a_record_not_an_error(task: Path, write_json: Callable[..., Path]) -> None:
    result = CliRunner().invoke(app, ["score", "--task", str(task), str(write_json("[1, 2]")), "--json"])
    assert result.exit_code == 1   # the model's failure: the record says why
    record = json.loads(result.stdout)
    assert record["gradable"] is False and record["bo_eval"] == -1.0 and "array" in record["error"]


def test_a_missing_artifact_is_bad_input(task: Path, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", "from anchorage.cli import main; main()", "score", "--task",
                           str(task), str(tmp_path / "nope.json"), "--json"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "no such artifact" in proc.stderr and proc.stdout == ""


def test_baseline_is_a_number_or_a_path(task: Path, write_json: Callable[..., Path]) -> None:
    artifact = str(write_json({"a": {"b": 1.0}}))
    by_number = CliRunner().invoke(app, ["score", "-t", str(task), artifact, "--baseline", "0.25", "--json"])
    record = json.loads(by_number.stdout)
    assert by_number.exit_code == 0 and record["baseline_raw"] == 0.25
    by_path = CliRunner().invoke(app, ["score", "-t", str(task), artifact, "--baseline", artifact, "--json"])
    assert by_path.exit_code == 0 and json.loads(by_path.stdout)["baseline_raw"] == record["raw"]
    bad = CliRunner().invoke(app, ["score", "-t", str(task), artifact, "--baseline", "nan"])
    assert isinstance(bad.exception, InputError) and "finite number" in str(bad.exception)


def test_bad_task_is_an_input_error(tmp_path: Path, write_json: Callable[..., Path]) -> None:
    result = CliRunner().invoke(app, ["score", "--task", str(tmp_path / "nope"), str(write_json({}))])
    assert isinstance(result.exception, InputError) and "no task named" in str(result.exception)


def test_cli_exit_code_and_message_for_a_missing_config(task: Path, write_json: Callable[..., Path]) -> None:
    (task / "tests" / "score_config.json").unlink()
    proc = subprocess.run([sys.executable, "-c", "from anchorage.cli import main; main()", "score", "--task",
                           str(task), str(write_json({}))], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "score_config.json is missing" in proc.stderr and "fix:" in proc.stderr
