"""One CLI: exit codes (0 done, 1 a model's failure, 2 bad input, 3 the platform), ``--json`` on every command
that prints a result, the task always ``--task``, one ``audit`` group, "did you mean" on misspelt names —
each through the real command (a process of its own) with its exit code and its JSON's shape."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests.conftest import REPO, anchorage_cli

SMOKE = REPO / "tasks" / "smoke-inventory"


def _json(*args: str, code: int = 0) -> object:
    done = anchorage_cli(*args, "--json")
    assert done.returncode == code, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_root_help_documents_the_exit_codes() -> None:
    done = anchorage_cli("--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "Exit codes: 0 done" in text and "2 bad input" in text and "3 an infrastructure failure" in text


def test_tasks_list_show_and_validate_print_json() -> None:
    rows = _json("tasks", "list")
    assert isinstance(rows, list) and {"slug", "scored", "declared", "schema", "name"} <= set(rows[0])
    shown = _json("tasks", "show", "--task", "smoke-inventory")
    assert isinstance(shown, dict)
    validated = _json("tasks", "validate", str(SMOKE))
    assert isinstance(validated, list) and validated[0]["ok"] is True and validated[0]["errors"] == 0


def test_the_task_is_spelt_task_everywhere_and_old_positionals_still_work() -> None:
    for command in (["tasks", "show"], ["oracle"], ["score", "x.json"], ["lean", "check", "x.json"]):
        done = anchorage_cli(*command, "--help")
        assert "--task" in done.stdout and "-t" in done.stdout, command
    old = anchorage_cli("tasks", "show", "smoke-inventory", "--json")
    assert old.returncode == 0 and "is given as --task now" in old.stderr
    assert json.loads(old.stdout) == _json("tasks", "show", "-t", "smoke-inventory")
    neither = anchorage_cli("tasks", "show")
    assert neither.returncode == 2 and "needs a task" in neither.stderr


def test_unknown_task_names_and_fields_get_a_suggestion(tmp_path: Path) -> None:
    done = anchorage_cli("tasks", "show", "--task", "smoke-inventroy")
    assert done.returncode == 2 and "did you mean 'smoke-inventory'" in done.stderr
    manifest = tmp_path / "c.yaml"
    manifest.write_text("apiVersion: anchorage.dev/v1alpha1\nkind: VerificationCampaign\nmetadata: {name: c}\n"
                        "spec:\n  tasks: [smoke-inventory]\n  seed: 2\n  entries:\n"
                        "    - {name: a, agent: {kind: orcale}}\n")
    done = anchorage_cli("run", str(manifest), "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 2
    assert "unknown field 'spec.seed'" in done.stderr and "did you mean 'seeds'" in done.stderr
    assert "did you mean 'oracle'" in done.stderr
    done = anchorage_cli("score", "--task", str(SMOKE), str(SMOKE / "tests" / "expected_result.json"),
                         "--profile", "strickt")
    assert done.returncode == 2 and "did you mean 'strict'" in done.stderr


def test_oracle_report_and_agents_print_json(mechanism: object, tmp_path: Path, demo_runs: Path,
                                            imported_anchor_task: Path) -> None:
    oracle = _json("oracle", "--task", "smoke-inventory", "--runs-dir", str(tmp_path / "runs"))
    assert isinstance(oracle, dict) and oracle["phase"] == "Succeeded" and oracle["score"]["o_eval"] == 1.0
    imported = _json("oracle", "-t", str(imported_anchor_task), "--runs-dir", str(tmp_path / "runs"), code=1)
    assert isinstance(imported, dict) and imported["imported_anchor"] is True
    run = tmp_path / "demo"
    shutil.copytree(demo_runs / "demo", run)
    report = _json("report", str(run))
    assert isinstance(report, dict) and report["leaderboard"]["rows"][0]["entry"] == "oracle"
    assert report["outputs"]["html"].endswith("report.html") and report["profile"] == "paper@1"
    agents = _json("agents", "list")
    assert isinstance(agents, list) and {a["kind"] for a in agents} == {"codex", "claude-code", "opencode"}


def test_verify_numeric_and_cbu_print_json_only_when_asked(tmp_path: Path) -> None:
    problem = tmp_path / "p.md"
    problem.write_text("What is 6 times 7? Give the number.")
    plain = anchorage_cli("verify", "numeric", "--problem", str(problem), "--mock")
    assert plain.returncode in (0, 1) and plain.stdout.startswith("answer:")
    record = _json("verify", "numeric", "--problem", str(problem), "--mock", code=plain.returncode)
    assert isinstance(record, dict) and "answer" in record


@pytest.mark.parametrize("spelling", [["audit", "lean", "--task", str(SMOKE), "--artifact"], ["lean", "audit", "--task",
                                                                                             str(SMOKE)]])
def test_one_audit_group(spelling: list[str], tmp_path: Path) -> None:
    """`audit lean --task T --artifact A` is the trust audit `lean audit` was (kept, hidden, for old scripts)."""
    record = _json(*spelling, str(SMOKE / "tests" / "expected_result.json"), "-o", str(tmp_path / "pkg"))
    assert isinstance(record, dict) and record["ok"] is True
    listed = anchorage_cli("lean", "--help").stdout
    assert "│ check " in listed and "│ audit " not in listed          # one place for audits: the audit group
    half = anchorage_cli("audit", "lean", "--task", str(SMOKE))
    assert half.returncode == 2 and "--artifact" in half.stderr
