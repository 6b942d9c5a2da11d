"""Two operators with kopf peering against the fake: one handles objects, the other takes over after a kill -9.

The KopfPeering CRD comes from ``crds/peering/`` (``anchorage dev crds``) and the KopfPeering object
``anchorage`` is created as a cluster admin would. The active operator has the higher ``--priority``; the
standby pauses (kopf's peering), and resumes once the killed operator's keep-alive is older than
``--peering-lifetime``. Pods are simulated (no sandbox): the test is about which operator acts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import REPO, Env, count_added

pytestmark = pytest.mark.slow

HANDLED = "Handler '"  # kopf logs "Handler '<id>' succeeded." for each handler it runs


class Operator:
    """One ``anchorage operator`` process with peering (no ``--standalone``)."""

    def __init__(self, env: Env, name: str, priority: int) -> None:
        self.log = env.root / f"{name}.log"
        self._handle = self.log.open("wb")
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "anchorage"), "operator", "--store", f"file://{env.store}",
             "--task-source", str(REPO / "tasks"), "--log-format", "plain", "--priority", str(priority),
             "--peering-lifetime", "6", "--no-require-enforcement"],
            env=env.env, stdout=self._handle, stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        self._handle.close()


def _peers(env: Env) -> dict[str, Any]:
    result = env.kubectl("get", "kopfpeerings", "anchorage", "-o", "json", check=False)
    return (json.loads(result.stdout).get("status") or {}) if result.returncode == 0 else {}


def test_one_operator_is_active_and_the_standby_takes_over_after_kill_minus_nine(sim_env: Env) -> None:
    env = sim_env
    added = count_added(env)
    operators: list[Operator] = []
    try:
        env.kubectl("apply", "-f", str(REPO / "crds" / "peering"))
        env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(
            {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": "anchorage"}}))
        active = Operator(env, "active", priority=100)
        operators.append(active)
        env.wait_for(lambda: len(_peers(env)) == 1, 60, "the first operator's keep-alive")
        standby = Operator(env, "standby", priority=50)
        operators.append(standby)
        env.wait_for(lambda: "Pausing operations in favour of" in standby.text(), 60, "the standby to pause")
        assert len(_peers(env)) == 2

        seeds = 4
        campaign = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign",
                    "metadata": {"name": "peers"},
                    "spec": {"tasks": ["smoke-inventory"], "seeds": seeds, "parallelism": 2,
                             "entries": [{"name": n, "agent": {"kind": "command", "command": ["true"]}}
                                         for n in ("a", "b", "c")]}}
        env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(campaign))
        env.wait_for(lambda: sum(1 for p, _ in added if p == "scoringruns") >= 3, 120, "some scored trials")
        assert HANDLED in active.text() and HANDLED not in standby.text(), "the paused standby handled objects"

        active.process.kill()  # kill -9: no goodbye in the peering object
        active.process.wait(30)
        env.wait_for(lambda: "Resuming operations after the pause" in standby.text(), 60, "the standby to resume")
        env.wait_for(lambda: env.kubectl("get", "vc", "peers", "-o", "jsonpath={.status.phase}",
                                         check=False).stdout == "Succeeded", 240, "the campaign")
        status = json.loads(env.kubectl("get", "vc", "peers", "-o", "json").stdout)["status"]
    finally:
        for operator in operators:
            operator.stop()
    total = seeds * 3
    assert status["progress"] == f"{total}/{total}" and status["infrastructureFailed"] == 0
    assert HANDLED in standby.text(), "the standby never handled anything after the takeover"
    for plural in ("trials", "scoringruns", "jobs"):
        names = [name for (p, name) in added if p == plural]
        assert len(names) == (total if plural != "jobs" else 2 * total), plural
        assert {n for (p, _), n in added.items() if p == plural} == {1}, f"a {plural[:-1]} was created twice"
    assert len(list(env.store.glob("peers/*/trial.json"))) == total
