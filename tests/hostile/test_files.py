"""Hostile agents against the engine's reads: symlinked, hard-linked, FIFO and device results and logs.

The honest record of a trial whose only "artifact" is a link or a special file is the model's own
failure: ``Failed``/``no_artifact``, O-Eval 0, BO-Eval −1 — never the answer key's 1.0, never a hang,
never a host file copied into the trial folder.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from anchorage.runtime.local import sandbox
from anchorage.tasks import Task
from hostile.conftest import Attack, RunAttack, write_expected

pytestmark = pytest.mark.sandbox

SECRET = "top-secret-host-file-content"


def _no_artifact(result: Attack) -> None:
    assert result.phase_reason == ("Failed", "no_artifact"), (result.record, result.stderr)
    assert result.record["score"]["o_eval"] == 0.0 and result.record["score"]["bo_eval"] == -1.0


def _folder_holds(folder: Path, needle: bytes) -> list[str]:
    hits = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
            hits.append(str(path))
    return hits


def test_symlink_to_the_answer_key_scores_nothing(attack: RunAttack, mech: sandbox.Mechanism,
                                                  smoke_task: Task) -> None:
    key = smoke_task.expected_result_path.resolve()
    code = f"""
import os
os.symlink({str(key)!r}, "/root/results/{smoke_task.artifact_name}")  # the host path of the answer key
os.symlink({str(key)!r}, "/root/results/result.json")                 # and a near-miss name for recovery
print("links made")
"""
    result = attack(code, mech)
    assert result.said("links made")
    _no_artifact(result)
    assert not (result.folder / "artifacts" / smoke_task.artifact_name).exists()
    assert "not copied" in result.record["sandbox"]["quotas"]["results"].get("copy_note", "")


def test_symlink_to_another_trials_artifact_scores_nothing(attack: RunAttack, mech: sandbox.Mechanism,
                                                           smoke_task: Task, tmp_path: Path) -> None:
    honest = attack(write_expected(smoke_task), mech)
    assert honest.phase_reason == ("Succeeded", "completed") and honest.record["score"]["o_eval"] == 1.0
    victim = honest.folder / "artifacts" / smoke_task.artifact_name
    relative = os.path.relpath(victim, tmp_path / "runs" / "x" / "artifacts")
    code = f"""
import os
os.symlink({str(victim)!r}, "/root/results/{smoke_task.artifact_name}")
os.makedirs("/root/results/sub")
os.symlink({relative!r}, "/root/results/result.json")
"""
    _no_artifact(attack(code, mech))


def test_hard_links_cannot_reach_files_outside_the_results(attack: RunAttack, mech: sandbox.Mechanism,
                                                           smoke_task: Task) -> None:
    code = f"""
import os
for source in ("/root/data/" + sorted(os.listdir("/root/data"))[0], "/logs/agent/prompt.txt", "/etc/passwd"):
    try:
        os.link(source, "/root/results/{smoke_task.artifact_name}"); print("WON link", source)
    except OSError as exc:
        print("link refused", source, exc.errno)
{write_expected(smoke_task)}
for i in range(50):  # many names of one file: copied once, linked again
    os.link("/root/results/{smoke_task.artifact_name}", f"/root/results/copy{{i}}.json")
"""
    result = attack(code, mech)
    assert result.stdout.count("link refused") == 3, result.stdout
    assert result.phase_reason == ("Succeeded", "completed") and result.record["score"]["o_eval"] == 1.0
    artifacts = result.folder / "artifacts"
    inodes = {os.stat(p).st_ino for p in artifacts.glob("*.json")}
    assert len(list(artifacts.glob("copy*.json"))) == 50 and len(inodes) == 1


def test_fifo_in_place_of_the_artifact_never_blocks(attack: RunAttack, mech: sandbox.Mechanism,
                                                    smoke_task: Task) -> None:
    code = f"""
import os
os.mkfifo("/root/results/{smoke_task.artifact_name}")
os.mkfifo("/root/results/result.json")
print("fifos made")
"""
    started = time.monotonic()
    result = attack(code, mech)
    assert result.said("fifos made")
    _no_artifact(result)
    assert time.monotonic() - started < 60  # generous: the point is that nothing waited for a writer


def test_logs_linked_to_host_files_are_not_copied(attack: RunAttack, mech: sandbox.Mechanism, smoke_task: Task,
                                                  tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text(SECRET)
    code = f"""
import os, sys
for name in ("stderr.log", "stdout.log", "notes.log"):
    path = "/logs/agent/" + name
    if os.path.exists(path):
        os.unlink(path)
    os.symlink({str(secret)!r}, path)
os.symlink("/dev/zero", "/logs/agent/zero.log")
os.mkfifo("/logs/agent/pipe.log")
sys.exit(3)
"""
    result = attack(code, mech)
    assert result.phase_reason == ("Failed", "agent_error")
    assert _folder_holds(result.folder, SECRET.encode()) == []
    assert SECRET not in str(result.record)
    logs = result.folder / "agent"
    assert not (logs / "zero.log").exists() and not (logs / "pipe.log").exists()
    assert (logs / "prompt.txt").read_text() == smoke_task.instruction  # the engine's own file stays


def test_fifo_and_symlink_logs_when_the_sandbox_fails(attack: RunAttack, mech: sandbox.Mechanism,
                                                      smoke_task: Task) -> None:
    """Even where the engine reads a log tail for its own message (an agent that ran out of memory under
    rlimits), a linked log yields nothing: the message is the engine's, not the host file's."""
    code = """
import os
os.unlink("/logs/agent/stderr.log")
os.symlink("/etc/hostname", "/logs/agent/stderr.log")
raise MemoryError
"""
    result = attack(code, mech)
    assert result.record["phase"] == "Failed"
    assert "anchorage" not in result.record["message"]
