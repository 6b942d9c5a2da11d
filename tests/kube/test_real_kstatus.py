"""Generic tools read real Trials right (issue 26): ``kubectl wait`` and kstatus, the library itself.

Three Trials on the real nodes through the session release's operator pod: the oracle (succeeds), a ``command``
agent that writes nothing (the model's failure: no artifact) and one that sleeps (still running when read).
``kubectl wait --for=condition=Complete`` returns for the first and ``--for=condition=Failed`` for the second;
``sigs.k8s.io/cli-utils``' kstatus (``tools/kube/kstatus``, built by ``make kube``, the status Flux, Argo CD and kpt
compute) then reads the three as Current, Failed and InProgress.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import yaml

from anchorage_devcluster import binaries
from kube_cluster import RealCluster

pytestmark = [pytest.mark.cluster,
              pytest.mark.slow]  # an oracle trial and its verifier on the real nodes, two command agents beside it

LIMITS = {"agentTimeoutSec": 600, "cpus": 0.2, "memoryMB": 256}
TRIALS = {"kstatus-ok": {"kind": "oracle"},
          "kstatus-failed": {"kind": "command", "command": ["/bin/sh", "-c", "exit 0"]},
          "kstatus-running": {"kind": "command", "command": ["/bin/sh", "-c", "sleep 540"]}}


def _kstatus(objects: dict[str, Any]) -> dict[str, str]:
    program = binaries.kstatus()
    if isinstance(program, str):
        pytest.fail(program)  # make test builds it with the cluster's binaries: missing is a broken set-up
    out = subprocess.run([str(program)], input=json.dumps(objects), capture_output=True, text=True, timeout=60,
                         check=True)
    return {v["name"]: v["status"] for v in map(json.loads, out.stdout.splitlines())}


def test_kubectl_wait_and_kstatus_read_running_succeeded_and_failed_trials(real_cluster: RealCluster) -> None:
    namespace = real_cluster.release.namespace
    for name, agent in TRIALS.items():
        doc = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": name},
               "spec": {"task": "smoke-inventory", "agent": agent, "limits": LIMITS}}
        real_cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(doc))
    try:
        for name, condition in (("kstatus-ok", "Complete"), ("kstatus-failed", "Failed")):
            waited = real_cluster.kubectl("wait", f"--for=condition={condition}", f"trial/{name}", "-n", namespace,
                                          "--timeout=600s", check=False, timeout=660)
            assert waited.returncode == 0, (name, waited.stderr, real_cluster.get("trial", name, "-n", namespace))
        listed = real_cluster.get("trials", "-n", namespace)
        ours = {**listed, "items": [t for t in listed["items"] if t["metadata"]["name"] in TRIALS]}
        phases = {t["metadata"]["name"]: (t["status"].get("phase"), t["status"].get("reason")) for t in ours["items"]}
        assert phases["kstatus-ok"][0] == "Succeeded" and phases["kstatus-failed"] == ("Failed", "no_artifact"), phases
        assert phases["kstatus-running"][0] in ("Pending", "Running"), phases  # it sleeps 540 s
        assert _kstatus(ours) == {"kstatus-ok": "Current", "kstatus-failed": "Failed",
                                  "kstatus-running": "InProgress"}, phases
    finally:
        real_cluster.kubectl("delete", "trials", "-n", namespace, *TRIALS, "--wait=false", check=False)
