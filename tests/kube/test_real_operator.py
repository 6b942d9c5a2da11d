"""The operator on the real cluster, installed as the Helm chart installs it: a pod from its image.

``tests/kube_cluster.py`` starts the pinned control plane with two real nodes and a simulated node, and installs
``charts/anchorage`` with the Helm library from the cluster's registry. The operator runs as the chart's pod, with
the chart's arguments and its ServiceAccount's token, so every request it makes is checked by the chart's RBAC; its
Jobs' pods are admitted by PodSecurity ``restricted`` in the chart's trials namespace, scheduled by the real
scheduler, run by the real kubelets (or, for the load tests, the simulated node), and finished by the real Job
controller.

* the chart's objects are there and its operator's account may do what the operator needs, nothing more;
* a campaign of oracle and command entries on the real nodes reaches Succeeded, its leaderboard equals the local
  engine's over the same records, and ``kubectl describe`` shows the operator's Events;
* an agent writing its /tmp past the emptyDir's limit: the kubelet evicts the pod, the trial ends
  InfrastructureFailed with the eviction's message (read from the pod's status);
* the operator's pod deleted with ``--grace-period=0 --force`` 10 times during a 150-trial campaign (simulated
  node; the kills end with about half of its trials still to run): every Trial, ScoringRun and Job is created
  exactly once (the API server's audit log of the operator's account), every trial has its record;
* names at the 63-character limit: a campaign and entry whose names fill it still give valid Job names and
  label values (hashed), and the campaign finishes.
"""

from __future__ import annotations

import collections
import math
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_cluster import RealCluster, Release

pytestmark = pytest.mark.cluster

#: 10 kills, one every ~10 s (the new pod's start and 2-5 s of work), during 150 trials: about half of them are still to
#: run at the last kill (more of either only adds minutes: ANCHORAGE_CRASH_TRIALS, ANCHORAGE_CRASH_KILLS)
CRASH_TRIALS = int(os.environ.get("ANCHORAGE_CRASH_TRIALS", "150"))
CRASH_KILLS = int(os.environ.get("ANCHORAGE_CRASH_KILLS", "10"))


@pytest.fixture(scope="module")
def simulated(real_cluster: RealCluster) -> Release:
    """A second release of the chart (``crash`` in namespace ``crash``) whose trials run on the simulated node."""
    return real_cluster.releases.get("crash") or real_cluster.install("crash", "crash", "crash-trials", simulated=True)


def test_the_chart_is_installed_and_its_operator_account_is_least_privileged(real_cluster: RealCluster) -> None:
    release = real_cluster.release
    namespace = real_cluster.get("namespace", release.trials_namespace)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    policies = {p["metadata"]["name"] for p in real_cluster.get("networkpolicy", "-n", release.trials_namespace)["items"]}
    assert policies, "the chart's trial NetworkPolicies are missing"
    for crd in ("trials", "verificationcampaigns", "scoringruns"):
        real_cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd}.anchorage.dev", "--timeout=30s")

    def can(*args: str) -> bool:
        out = real_cluster.kubectl("auth", "can-i", *args, kubeconfig=release.operator_kubeconfig, check=False)
        return out.stdout.strip() == "yes"

    assert can("create", "jobs", "-n", release.trials_namespace)
    assert can("patch", "trials.anchorage.dev", "--subresource=status", "-n", release.namespace)
    assert can("create", "events", "-n", release.namespace)
    assert not can("create", "clusterrolebindings")
    assert not can("get", "secrets", "-n", "kube-system")
    # pods only where trials run (the NetworkPolicy preflight's probe pods, controller.enforcement), never elsewhere,
    # and never a way into one
    assert can("create", "pods", "-n", release.trials_namespace)
    for namespace in (release.namespace, "kube-system", "default"):
        assert not can("create", "pods", "-n", namespace), namespace
    assert not can("create", "pods", "--subresource=exec", "-n", release.trials_namespace)
    assert not can("create", "pods", "--subresource=attach", "-n", release.trials_namespace)


def _campaign(name: str, seeds: int) -> dict[str, Any]:
    write_empty = ["/bin/sh", "-c", "echo '{}' > /root/results/{task}_result.json"]
    return {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": name},
            "spec": {"tasks": ["smoke-inventory"], "seeds": seeds, "parallelism": 3, "baseline": "empty",
                     "entries": [{"name": "oracle", "agent": {"kind": "oracle"}},
                                 {"name": "empty", "agent": {"kind": "command", "command": write_empty}},
                                 {"name": "silent", "agent": {"kind": "command", "command": ["true"]}}]}}


@pytest.mark.slow  # six trials and their verifiers on the real nodes
def test_a_campaign_on_the_real_nodes_matches_the_local_engine(real_cluster: RealCluster, tmp_path: Path) -> None:
    from anchorage.manifests import VerificationCampaign
    from anchorage.runtime.local.engine import run_campaign
    from anchorage.runtime.local.trials import LocalRuntime

    release = real_cluster.release
    doc = _campaign("kinds", seeds=2)
    real_cluster.kubectl("apply", "-n", release.namespace, "-f", "-", stdin=yaml.safe_dump(doc))
    real_cluster.wait_for(lambda: real_cluster.status("vc", release.namespace, "kinds").get("phase") == "Succeeded",
                          900, "the campaign to finish")
    status = real_cluster.status("vc", release.namespace, "kinds")
    described = real_cluster.kubectl("describe", "vc", "kinds", "-n", release.namespace).stdout
    assert status["progress"] == "6/6" and status["infrastructureFailed"] == 0, \
        (real_cluster.infrastructure_failures(release.namespace), status)
    local = run_campaign(VerificationCampaign.model_validate(doc), real_cluster.store,
                         LocalRuntime(mechanism="none", base_dir=tmp_path / "local"))
    assert local.ran == 0 and local.reused == 6  # the records the cluster wrote, aggregated by the local engine
    mine = {row["entry"]: row for row in status["leaderboard"]}
    assert [r["entry"] for r in status["leaderboard"]] == [r.entry for r in local.board.rows]
    for row in local.board.rows:
        assert math.isclose(mine[row.entry]["oEval"], row.o_eval_mean, abs_tol=1e-12)
        assert math.isclose(mine[row.entry]["boEval"], row.bo_eval_mean, abs_tol=1e-12)
    assert status["bestEntry"] == "oracle"
    events = described[described.index("Events:"):]
    assert "anchorage-operator" in events and "Succeeded" in events, described


@pytest.mark.slow  # the kubelet notices the full emptyDir on its next housekeeping pass
def test_an_agent_filling_its_tmp_past_the_limit_is_evicted_an_infrastructure_failure(real_cluster: RealCluster) -> None:
    """/tmp is a disk-backed emptyDir of min(storage, 1 GiB): written past it, the kubelet evicts the pod (the Job
    only says BackoffLimitExceeded); the operator reads the pod's status and ends the trial as the platform's
    failure naming the eviction, not as the agent's exit code."""
    release = real_cluster.release
    fill = "head -c 16777216 /dev/zero > /tmp/fill; sleep 600"
    doc = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": "fills-tmp"},
           "spec": {"task": "smoke-inventory", "agent": {"kind": "command", "command": ["/bin/sh", "-c", fill]},
                    "limits": {"storageMB": 4, "agentTimeoutSec": 600, "cpus": 0.5, "memoryMB": 512}}}
    real_cluster.kubectl("apply", "-n", release.namespace, "-f", "-", stdin=yaml.safe_dump(doc))

    def status() -> dict[str, Any]:
        return dict(real_cluster.get("trial", "fills-tmp", "-n", release.namespace).get("status") or {})

    real_cluster.wait_for(lambda: status().get("phase") not in (None, "Pending", "Running"), 300, "the trial to end")
    ended = status()
    assert ended["phase"] == "InfrastructureFailed" and ended["reason"] == "sandbox_error", ended
    assert "evicted" in ended["message"] and 'EmptyDir volume "tmp" exceeds the limit "4Mi"' in ended["message"], ended


@pytest.mark.slow  # CRASH_TRIALS trials and CRASH_KILLS restarts of the operator's pod (minutes)
@pytest.mark.timeout(2400)
def test_the_operator_pod_force_deleted_again_and_again_never_duplicates_nor_loses_work(
        real_cluster: RealCluster, simulated: Release) -> None:
    """``kubectl delete pod --grace-period=0 --force`` of the operator's pod, CRASH_KILLS times while a CRASH_TRIALS
    campaign runs (its trials' pods on the simulated node); the Deployment starts a new pod each time."""
    seeds = CRASH_TRIALS // 3
    doc = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": "crash"},
           "spec": {"tasks": ["smoke-inventory"], "seeds": seeds, "parallelism": 30,
                    "entries": [{"name": n, "agent": {"kind": "command", "command": ["true"]}} for n in "abc"]}}
    rng = random.Random(19)
    real_cluster.kubectl("apply", "-n", simulated.namespace, "-f", "-", stdin=yaml.safe_dump(doc))
    deleted: list[str] = []
    for _ in range(CRASH_KILLS):
        real_cluster.wait_for(lambda: any(_ready(p) for p in real_cluster.operator_pods(simulated.name)), 120,
                              "the operator's pod to run again", simulated.name)
        time.sleep(rng.uniform(2.0, 5.0))
        for pod in real_cluster.operator_pods(simulated.name):
            if not pod["metadata"].get("deletionTimestamp"):
                real_cluster.kubectl("delete", "pod", "-n", simulated.namespace, pod["metadata"]["name"],
                                     "--grace-period=0", "--force", "--wait=false")
                deleted.append(pod["metadata"]["name"])
    real_cluster.wait_for(lambda: real_cluster.status("vc", simulated.namespace, "crash").get("phase") == "Succeeded",
                          900, "the campaign to finish after the deletions", simulated.name)
    status = real_cluster.status("vc", simulated.namespace, "crash")
    total = seeds * 3
    assert status["progress"] == f"{total}/{total}" and status["infrastructureFailed"] == 0, status
    assert len(set(deleted)) == CRASH_KILLS  # a new pod each time
    # Creates the server answered 201, and those it answered 504 (its request timeout under load: the object
    # may well be stored, as a client cannot tell); each object name once, none of them twice.
    created: collections.Counter[tuple[str, str]] = collections.Counter()
    timed_out: set[tuple[str, str]] = set()
    for entry in real_cluster.audited(simulated.name):
        code = (entry.get("responseStatus") or {}).get("code")
        if entry["verb"] == "create" and code in (201, 504):
            ref = entry["objectRef"]
            key = (ref["resource"], ref.get("name") or "")
            if code == 201:
                created[key] += 1
            else:
                timed_out.add(key)
    named = set(created) | timed_out
    by_kind = collections.Counter(kind for kind, _ in named)
    assert by_kind["trials"] == total and by_kind["scoringruns"] == total and by_kind["jobs"] == 2 * total, by_kind
    twice = [key for key, n in created.items() if n > 1 and key[0] != "events"]
    assert not twice, f"created more than once: {twice[:5]}"
    assert len(list((real_cluster.store / "crash").glob("*/trial.json"))) == total


def _ready(pod: dict[str, Any]) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


@pytest.mark.slow  # a campaign through the operator on the simulated node
def test_names_at_the_63_character_limit(real_cluster: RealCluster, simulated: Release) -> None:
    name = "c" * 63  # a campaign name at the limit; its trial, job and label names would exceed it
    entry = "e" * 40
    doc = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": name},
           "spec": {"tasks": ["smoke-inventory"], "seeds": 2, "parallelism": 2,
                    "entries": [{"name": entry, "agent": {"kind": "command", "command": ["true"]}}]}}
    real_cluster.kubectl("apply", "-n", simulated.namespace, "-f", "-", stdin=yaml.safe_dump(doc))
    real_cluster.wait_for(lambda: real_cluster.status("vc", simulated.namespace, name).get("phase") == "Succeeded",
                          300, "the campaign with long names", simulated.name)
    jobs = real_cluster.get("jobs", "-n", simulated.trials_namespace)["items"]
    ours = [j for j in jobs if (j["metadata"].get("annotations") or {}).get("anchorage.dev/campaign") == name]
    assert len(ours) == 4  # two trials, each an agent Job and a verifier Job
    for job in ours:
        assert len(job["metadata"]["name"]) <= 63
        assert all(len(v) <= 63 for v in job["metadata"]["labels"].values())
    label = ours[0]["metadata"]["labels"]["anchorage.dev/campaign"]  # the hashed label value selects the trials
    trials = real_cluster.get("trials", "-n", simulated.namespace, "-l", f"anchorage.dev/campaign={label}")["items"]
    assert len(trials) == 2 and all(t["metadata"]["annotations"]["anchorage.dev/campaign"] == name for t in trials)
