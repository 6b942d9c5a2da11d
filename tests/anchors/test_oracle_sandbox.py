"""The sandbox binds of an oracle run: a reproduction sees its solution and the data, never the answer key.

``anchorage oracle`` runs a task's ``solution/solve.sh`` with the same sandbox as an agent plus the task's
``solution/`` bound read-only at ``/solution``. A hostile "reproduction" (a probe in a copy of the smoke
task, whose ``tests/`` holds a canary file) walks the whole visible file system for answer keys, tries to
read the task's ``tests/`` by every path it could guess, and tries to write into the solution, the data,
the task and the repository. Only its artifact may come out of the run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from .reproduction import tree_hash

REPO = Path(__file__).resolve().parents[2]
SLUG = "smoke-inventory"

PROBE = r'''
import json, os, sys
canary, host_task, repo = sys.argv[1], sys.argv[2], sys.argv[3]
keys = {"expected_result.json", "score_config.json", "invariants.yaml", canary}
found = []
for top, dirs, files in os.walk("/", onerror=lambda e: None):
    if top in ("/proc", "/sys", "/dev"):
        dirs[:] = []
        continue
    found += [os.path.join(top, f) for f in files if f in keys or f.startswith("CANARY-")]
guesses = [f"{host_task}/tests/{canary}", f"{host_task}/tests/expected_result.json", "/tests/expected_result.json",
           f"/solution/../tests/{canary}", f"/root/data/../tests/{canary}", f"/root/data/../../tests/{canary}",
           f"{repo}/tasks/{os.path.basename(host_task)}/tests/expected_result.json",
           f"{repo}/tasks/cumcm-2024-b-production-decision/tests/expected_result.json"]
readable = []
for path in guesses:
    try:
        with open(path, "rb") as handle:
            handle.read(1)
        readable.append(path)
    except OSError:
        pass
targets = ["/solution/written.txt", "/root/data/written.txt", f"{host_task}/written.txt",
           f"{host_task}/tests/written.txt", f"{repo}/written.txt", f"{repo}/.venv/written.txt"]
written = []
for path in targets:
    try:
        with open(path, "w") as handle:
            handle.write("x")
        written.append(path)
    except OSError:
        pass
with open(f"/root/results/{os.environ['TASK_SLUG']}_result.json", "w") as out:
    json.dump({"probe": {"found": found, "readable": readable, "written": written,
                         "solution_listing": sorted(os.listdir("/solution"))}}, out)
'''


@pytest.fixture(scope="module")
def probe_run(tmp_path_factory: pytest.TempPathFactory, mechanism: str) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("oracle-binds")
    task = work / SLUG
    shutil.copytree(REPO / "tasks" / SLUG, task)
    canary = f"CANARY-{uuid.uuid4().hex}.json"
    (task / "tests" / canary).write_text('{"answer": 42}', encoding="utf-8")
    (task / "CANARY-root.txt").write_text("task root", encoding="utf-8")
    (task / "solution" / "probe.py").write_text(PROBE, encoding="utf-8")
    (task / "solution" / "solve.sh").write_text(
        "#!/usr/bin/env bash\nset -euo pipefail\n"
        f'TASK_SLUG={SLUG} exec "${{PYTHON:-python3}}" /solution/probe.py {canary} {task} {REPO}\n', encoding="utf-8")
    before = {name: tree_hash(task / name) for name in ("solution", "tests", "environment")}
    runs = work / "runs"
    cli = str(Path(sys.executable).with_name("anchorage"))
    proc = subprocess.run([cli, "oracle", "--task", str(task), "--runs-dir", str(runs)],
                          capture_output=True, text=True, check=False, timeout=600)
    (folder,) = runs.iterdir()
    artifact = folder / "artifacts" / f"{SLUG}_result.json"
    assert artifact.is_file(), proc.stdout + proc.stderr + (folder / "agent" / "stderr.log").read_text(encoding="utf-8")
    return {"task": task, "folder": folder, "canary": canary, "before": before, "proc": proc,
            "probe": json.loads(artifact.read_text(encoding="utf-8"))["probe"]}


@pytest.mark.sandbox
def test_the_probe_ran_as_the_oracle_with_its_solution_mounted(probe_run: dict[str, Any]) -> None:
    record = json.loads((probe_run["folder"] / "trial.json").read_text(encoding="utf-8"))
    assert record["agent"]["kind"] == "oracle" and record["phase"] == "Succeeded", record
    assert "probe.py" in probe_run["probe"]["solution_listing"] and "solve.sh" in probe_run["probe"]["solution_listing"]


@pytest.mark.sandbox
def test_no_answer_key_is_visible_anywhere_in_the_sandbox(probe_run: dict[str, Any]) -> None:
    assert probe_run["probe"]["found"] == []
    assert probe_run["probe"]["readable"] == []


@pytest.mark.sandbox
def test_nothing_outside_the_artifact_is_written(probe_run: dict[str, Any]) -> None:
    task: Path = probe_run["task"]
    assert probe_run["probe"]["written"] == []
    assert {name: tree_hash(task / name) for name in ("solution", "tests", "environment")} == probe_run["before"]
    assert not (REPO / "written.txt").exists() and not (task / "written.txt").exists()
    artifacts = sorted(p.name for p in (probe_run["folder"] / "artifacts").iterdir())
    assert artifacts == [f"{SLUG}_result.json"]
