"""Campaigns admitted by Kueue on the real cluster: quotas, fair sharing, priorities, and the agent's time.

Kueue (``sigs.k8s.io/kueue``, built from its Go module by ``tools/kube/build.sh``) runs in the session's cluster as a
real cluster runs it: its manager a pod, its CRDs and webhooks from its module's manifests, its webhooks and visibility
API reached by the API server at the pod's address (``anchorage_devcluster.kueue``; ``kueue_cluster`` installs it for
this module, once per session, and removes it after). The chart's operator runs as a pod. Each test makes its own
ClusterQueue (a pod quota: one pod per trial attempt; CPU and memory quotas ample) and LocalQueues in the trials
namespace, where the trial Jobs run (``queues``: deleted when the test ends, see there). Agents are ``command``
agents that sleep and write a fixed result: CPU is scarce, the points are about admission.

* Without Kueue, ``queueName`` is refused naming the missing CRDs (runs first, before Kueue is installed).
* Two campaigns from two namespaces share a ClusterQueue of 2 pods: never more than 2 agent pods exist, both finish,
  and with Admission Fair Sharing weights 3:1 the first gets the larger share of the pod-seconds while both wait.
* A higher-priority campaign preempts a lower one: the preempted attempts end InfrastructureFailed/preempted, are
  queued again and finish; the lower campaign's leaderboard equals the same campaign's run without a queue.
* A trial that waits 60+ s in the queue with a 30 s agent timeout succeeds: the wait is not the agent's time;
  ``kubectl get trials`` says ``Queued`` meanwhile.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_cluster import TEAM_NAMESPACES, RealCluster

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
FLAVOR = "anchorage-test"
RESULT = json.loads((REPO / "tasks" / "smoke-inventory" / "solution" / "reproduced_result.json").read_text())
ENDED = ("Succeeded", "Failed")


def _result(scale: float = 1.0) -> str:
    """The smoke task's result (its anchors when ``scale`` is 1; every order quantity scaled otherwise)."""
    result = json.loads(json.dumps(RESULT))
    quantities = result["experiment_result"]["order_quantities"]
    result["experiment_result"]["order_quantities"] = {k: round(v * scale, 6) for k, v in quantities.items()}
    return json.dumps(result, separators=(",", ":"))


def _agent(sleep: float, scale: float = 1.0) -> dict[str, Any]:
    """A command agent that sleeps, then writes its result (no model, seconds of CPU)."""
    script = f"sleep {sleep}; printf '%s' '{_result(scale)}' > /root/results/smoke-inventory_result.json"
    return {"kind": "command", "command": ["/bin/sh", "-c", script]}


LIMITS = {"agentTimeoutSec": 300, "cpus": 0.5, "memoryMB": 256, "storageMB": 512}


def _campaign(name: str, namespace: str, entries: list[dict[str, Any]], *, seeds: int = 1, parallelism: int = 2,
              queue: str | None = None, priority: str | None = None, retries: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"tasks": ["smoke-inventory"], "seeds": seeds, "parallelism": parallelism,
                            "limits": LIMITS, "retries": {"infrastructure": retries}, "entries": entries}
    spec.update({k: v for k, v in (("queueName", queue), ("workloadPriorityClass", priority)) if v})
    return {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _queues(real: RealCluster, name: str, pods: int, local: dict[str, int | None], *, fair: bool = False,
            preemption: str | None = None) -> None:
    """A ClusterQueue ``name`` of ``pods`` pods fed by LocalQueues ``local`` (name → fair-sharing weight) in the
    trials namespace."""
    trials_ns = real.release.trials_namespace
    spec: dict[str, Any] = {
        "namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu", "memory", "ephemeral-storage", "pods"],
            "flavors": [{"name": FLAVOR, "resources": [
                {"name": "cpu", "nominalQuota": "16"}, {"name": "memory", "nominalQuota": "64Gi"},
                {"name": "ephemeral-storage", "nominalQuota": "100Gi"}, {"name": "pods", "nominalQuota": pods}]}]}]}
    if fair:
        spec["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    if preemption:
        spec["preemption"] = {"withinClusterQueue": preemption}
    docs: list[dict[str, Any]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}]
    for queue, weight in local.items():
        lq: dict[str, Any] = {"clusterQueue": name}
        if weight is not None:
            lq["fairSharing"] = {"weight": str(weight)}
        docs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                     "metadata": {"name": queue, "namespace": trials_ns}, "spec": lq})
    real.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))


Queues = Callable[..., None]


@pytest.fixture
def queues(kueue_cluster: RealCluster) -> Iterator[Queues]:
    """:func:`_queues` for one test, whose LocalQueues are deleted when it ends. Kueue v0.17.0 rewrites the status of
    a LocalQueue that has admitted a workload as fast as its client may (its 50 QPS, kubernetes-sigs/kueue#10156) until
    the queue is gone: measured, 25-48 writes a second per queue, and the API server's CPU with them, through the
    module's later tests until Kueue is removed."""
    made: list[str] = []

    def make(name: str, pods: int, local: dict[str, int | None], **options: Any) -> None:
        made.extend(local)
        _queues(kueue_cluster, name, pods, local, **options)

    yield make
    if made:
        kueue_cluster.kubectl("delete", "localqueue", *made, "-n", kueue_cluster.release.trials_namespace,
                              "--wait=false", check=False)


def _wait_campaigns(real: RealCluster, campaigns: list[tuple[str, str]], timeout: float) -> dict[str, dict[str, Any]]:
    """Wait until every (namespace, name) campaign has ended; their statuses by name."""
    found: dict[str, dict[str, Any]] = {}

    def ended() -> bool:
        for ns, name in campaigns:
            found[name] = real.status("vc", ns, name)
        return all(s.get("phase") in ENDED for s in found.values())

    try:
        real.wait_for(ended, timeout, f"campaigns {[n for _, n in campaigns]} to end")
    except AssertionError as exc:
        logs = real.kubectl("logs", "-n", real.release.namespace, "deploy/anchorage-operator", "--tail=80",
                            check=False).stdout
        trials = real.kubectl("get", "trials", "-A", "-o", "wide", check=False).stdout
        workloads = real.kubectl("get", "workloads", "-A", check=False).stdout
        raise AssertionError(f"{exc}\n{found}\n{trials}\n{workloads}\n{logs}") from None
    return found


class PodWatch:
    """``kubectl get pods --watch`` of the trial pods: each pod's latest (phase, campaign, deleting) with the time
    it was seen, so the test can say how many agent pods existed at every moment."""

    def __init__(self, real: RealCluster) -> None:
        # fields apart by spaces (none has one; kubectl printed the template's tab escapes as spaces), the deletion
        # timestamp last (empty while the pod is not being deleted)
        template = ('{.metadata.name}{" "}{.status.phase}{" "}{.metadata.labels.anchorage\\.dev/campaign}'
                    '{" "}{.metadata.deletionTimestamp}{"\\n"}')
        self.proc = subprocess.Popen(
            [str(real.local.plane.binaries.kubectl), "get", "pods", "-n", real.release.trials_namespace, "-l",
             "anchorage.dev/role=trial", "--watch", "-o", f"jsonpath={template}"],
            env=real.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: list[tuple[float, str, str, str, bool]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            name, phase, campaign, deleting = [*line.split(), "", "", ""][:4]
            self.events.append((time.monotonic(), name, phase, campaign, bool(deleting)))

    def stop(self) -> None:
        """Stop watching; AssertionError with kubectl's complaint when it saw nothing because it failed."""
        failed = self.proc.poll()
        self.proc.terminate()
        self.proc.wait(10)
        self.thread.join(10)  # the reader ends with kubectl's output
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        complaint = self.proc.stderr.read()
        self.proc.stderr.close()
        assert not (failed and not self.events), f"kubectl get pods --watch ended ({failed}): {complaint}"

    def timeline(self, campaigns: tuple[str, ...]) -> list[tuple[float, dict[str, int]]]:
        """After each event: the live agent pods (Pending or Running, not being deleted) of each campaign."""
        live: dict[str, str] = {}
        out = []
        for at, name, phase, campaign, deleting in self.events:
            if phase in ("Pending", "Running") and not deleting:
                live[name] = campaign
            else:
                live.pop(name, None)
            counts = {c: sum(1 for v in live.values() if v == c) for c in campaigns}
            out.append((at, counts))
        return out

    def first_seen(self) -> dict[str, tuple[float, str]]:
        """Each pod's first sighting (time, campaign)."""
        seen: dict[str, tuple[float, str]] = {}
        for at, name, _, campaign, _ in self.events:
            seen.setdefault(name, (at, campaign))
        return seen


def _kueue_served(real: RealCluster) -> bool:
    return real.kubectl("get", "crd", "workloads.kueue.x-k8s.io", check=False).returncode == 0


def test_without_kueue_a_queue_name_is_refused_naming_the_missing_crds(real_cluster: RealCluster) -> None:
    if _kueue_served(real_cluster):
        pytest.skip("Kueue was installed earlier in this session (kueue_cluster): the refusal needs a cluster without")
    ns = real_cluster.release.namespace
    campaign = _campaign("queued-without-kueue", ns, [{"name": "a", "agent": _agent(0)}], queue="team-a")
    trial = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": "queued-lone", "namespace": ns},
             "spec": {"task": "smoke-inventory", "agent": _agent(0), "limits": LIMITS, "queueName": "team-a"}}
    real_cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([campaign, trial]))
    try:
        real_cluster.wait_for(lambda: real_cluster.status("vc", ns, "queued-without-kueue").get("phase") == "Failed"
                              and real_cluster.status("trial", ns, "queued-lone").get("phase") ==
                              "InfrastructureFailed", 120, "the operator to refuse queueName without Kueue")
        refused = real_cluster.status("vc", ns, "queued-without-kueue")
        lone = real_cluster.status("trial", ns, "queued-lone")
    finally:
        real_cluster.kubectl("delete", "vc", "queued-without-kueue", "-n", ns, "--wait=false", check=False)
        real_cluster.kubectl("delete", "trial", "queued-lone", "-n", ns, "--wait=false", check=False)
    for said in (refused["message"], lone["message"]):
        assert "workloads.kueue.x-k8s.io" in said and "localqueues.kueue.x-k8s.io" in said, said
        assert "Kueue is not installed" in said and "queueName" in said, said
    assert refused["conditions"][0]["reason"] == "InvalidSpec"
    assert not real_cluster.get("trials", "-n", ns, "-l", "anchorage.dev/campaign=queued-without-kueue")["items"]


@pytest.mark.slow  # two campaigns of 6 trials through a 2-pod quota, two pods at a time: about 3 minutes
def test_two_teams_share_a_quota_of_two_by_their_fair_sharing_weights(kueue_cluster: RealCluster,
                                                                     queues: Queues) -> None:
    """The trials of a round start and end together, so Kueue admits a round at a time, to the team whose usage over
    its weight is lower. Weights 3:1 give team-a two rounds for each of team-b's while both wait (a share of 2/3,
    whichever team went first); equal weights would give turns (1/2)."""
    real = kueue_cluster
    queues("kueue-fair", 2, {"team-a": 3, "team-b": 1}, fair=True)
    names = ("fair-a", "fair-b")
    docs = [_campaign(name, team, [{"name": "e", "agent": _agent(5)}], seeds=6, parallelism=6, queue=team)
            for name, team in zip(names, TEAM_NAMESPACES, strict=True)]
    watch = PodWatch(real)
    try:
        real.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
        statuses = _wait_campaigns(real, list(zip(TEAM_NAMESPACES, names, strict=True)), 900)
    finally:
        watch.stop()
    for name in names:
        assert statuses[name]["phase"] == "Succeeded" and statuses[name]["progress"] == "6/6", statuses[name]
        assert statuses[name]["infrastructureFailed"] == 0, statuses[name]
    timeline = watch.timeline(names)
    peak = max(sum(counts.values()) for _, counts in timeline)
    assert peak <= 2, f"{peak} agent pods at once on a 2-pod quota"
    assert peak == 2, f"the quota was never used in full ({len(watch.events)} pod events: {watch.events[:5]})"
    # the share of each team while both still had trials waiting: until the first team's last pod appeared
    first = watch.first_seen()
    last_start = {c: max(at for at, campaign in first.values() if campaign == c) for c in names}
    start = min(at for at, _ in first.values())
    end = min(last_start.values())
    used = dict.fromkeys(names, 0.0)
    for (at, counts), (nxt, _) in itertools.pairwise(timeline):
        lo, hi = max(at, start), min(nxt, end)
        if hi > lo:
            for c in names:
                used[c] += counts[c] * (hi - lo)
    share = used["fair-a"] / sum(used.values())
    order = "".join(campaign[-1] for _, campaign in sorted(first.values()))
    print(f"pod-seconds while both waited ({end - start:.0f} s): {used}; team-a's share {share:.2f} (weights 3:1); "
          f"pods started in the order {order}")
    assert last_start["fair-a"] < last_start["fair-b"], f"team-b's trials all started first: {order}"
    assert 0.6 <= share <= 0.8, f"team-a's share {share:.2f} is not what weights 3:1 give ({used}, order {order})"


@pytest.mark.slow  # a 20 s low-priority campaign preempted and run again, beside its run without a queue: ~90 s
def test_a_higher_priority_campaign_preempts_and_the_preempted_trials_finish_as_if_never_preempted(
        kueue_cluster: RealCluster, queues: Queues) -> None:
    real = kueue_cluster
    ns = real.release.namespace
    queues("kueue-prio", 2, {"prio": None}, preemption="LowerPriority")
    real.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
         "value": value} for name, value in (("anchorage-low", 100), ("anchorage-high", 1000))]))
    entries = [{"name": "right", "agent": _agent(20)}, {"name": "off", "agent": _agent(20, scale=1.3)}]
    low = _campaign("prio-low", ns, entries, queue="prio", priority="anchorage-low", retries=2)
    reference = _campaign("prio-reference", ns, entries)  # the same campaign without a queue: never preempted
    real.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([low, reference]))

    def low_running() -> bool:
        items = real.get("trials", "-n", ns, "-l", "anchorage.dev/campaign=prio-low")["items"]
        return len(items) == 2 and all((t.get("status") or {}).get("phase") == "Running" for t in items)

    real.wait_for(low_running, 240, "both low-priority trials to be admitted and running")
    high = _campaign("prio-high", ns, [{"name": "urgent", "agent": _agent(2)}], queue="prio", priority="anchorage-high")
    real.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(high))
    statuses = _wait_campaigns(real, [(ns, "prio-low"), (ns, "prio-reference"), (ns, "prio-high")], 900)
    assert all(s["phase"] == "Succeeded" and s["infrastructureFailed"] == 0 for s in statuses.values()), statuses
    trials = real.get("trials", "-n", ns, "-l", "anchorage.dev/campaign=prio-low")["items"]
    assert all(t["status"]["phase"] == "Succeeded" for t in trials), [t["status"] for t in trials]
    preempted = []
    for trial in trials:
        record = json.loads((real.store / "prio-low" / trial["metadata"]["name"] / "trial.json").read_text())
        for earlier in record.get("previous_attempts") or []:
            attempt = json.loads((real.store / "prio-low" / trial["metadata"]["name"] / "attempts" /
                                  f"{earlier['attempt']}.json").read_text())
            assert (attempt["phase"], attempt["reason"]) == ("InfrastructureFailed", "preempted"), attempt
            assert "Preempted" in attempt["message"], attempt
            preempted.append(trial["metadata"]["name"])
    assert preempted, f"no low-priority attempt was preempted: {[t['status'] for t in trials]}"
    assert all(t["status"]["attempt"] >= 1 for t in trials if t["metadata"]["name"] in preempted)
    assert statuses["prio-low"]["leaderboard"] == statuses["prio-reference"]["leaderboard"], statuses
    assert {r["entry"]: r["oEval"] for r in statuses["prio-low"]["leaderboard"]}["right"] == 1.0


@pytest.mark.slow  # a 75 s wait in the queue, then the trial: about 2 minutes
def test_a_trial_waiting_in_the_queue_does_not_spend_its_agent_time(kueue_cluster: RealCluster,
                                                                    queues: Queues) -> None:
    real = kueue_cluster
    ns, trials_ns = real.release.namespace, real.release.trials_namespace
    queues("kueue-slow", 1, {"slow": None})
    restricted = {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                  "seccompProfile": {"type": "RuntimeDefault"}}
    blocker = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "queue-blocker", "namespace": trials_ns,
                            "labels": {"kueue.x-k8s.io/queue-name": "slow"}},
               "spec": {"suspend": True, "activeDeadlineSeconds": 75, "backoffLimit": 0, "template": {"spec": {
                   "restartPolicy": "Never", "automountServiceAccountToken": False,
                   "containers": [{"name": "hold", "image": real.local.system_images["pause"],
                                   "securityContext": restricted,
                                   "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}
    real.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(blocker))
    real.wait_for(lambda: real.get("job", "queue-blocker", "-n", trials_ns)["spec"].get("suspend") is False, 60,
                  "Kueue to admit the blocker")
    trial = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": "patient", "namespace": ns},
             "spec": {"task": "smoke-inventory", "agent": _agent(10), "queueName": "slow",
                      "limits": {**LIMITS, "agentTimeoutSec": 30}}}
    real.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(trial))
    shown: list[str] = []
    seen: dict[str, Any] = {}

    def ended() -> bool:
        status = real.status("trial", ns, "patient")
        if status.get("phase") == "Queued":
            shown.append(real.kubectl("get", "trials", "patient", "-n", ns, "-o", "wide").stdout)
            seen.update({k: status[k] for k in ("queuePosition", "queueMessage") if k in status})
        return status.get("phase") in ("Succeeded", "Failed", "InfrastructureFailed")

    real.wait_for(ended, 300, "the queued trial to end")
    status = real.status("trial", ns, "patient")
    assert (status["phase"], status["reason"]) == ("Succeeded", "completed"), status
    assert shown and "Queued" in shown[0] and "slow" in shown[0], shown[:1]
    assert seen.get("queuePosition") == 0 and "quota" in str(seen.get("queueMessage")), seen
    waited = _seconds(status["startTime"]) - _seconds(status["queuedTime"])
    assert waited >= 60, f"the trial waited {waited:.0f} s in the queue, less than the test means to show"
    record = json.loads((real.store / "_trials" / ns / "patient" / "trial.json").read_text())
    # its time runs from admission on: the agent's 10 s plus its pod's start (image pulls on a loaded machine: 42 s
    # once), never the queue's wait (≥ 60 s)
    assert 10 <= record["durations"]["agent_sec"] < waited, (record["durations"], waited)
    real.kubectl("delete", "trial", "patient", "-n", ns, "--wait=false", check=False)


def _seconds(rfc3339: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()
