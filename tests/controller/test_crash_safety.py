"""kill -9 the operator again and again during a campaign: nothing is created twice, nothing is lost.

Pods are simulated (``FakeKubelet(simulate=True)``: no container runs, the store gets what the pod
programs would write) so the test measures the operator, not the sandbox. Sizes come from
``ANCHORAGE_CRASH_TRIALS`` (default 60; the issue's figure is 300) and ``ANCHORAGE_CRASH_KILLS``
(default 8; the issue's figure is 20).
"""

from __future__ import annotations

import json
import os
import random
import time

import pytest
import yaml

from .conftest import Env, count_added

pytestmark = pytest.mark.slow

TRIALS = int(os.environ.get("ANCHORAGE_CRASH_TRIALS", "60"))
KILLS = int(os.environ.get("ANCHORAGE_CRASH_KILLS", "8"))


def test_kill_minus_nine_never_duplicates_nor_loses_work(sim_env: Env) -> None:
    env = sim_env
    added = count_added(env)
    seeds = TRIALS // 3
    campaign = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": "crash"},
                "spec": {"tasks": ["smoke-inventory"], "seeds": seeds, "parallelism": 10,
                         "entries": [{"name": n, "agent": {"kind": "command", "command": ["true"]}}
                                     for n in ("a", "b", "c")]}}
    rng = random.Random(7)
    try:
        env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(campaign))
        for _ in range(KILLS):
            env.start_operator()
            time.sleep(rng.uniform(1.5, 4.0))
            env.stop_operator(kill=True)
        env.start_operator()
        env.wait_for(lambda: env.kubectl("get", "vc", "crash", "-o", "jsonpath={.status.phase}",
                                         check=False).stdout == "Succeeded", 300, "the campaign")
        status = json.loads(env.kubectl("get", "vc", "crash", "-o", "json").stdout)["status"]
    finally:
        env.stop_operator(kill=True)
    total = seeds * 3
    assert status["progress"] == f"{total}/{total}" and status["infrastructureFailed"] == 0
    for plural in ("trials", "scoringruns", "jobs"):
        names = [name for (p, name), n in added.items() if p == plural]
        assert len(names) == (total if plural != "jobs" else 2 * total), plural
        assert {n for (p, _), n in added.items() if p == plural} == {1}, f"a {plural[:-1]} was created twice"
    assert not [n for (p, n) in added if p == "jobs" and not n.endswith(("-a0", "-verify"))], "a spurious retry"
    records = list(env.store.glob("crash/*/trial.json"))
    assert len(records) == total
    assert env.starts == KILLS + 1
