"""``anchorage tasks validate`` / ``list``: every problem with its path and a fix hint."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.scoring.validation import Problem, validate_task


def errors(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]


@pytest.fixture
def copied(reference_dir: Path, tmp_path: Path) -> Path:
    """A writable copy of the dragon-dance task (without its large data folder)."""
    src = reference_dir / "tasks" / "cumcm-2024-a-dragon-dance"
    dst = tmp_path / src.name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("repo"))
    return dst


def test_reference_tasks_have_no_errors(reference_dir: Path) -> None:
    for root in sorted((reference_dir / "tasks").iterdir()):
        problems = validate_task(root)
        assert errors(problems) == [], [p.render() for p in problems]
        assert any("allow_internet" in p.message for p in problems)   # the deprecation is reported


def test_expected_result_mismatch_is_reported(copied: Path) -> None:
    expected = copied / "tests" / "expected_result.json"
    data = json.loads(expected.read_text())
    data["experiment_result"]["q5"]["max_speed_ratio_when_head_1mps"] = 1.5
    expected.write_text(json.dumps(data))
    problems = errors(validate_task(copied))
    assert len(problems) == 1
    assert problems[0].path.endswith("expected_result.json#experiment_result.q5.max_speed_ratio_when_head_1mps")
    assert "1.5" in problems[0].message and problems[0].hint


def test_schema_errors_carry_a_json_pointer(copied: Path) -> None:
    config_path = copied / "tests" / "score_config.json"
    config = json.loads(config_path.read_text())
    config["metrics"][1]["exclude-reason"] = "typo"
    config["metrics"][0]["domain"] = "percent"
    config_path.write_text(json.dumps(config))
    problems = errors(validate_task(copied))
    paths = sorted(p.path.split("#")[1] for p in problems)
    assert paths == ["/metrics/0/domain", "/metrics/1"]
    assert any("exclude-reason" in p.message for p in problems)


def test_every_problem_is_reported(copied: Path) -> None:
    (copied / "task.toml").write_text('schema_version = "1.3"\n[environment]\ncpus = 0\n')
    (copied / "instruction.md").write_text("<!-- harbor-canary GUID x -->\n\n")
    (copied / "tests" / "expected_result.json").unlink()
    problems = validate_task(copied)
    messages = " | ".join(p.render() for p in errors(problems))
    assert "environment.cpus" in messages
    assert "instruction.md: empty" in messages
    assert "expected_result.json does not exist" in messages
    assert all(p.hint for p in problems)


def test_missing_config_and_oracle(copied: Path) -> None:
    (copied / "tests" / "expected_result.json").write_text("[]")
    assert any("not a JSON object" in p.message for p in errors(validate_task(copied)))
    (copied / "tests" / "score_config.json").unlink()
    problems = errors(validate_task(copied))
    assert [p.path.endswith("score_config.json") for p in problems] == [True]


def test_minmax_endpoint_and_degeneracy_are_reported(copied: Path) -> None:
    config_path = copied / "tests" / "score_config.json"
    config = json.loads(config_path.read_text())
    config["metrics"][0].update(normalization_mode="baseline_to_outstanding_target_minmax", baseline_value=2.0,
                                normalization_direction="higher_is_better")
    config["metrics"][1].update(normalization_mode="baseline_to_outstanding_target_minmax",
                                baseline_value=1.4221949)
    config_path.write_text(json.dumps(config))
    problems = validate_task(copied)
    assert any("not above baseline" in p.message for p in errors(problems))
    assert any("widened" in p.message and p.severity == "warning" for p in problems)


def test_cli_validate_exit_codes(reference_dir: Path, copied: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["tasks", "validate", str(reference_dir / "tasks" / "mcm-2023-c-wordle")])
    assert ok.exit_code == 0, ok.output
    assert "ok (0 errors" in ok.stdout
    (copied / "tests" / "score_config.json").write_text("{")
    bad = runner.invoke(app, ["tasks", "validate", str(copied)])
    assert bad.exit_code == 1 and "not valid JSON" in bad.stdout and "fix:" in bad.stdout
    strict = runner.invoke(app, ["tasks", "validate", "--strict", str(reference_dir / "tasks" / "mcm-2023-c-wordle")])
    assert strict.exit_code == 1


def test_cli_list(reference_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["tasks", "list", "--dir", str(reference_dir / "tasks")])
    assert listed.exit_code == 0
    assert "cumcm-2024-a-dragon-dance" in listed.stdout and "mcm-2025-c-olympic-medals" in listed.stdout
    empty = runner.invoke(app, ["tasks", "list", "--dir", str(tmp_path)])
    assert empty.exit_code == 0 and "no tasks under" in empty.stdout


@pytest.mark.skipif(importlib.util.find_spec("anchorage.invariants.gates") is None,
                    reason="anchorage.invariants.gates not written yet: no gates to check the oracle against")
def test_oracle_failing_its_own_hard_gate_is_an_error(copied: Path) -> None:
    (copied / "tests" / "invariants.yaml").write_text(
        "namespace: Dragon\ninvariants:\n"
        "  - {name: too_fast, form: range, path: experiment_result.q5.max_head_speed_mps, hi: 1}\n")
    problems = errors(validate_task(copied))
    assert len(problems) == 1 and "own hard gate" in problems[0].message
    assert "gate:too_fast" in problems[0].path


def test_duplicate_paths_and_disagreeing_anchors_are_warnings(copied: Path) -> None:
    config_path = copied / "tests" / "score_config.json"
    config = json.loads(config_path.read_text())
    config["metrics"].append(dict(config["metrics"][0]))
    config["metrics"][1]["outstanding_value"] = 9.0
    config_path.write_text(json.dumps(config))
    warnings = [p for p in validate_task(copied) if p.severity == "warning"]
    assert any("scored twice" in p.message and p.path.endswith("/metrics/2") for p in warnings)
    assert any("differs from outstanding_value" in p.message for p in warnings)


def test_scored_fields_of_the_output_schema_are_cross_checked(copied: Path) -> None:
    schema = copied / "environment" / "data" / "output_schema.json"
    data = json.loads(schema.read_text())
    data["$scored_fields"] = {"experiment_result.q5.max_head_speed_mps": {"type": "number", "domain": "count"}}
    schema.write_text(json.dumps(data))
    warnings = [p.message for p in validate_task(copied) if p.severity == "warning"]
    assert any("max_speed_ratio_when_head_1mps' is not listed" in w for w in warnings)
    assert any("domain 'count' differs" in w for w in warnings)
