"""Hostile agents exhausting resources: disk, inodes, giant logs, processes that outlive the agent.

Each ends as the model's own, honest failure (``oversized_result`` for a folder over its quota), the
host's disk and the engine's memory untouched by the attack's size, and nothing left running.
"""

from __future__ import annotations

import os
import resource
import uuid

import pytest

from anchorage.runtime.local import sandbox
from anchorage.tasks import Task
from hostile.conftest import RunAttack, write_expected
from runtime.host_processes import processes

pytestmark = pytest.mark.sandbox

MIB = 1024 * 1024


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_filling_the_disk_stops_at_the_results_quota(attack: RunAttack, mech: sandbox.Mechanism,
                                                     smoke_task: Task) -> None:
    code = f"""
import os
{write_expected(smoke_task)}
written = 0
try:
    with open("/root/results/fill.bin", "wb") as handle:
        while written < 200 * 1024 * 1024:
            handle.write(b"x" * 1048576); handle.flush(); written += 1048576
    print("WON wrote", written)
except OSError as exc:
    print("stopped", exc.errno, written)
"""
    result = attack(code, mech, limits={"resultMaxBytes": 4 * MIB})
    stopped = [line.split() for line in result.stdout.splitlines() if line.startswith("stopped ")]
    assert stopped and stopped[0][1] == "28", result.stdout  # ENOSPC
    # the host's disk never saw 200 MB: the writes stopped near the quota, on a tmpfs (below). The machine's free
    # space is no measure of it: other tests write beside this one (ci61: 70 MB in the attack's seconds)
    assert int(stopped[0][2]) <= 6 * MIB, result.stdout
    assert result.phase_reason == ("Failed", "oversized_result"), result.record
    assert "/root/results" in result.record["message"]
    assert result.record["score"]["bo_eval"] == -1.0
    quota = result.record["sandbox"]["quotas"]["results"]
    assert quota["mechanism"] == "tmpfs" and quota["over"] and quota["bytes"] <= 6 * MIB


def test_a_million_files_stop_at_the_entry_quota(attack: RunAttack, mech: sandbox.Mechanism,
                                                 smoke_task: Task) -> None:
    code = f"""
import os
{write_expected(smoke_task)}
made = 0
try:
    for i in range(1_000_000):
        open(f"/root/results/f{{i}}", "w").close(); made += 1
    print("WON made", made)
except OSError as exc:
    print("stopped", exc.errno, made)
"""
    rss = _rss_mib()
    result = attack(code, mech)
    stopped = next(line for line in result.stdout.splitlines() if line.startswith("stopped"))
    assert stopped.split()[1] == "28" and int(stopped.split()[2]) <= 10_001, stopped
    assert result.phase_reason == ("Failed", "oversized_result"), result.record
    assert "10000 files and folders" in result.record["message"] or "entry quota" in result.record["message"]
    assert len(os.listdir(result.folder / "artifacts")) <= 10_002
    assert _rss_mib() - rss < 200


def test_deep_directories_do_not_crash_the_engine(attack: RunAttack, mech: sandbox.Mechanism,
                                                  smoke_task: Task) -> None:
    code = f"""
import os
os.chdir("/root/results")
for i in range(3000):
    os.mkdir("d"); os.chdir("d")
os.chdir("/root/results")
{write_expected(smoke_task)}
print("deep done")
"""
    result = attack(code, mech)
    assert result.said("deep done")
    assert result.phase_reason == ("Succeeded", "completed"), result.record  # scored, nothing crashed
    assert result.record["score"]["o_eval"] == 1.0


def test_a_giant_log_stops_at_the_log_quota(attack: RunAttack, mech: sandbox.Mechanism, smoke_task: Task) -> None:
    code = f"""
import os, sys
{write_expected(smoke_task)}
chunk = b"e" * 1048576
written = 0
try:
    while written < 1024 * 1048576:
        os.write(2, chunk); written += len(chunk)
    status = "WON wrote " + str(written)
except OSError as exc:
    status = "stopped " + str(exc.errno) + " " + str(written // 1048576)
open("/root/results/status.txt", "w").write(status)   # stdout shares the full log folder
"""
    rss = _rss_mib()
    result = attack(code, mech, limits={"memoryMB": 1024})
    status = (result.folder / "artifacts" / "status.txt").read_text()
    assert status.startswith("stopped 28") and int(status.split()[2]) <= 257, status
    assert result.phase_reason == ("Failed", "oversized_result"), result.record
    assert "/logs/agent" in result.record["message"]
    assert (result.folder / "agent" / "stderr.log").stat().st_size <= 256 * MIB
    assert _rss_mib() - rss < 200  # the engine never held the log in memory


def test_processes_outliving_the_agent_are_killed_before_results_are_read(
        attack: RunAttack, mech: sandbox.Mechanism, smoke_task: Task) -> None:
    marker = f"300.{uuid.uuid4().int % 10**9:09d}"
    key = smoke_task.expected_result_path.resolve()
    code = f"""
import os, subprocess, time
{write_expected(smoke_task)}
if os.fork() == 0:           # a daemon, detached, that swaps the artifact after the agent has exited
    os.setsid()
    if os.fork() == 0:
        time.sleep(1.0)
        os.unlink("/root/results/{smoke_task.artifact_name}")
        os.symlink({str(key)!r}, "/root/results/{smoke_task.artifact_name}")
        open("/root/results/late.txt", "w").write("late")
        os._exit(0)
    os._exit(0)
subprocess.Popen(["sleep", "{marker}"], start_new_session=True)
print("agent exits")
"""
    result = attack(code, mech)
    assert result.said("agent exits")
    assert result.phase_reason == ("Succeeded", "completed"), result.record
    assert not (result.folder / "artifacts" / "late.txt").exists()
    assert not (result.folder / "artifacts" / smoke_task.artifact_name).is_symlink()
    survivors = processes(lambda cmdline: marker in cmdline)
    assert survivors == []
