"""A real node lost mid-campaign (issue 25): its trials are the platform's failure, retried on another node.

A third real node (``node-3``: its own network namespace, kubelet and containerd) joins the session cluster; with the
two others cordoned, a campaign's two trials start there. Once their agents run, the node is lost as a machine is lost
(:meth:`RealNode.lose`: its kubelet, runtime, shims and containers killed at once, nothing cleaned up) and the other
nodes take pods again. The node lifecycle controller marks the node unreachable, the taint manager evicts its pods
(the operator's ``node_lost_after_sec``), and the operator decides from that evidence — the pod's eviction by the
platform, not anything the agent wrote — that each attempt ended ``node_lost`` with the node named; each trial is
retried once (``retries.infrastructure``) on a live node, and the campaign finishes with no infrastructure failure
left and each trial's record listing the lost attempt.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from anchorage.runtime.kube.jobs import trial_prefix
from kube_cluster import REAL_NODE_LABEL, REAL_NODES, RealCluster

LOST = "node-3"
CAMPAIGN = "lost-node"

pytestmark = [pytest.mark.cluster,
              pytest.mark.slow]  # a node joins, is lost and its trials retried elsewhere: about two minutes


@pytest.fixture
def third_node(real_cluster: RealCluster) -> Iterator[Any]:
    """``node-3`` joined to the session cluster, removed again afterwards (its Node object too)."""
    node = real_cluster.local.add_real_node(LOST, labels={REAL_NODE_LABEL: "real"})
    try:
        yield node
    finally:
        real_cluster.kubectl("uncordon", *REAL_NODES, check=False)
        real_cluster.kubectl("delete", "vc", "-n", real_cluster.release.namespace, CAMPAIGN, "--wait=false",
                             check=False)
        real_cluster.kubectl("delete", "node", LOST, "--wait=false", check=False)  # its pods are then collected
        real_cluster.kubectl("delete", "pods", "-A", f"--field-selector=spec.nodeName={LOST}", "--force",
                             "--grace-period=0", check=False)
        real_cluster.local.real_nodes.pop(LOST, None)
        node.stop()


def _pods_on(real: RealCluster, node: str) -> list[dict[str, Any]]:
    """The campaign's trial pods on ``node`` whose agent container runs."""
    out = real.kubectl("get", "pods", "-n", real.release.trials_namespace, "-l", "anchorage.dev/role=trial",
                       "--field-selector", f"spec.nodeName={node}", "-o", "json")
    return [pod for pod in json.loads(out.stdout)["items"]
            if (pod["metadata"].get("labels") or {}).get("anchorage.dev/campaign") == CAMPAIGN
            and any(s["name"] == "agent" and "running" in (s.get("state") or {})
                    for s in pod["status"].get("containerStatuses") or [])]


def _campaign_status(real: RealCluster) -> dict[str, Any]:
    out = real.kubectl("get", "vc", CAMPAIGN, "-n", real.release.namespace, "-o", "json", check=False)
    return dict(json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}


def test_a_node_lost_mid_campaign_fails_its_trials_as_the_platforms_and_they_finish_elsewhere(
        real_cluster: RealCluster, third_node: Any) -> None:
    real, release = real_cluster, real_cluster.release
    # 20 s: still running when the node is lost (a few seconds after both agents are seen running)
    agent = {"kind": "command", "command": ["/bin/sh", "-c", "sleep 20"]}
    doc = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign",
           "metadata": {"name": CAMPAIGN, "namespace": release.namespace},
           "spec": {"tasks": ["smoke-inventory"], "seeds": 1, "parallelism": 2, "retries": {"infrastructure": 1},
                    "limits": {"cpus": 0.2, "memoryMB": 256, "agentTimeoutSec": 300},
                    "entries": [{"name": "first", "agent": agent}, {"name": "second", "agent": agent}]}}
    real.kubectl("cordon", *REAL_NODES)
    try:
        real.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(doc))
        real.wait_for(lambda: len(_pods_on(real, LOST)) == 2, 300, f"both trials' agents running on {LOST}")
    finally:
        real.kubectl("uncordon", *REAL_NODES)
    third_node.lose()
    real.wait_for(lambda: _campaign_status(real).get("phase") in ("Succeeded", "Failed"), 600,
                  "the campaign to finish after the node's loss")
    status = _campaign_status(real)
    assert status["phase"] == "Succeeded" and status["progress"] == "2/2", status
    assert status["infrastructureFailed"] == 0, status
    trials = real.get("trials", "-n", release.namespace, "-l", f"anchorage.dev/campaign={CAMPAIGN}")["items"]
    assert len(trials) == 2
    for trial in trials:
        name = trial["metadata"]["name"]
        # the retry ran the agent's 20 s and it exited 0: judged on its own (the task wants an answer it never wrote)
        assert trial["status"]["phase"] != "InfrastructureFailed" and trial["status"]["reason"] == "no_artifact", \
            trial["status"]
        record = json.loads((real.store / trial_prefix(release.namespace, name, CAMPAIGN) / "trial.json").read_text())
        lost = record.get("previous_attempts") or []
        assert record["attempt"] == 2 and [a["reason"] for a in lost] == ["node_lost"], record
        assert LOST in lost[0]["message"], lost[0]  # the node named, from the platform's evidence
    retried = real.kubectl("get", "pods", "-n", release.trials_namespace, "-l", "anchorage.dev/role=trial", "-o",
                           "json").stdout
    nodes = {pod["spec"].get("nodeName") for pod in json.loads(retried)["items"]
             if (pod["metadata"].get("labels") or {}).get("anchorage.dev/campaign") == CAMPAIGN
             and pod["status"].get("phase") in ("Succeeded", "Failed")}
    assert nodes and nodes <= set(REAL_NODES), nodes  # the retries ran on the live nodes
