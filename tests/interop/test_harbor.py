"""anchorage export harbor / import harbor: the demo campaign as a Harbor job folder that Harbor's own models
read; the job imported back and scored here gives the same numbers (compare finds no difference); Harbor's
exceptions are classified (agent-side: the model's failure; anything else: infrastructure); links in a
Harbor trial's artifacts are never followed; exit codes and --json shapes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import anchorage_cli

CHECK = Path(__file__).with_name("harbor_check.py")


def _harbor_read(job: Path) -> dict[str, object]:
    pytest.importorskip("harbor", reason="the harbor package is not installed (make venv installs it)")
    done = subprocess.run([sys.executable, str(CHECK), str(job)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _export(demo_runs: Path, out: Path) -> Path:
    done = anchorage_cli("export", "harbor", str(demo_runs / "demo"), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    shape = json.loads(done.stdout)
    assert set(shape) == {"campaign", "job"} and shape["campaign"] == "demo"
    return Path(shape["job"])


def test_the_export_is_read_by_harbors_own_models(demo_runs: Path, tmp_path: Path) -> None:
    job = _export(demo_runs, tmp_path / "jobs")
    read = _harbor_read(job)
    assert read["job_name"] == "demo" and read["n_attempts"] == 3 and sorted(read["agents"]) == ["mock", "oracle"]
    assert read["n_completed"] == 6 and read["n_errored"] == 0
    trials = read["trials"]
    assert isinstance(trials, dict) and len(trials) == 6
    for name, trial in trials.items():
        record = json.loads((demo_runs / "demo" / name / "trial.json").read_text())
        assert trial["task"] == "smoke-inventory" and trial["reward"] == pytest.approx(record["score"]["o_eval"])
        assert trial["cost"] == pytest.approx(record["cost_usd"])
        assert (job / name / "verifier" / "reward.txt").read_text().strip() == str(trial["reward"])
        assert (job / name / "verifier" / "score.json").is_file()
        assert any((job / name / "artifacts").iterdir())
    again = anchorage_cli("export", "harbor", str(demo_runs / "demo"), "--out", str(tmp_path / "jobs"))
    assert again.returncode == 2 and "not empty" in again.stderr


def test_a_harbor_job_imported_scores_as_it_did_here(demo_runs: Path, tmp_path: Path) -> None:
    job = _export(demo_runs, tmp_path / "jobs")
    done = anchorage_cli("import", "harbor", str(job), "--runs-dir", str(tmp_path / "runs"), "--name", "back",
                         "--baseline", "mock", "--no-plots", "--json")
    assert done.returncode == 0, done.stderr
    shape = json.loads(done.stdout)
    assert {"run", "profile", "leaderboard", "trials", "outputs"} <= set(shape) and shape["profile"] == "paper@1"
    assert {t["phase"] for t in shape["trials"].values()} == {"Succeeded"}
    compared = anchorage_cli("compare", str(demo_runs / "demo"), str(tmp_path / "runs" / "back"), "--json")
    assert compared.returncode == 0, compared.stderr
    cells = json.loads(compared.stdout)["cells"]
    assert cells and all(c["delta"] == 0 and c["seeds_a"] == c["seeds_b"] for c in cells)
    assert (tmp_path / "runs" / "back" / "report.html").is_file()
    rescored = anchorage_cli("rescore", str(tmp_path / "runs" / "back"), "--profile", "strict", "--no-plots", "--json")
    assert rescored.returncode == 0, rescored.stderr
    rescore_shape = json.loads(rescored.stdout)
    assert set(rescore_shape) == {"run", "profile", "leaderboard", "outputs"} and rescore_shape["profile"] == "strict@1"


def test_harbor_exceptions_are_classified(demo_runs: Path, tmp_path: Path) -> None:
    job = _export(demo_runs, tmp_path / "jobs")

    def edit(trial: str, kind: str, *, drop_artifacts: bool) -> None:
        path = job / trial / "result.json"
        result = json.loads(path.read_text())
        result["exception_info"] = {"exception_type": kind, "exception_message": "boom", "exception_traceback": "",
                                    "occurred_at": "2026-12-01T00:00:00+00:00"}
        path.write_text(json.dumps(result))
        if drop_artifacts:
            shutil.rmtree(job / trial / "artifacts")

    edit("demo-mock-smoke-inventory-s0", "AgentTimeoutError", drop_artifacts=True)
    failed = anchorage_cli("import", "harbor", str(job), "--runs-dir", str(tmp_path / "r1"), "--no-plots", "--json")
    assert failed.returncode == 1, failed.stderr
    trials = json.loads(failed.stdout)["trials"]
    assert trials["demo-mock-smoke-inventory-s0"] == {"phase": "Failed", "reason": "timeout", "o_eval": None}
    edit("demo-oracle-smoke-inventory-s1", "EnvironmentStartTimeoutError", drop_artifacts=False)
    infra = anchorage_cli("import", "harbor", str(job), "--runs-dir", str(tmp_path / "r2"), "--no-plots", "--json")
    assert infra.returncode == 3, infra.stderr
    assert json.loads(infra.stdout)["trials"]["demo-oracle-smoke-inventory-s1"]["phase"] == "InfrastructureFailed"


def test_links_in_harbor_artifacts_are_not_followed(demo_runs: Path, tmp_path: Path) -> None:
    job = _export(demo_runs, tmp_path / "jobs")
    artifacts = job / "demo-mock-smoke-inventory-s0" / "artifacts"
    shutil.rmtree(artifacts)
    artifacts.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text("{}")
    os.symlink(secret, artifacts / "smoke-inventory_result.json")
    done = anchorage_cli("import", "harbor", str(job), "--runs-dir", str(tmp_path / "runs"), "--no-plots", "--json")
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["trials"]["demo-mock-smoke-inventory-s0"]["reason"] == "no_artifact"
    assert not list((tmp_path / "runs" / "demo" / "demo-mock-smoke-inventory-s0" / "artifacts").iterdir())


def test_bad_harbor_input_exits_2(demo_runs: Path, tmp_path: Path) -> None:
    job = _export(demo_runs, tmp_path / "jobs")
    path = job / "demo-mock-smoke-inventory-s0" / "result.json"
    result = json.loads(path.read_text())
    result["task_name"] = "smoke-inventroy"
    path.write_text(json.dumps(result))
    done = anchorage_cli("import", "harbor", str(job), "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 2 and "smoke-inventroy" in done.stderr and "smoke-inventory" in done.stderr
    empty = anchorage_cli("import", "harbor", str(tmp_path), "--runs-dir", str(tmp_path / "runs"))
    assert empty.returncode == 2 and "no Harbor trial" in empty.stderr
