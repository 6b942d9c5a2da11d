"""kill -9 the operator again and again during a campaign: nothing is created twice, nothing is lost.

Pods are simulated (``FakeKubelet(simulate=True)``: no container runs, the store gets what the pod
programs would write) so the test measures the operator, not the sandbox. Sizes come from
``ANCHORAGE_CRASH_TRIALS`` (default 60; the issue's figure is 300) and ``ANCHORAGE_CRASH_KILLS``
(default 8; the issue's figure is 20).
"""

from __future__ import annotations

import collections
import json
import os
import random
import shutil
import time
from pathlib import Path

import pytest
import yaml

from anchorage.devcluster.serving import ClusterThread
from anchorage.devcluster.storage import Event, Resource

from .conftest import REPO, Env

pytestmark = pytest.mark.slow

TRIALS = int(os.environ.get("ANCHORAGE_CRASH_TRIALS", "60"))
KILLS = int(os.environ.get("ANCHORAGE_CRASH_KILLS", "8"))


def test_kill_minus_nine_never_duplicates_nor_loses_work(tmp_path: Path) -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not on PATH")
    store = tmp_path / "runs"
    store.mkdir()
    thread = ClusterThread(tmp_path / "kubeconfig", crds_dir=REPO / "crds", writable=(store,), simulate=True)
    cluster = thread.__enter__()
    env = Env(cluster, thread, store, tmp_path, {
        **os.environ, "KUBECONFIG": str(cluster.kubeconfig), "ANCHORAGE_CAMPAIGN_INTERVAL": "0.3",
        "ANCHORAGE_WATCH_TIMEOUT": "20", "HOME": str(tmp_path)})
    added: collections.Counter[tuple[str, str]] = collections.Counter()

    def count(res: Resource, event: Event) -> None:
        if event.type == "ADDED":
            added[(res.plural, event.obj["metadata"]["name"])] += 1

    thread.call(lambda: cluster.api.store.on_change.append(count))
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
        thread.__exit__(None, None, None)
    total = seeds * 3
    assert status["progress"] == f"{total}/{total}" and status["infrastructureFailed"] == 0
    for plural in ("trials", "scoringruns", "jobs"):
        names = [name for (p, name), n in added.items() if p == plural]
        assert len(names) == (total if plural != "jobs" else 2 * total), plural
        assert {n for (p, _), n in added.items() if p == plural} == {1}, f"a {plural[:-1]} was created twice"
    assert not [n for (p, n) in added if p == "jobs" and not n.endswith(("-a0", "-verify"))], "a spurious retry"
    records = list(store.glob("crash/*/trial.json"))
    assert len(records) == total
    assert env.starts == KILLS + 1
