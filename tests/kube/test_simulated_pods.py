"""The node agent's simulate mode reports pods as a kubelet does: an init container that fails ends the pod
before its main containers start (they stay waiting), native sidecars end with the pod. A pod's process whose wait is
cancelled (a deadline, the node stopping) is killed and reaped, not left running unwatched."""

from __future__ import annotations

import asyncio
import gc
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from anchorage_devcluster.pods import PodRun, exit_code

Obj = dict[str, Any]


class NoReferences:
    async def read(self, plural: str, namespace: str, name: str) -> Obj | None:
        return None

    async def token(self, pod: Obj, audience: str | None, seconds: int) -> str:
        raise AssertionError("a simulated pod asks for no token")


def _pod() -> Obj:
    return {"metadata": {"namespace": "t", "name": "p", "uid": "0123456789"},
            "spec": {"initContainers": [{"name": "fetch-task", "image": "x"},
                                        {"name": "upload", "image": "x", "restartPolicy": "Always"},
                                        {"name": "check", "image": "x"}],
                     "containers": [{"name": "agent", "image": "x"}]}}


def _run(tmp_path: Path, codes: dict[str, int]) -> tuple[str, Obj]:
    reports: list[Obj] = []

    async def report(status: Obj) -> None:
        reports.append(status)

    run = PodRun(_pod(), tmp_path, NoReferences(), report, simulate=lambda pod: codes)
    phase = asyncio.run(run.run())
    return phase, reports[-1]


def _states(status: Obj, key: str) -> dict[str, Obj]:
    return {c["name"]: c["state"] for c in status.get(key) or []}


def test_a_failed_init_container_leaves_the_main_containers_waiting(tmp_path: Path) -> None:
    phase, status = _run(tmp_path, {"fetch-task": 3})
    assert phase == status["phase"] == "Failed"
    inits = _states(status, "initContainerStatuses")
    assert inits["fetch-task"]["terminated"]["exitCode"] == 3
    assert "waiting" in inits["check"]  # never ran: the pod ended at the first failure
    assert _states(status, "containerStatuses")["agent"] == {"waiting": {"reason": "PodInitializing"}}
    initialized = next(c for c in status["conditions"] if c["type"] == "Initialized")
    assert initialized["status"] == "False"


def test_a_pod_whose_containers_all_exit_0_succeeds_and_a_failing_agent_fails_it(tmp_path: Path) -> None:
    phase, status = _run(tmp_path / "ok", {})
    assert phase == "Succeeded"
    assert all("terminated" in s for s in _states(status, "initContainerStatuses").values())
    assert _states(status, "containerStatuses")["agent"]["terminated"]["exitCode"] == 0
    phase, status = _run(tmp_path / "bad", {"agent": 2})
    assert phase == "Failed"
    assert _states(status, "containerStatuses")["agent"]["terminated"]["exitCode"] == 2
    assert _states(status, "initContainerStatuses")["upload"]["terminated"]["exitCode"] == 0



@pytest.mark.parametrize("leader", [True, False], ids=["group-leader", "lone-process"])
def test_a_cancelled_wait_kills_and_reaps_its_process(leader: bool) -> None:
    """A container leads its own process group (its children are killed with it); mount and umount do not. asyncio
    warns (ResourceWarning) when a process's transport is dropped while the process runs: none may."""
    async def main() -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(60)",
                                                    start_new_session=leader)
        waiting = asyncio.create_task(exit_code(proc))
        await asyncio.sleep(0.2)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return proc

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        proc = asyncio.run(main())
        gc.collect()
    assert proc.returncode == -9  # killed, and reaped before the cancellation went on
    assert not [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)]
