"""The CLI of the local engine: `anchorage oracle` on an imported anchor, `anchorage run` on a bad file."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from anchorage.cli import app


def test_oracle_of_an_imported_anchor_says_so(imported_anchor_task: Path) -> None:
    result = CliRunner().invoke(app, ["oracle", str(imported_anchor_task)])
    assert result.exit_code == 1
    assert "anchor is imported" in result.output and "expected_result.json" in result.output


def test_run_reports_a_bad_manifest_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: anchorage.dev/v1alpha1\nkind: Trial\nmetadata: {name: t}\nspec:\n"
                    "  task: smoke-inventory\n  agent: {kind: oracle}\n  seed: -1\n")
    result = CliRunner().invoke(app, ["run", str(path), "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code != 0
    message = str(result.exception)
    assert "bad.yaml:7:" in message and "spec.seed" in message and "fix:" in message


def test_run_publishes_trial_metrics(tmp_path: Path) -> None:
    from prometheus_client import REGISTRY

    path = tmp_path / "c.yaml"
    path.write_text("apiVersion: anchorage.dev/v1alpha1\nkind: VerificationCampaign\nmetadata: {name: metr}\n"
                    "spec:\n  tasks: [smoke-inventory]\n  seeds: 2\n  entries:\n    - {name: o, agent: {kind: oracle}}\n")
    result = CliRunner().invoke(app, ["run", str(path), "--runs-dir", str(tmp_path / "runs"), "--metrics-port", "0",
                                      "--no-plots"])
    assert result.exit_code == 0, result.output
    finished = REGISTRY.get_sample_value("anchorage_trials_finished_total", {
        "campaign": "metr", "entry": "o", "task": "smoke-inventory", "phase": "Succeeded", "reason": "completed"})
    assert finished == 2.0
    score = {"campaign": "metr", "entry": "o", "task": "smoke-inventory", "profile": "paper"}
    assert REGISTRY.get_sample_value("anchorage_o_eval", score) == 1.0
    assert REGISTRY.get_sample_value("anchorage_seeds_scored", score) == 2.0
    gates = REGISTRY.get_sample_value("anchorage_gates_checked_total",
                                      {"campaign": "metr", "task": "smoke-inventory", "status": "passed"})
    assert gates is not None and gates >= 2  # the engine counts the scorer's gates of both seeds
    assert "Leaderboard" in result.output
