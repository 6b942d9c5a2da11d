"""The operator's pod watch: what a trial pod's status (and a pod-less Job's Events) make it decide, from the
platform's evidence only — never a model's zero for a platform failure, the agent timed from its own container's
start, the store opened only once the kubelet says the agent ended. The real thing on real nodes:
``tests/kube/test_pod_lifecycle.py``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from anchorage.controller import podevidence, pods
from anchorage.controller.podevidence import Verdict
from anchorage.runtime.kube import jobs
from anchorage.runtime.kube.jobs import OperatorConfig
from anchorage.store.local import FileStore
from anchorage.trials import Phase, Reason, classify

NOW = 1_800_000_000.0
BOUNDS = {"unschedulable_after": 600.0, "start_after": 120.0}


def stamp(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def pod(*, phase: str = "Pending", conditions: list[dict[str, Any]] | None = None,
        containers: list[dict[str, Any]] | None = None, init: list[dict[str, Any]] | None = None,
        labels: dict[str, str] | None = None, timeout: int = 60, uid: str = "p1") -> dict[str, Any]:
    return {"metadata": {"name": "t-a0-x1", "namespace": "trials", "uid": uid,
                         "labels": {**jobs.MANAGED_BY, jobs.LABEL_ROLE: "trial",
                                    "batch.kubernetes.io/job-name": "t-a0", **(labels or {})},
                         "annotations": {jobs.ANNOTATION_TIMEOUT: str(timeout),
                                         "anchorage.dev/trial-namespace": "evals", jobs.LABEL_TRIAL: "t"},
                         "ownerReferences": [{"kind": "Job", "name": "t-a0", "uid": "j1", "controller": True}]},
            "spec": {"nodeName": "node-2"},
            "status": {"phase": phase, "conditions": conditions or [], "containerStatuses": containers or [],
                       "initContainerStatuses": init or []}}


def waiting(name: str, reason: str, message: str = "", image: str = "registry:5000/agent:nope") -> dict[str, Any]:
    return {"name": name, "image": image, "state": {"waiting": {"reason": reason, "message": message}}}


def decide(body: dict[str, Any], now: float = NOW, seen: dict[str, float] | None = None) -> tuple[Verdict | None,
                                                                                                  float | None]:
    return podevidence.platform_failure(body, "t-a0", now, seen or {}, **BOUNDS)


def test_a_pod_no_node_takes_fails_the_attempt_only_after_the_bound_from_the_schedulers_own_time() -> None:
    since = NOW - 100
    unschedulable = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                      "lastTransitionTime": stamp(since), "message": "0/2 nodes are available: 2 Insufficient cpu."}]
    assert decide(pod(conditions=unschedulable)) == (None, since + 600)
    verdict, _ = decide(pod(conditions=unschedulable), now=since + 601)
    assert verdict is not None and verdict.reason == "unschedulable" and "Insufficient cpu" in verdict.message
    assert "PodScheduled=False" in verdict.evidence and "trials/t-a0-x1" in verdict.evidence
    outcome = classify(verdict.attempt_end(60))
    assert (outcome.phase, outcome.reason) == (Phase.INFRASTRUCTURE_FAILED, Reason.UNSCHEDULABLE)


def test_an_image_the_registry_lacks_fails_at_once_other_pull_failures_after_the_bound() -> None:
    missing = pod(containers=[waiting("agent", "ErrImagePull", 'failed to pull "registry:5000/agent:nope": not found')])
    verdict, _ = decide(missing)
    assert verdict is not None and verdict.reason == "image_pull" and "registry:5000/agent:nope" in verdict.message
    flaky = pod(init=[waiting("fetch-task", "ImagePullBackOff", "Back-off pulling image")])
    assert podevidence.waiting_reasons(flaky) == ["fetch-task/ImagePullBackOff"]
    seen = {"fetch-task/ImagePullBackOff": NOW - 30}
    assert decide(flaky, seen=seen) == (None, NOW - 30 + 120)
    verdict, _ = decide(flaky, now=NOW + 100, seen=seen)
    assert verdict is not None and verdict.reason == "image_pull" and "container fetch-task" in verdict.evidence


def test_a_missing_secret_is_the_platforms_after_the_bound_not_the_models() -> None:
    config_error = pod(containers=[waiting("agent", "CreateContainerConfigError", 'secret "t-a0-gateway" not found')])
    assert decide(config_error, seen={"agent/CreateContainerConfigError": NOW})[0] is None  # the token comes soon
    verdict, _ = decide(config_error, now=NOW + 121, seen={"agent/CreateContainerConfigError": NOW})
    assert verdict is not None and verdict.reason == "container_config"
    assert classify(verdict.attempt_end(60)).reason is Reason.CONTAINER_CONFIG


def test_a_lost_node_is_named_and_an_eviction_is_the_platforms() -> None:
    lost = pod(phase="Running", conditions=[{"type": "DisruptionTarget", "status": "True",
                                              "reason": "DeletionByTaintManager",
                                              "message": "Taint manager: deleting due to NoExecute taint"}])
    verdict, _ = decide(lost)
    assert verdict is not None and verdict.reason == "node_lost" and "node-2" in verdict.message
    assert "node node-2" in verdict.evidence
    drained = pod(phase="Running", conditions=[{"type": "DisruptionTarget", "status": "True",
                                                 "reason": "EvictionByEvictionAPI", "message": "Eviction API"}])
    assert podevidence.disruption(drained, "t-a0").reason == "evicted"  # type: ignore[union-attr]


def test_the_agent_is_timed_from_its_containers_start() -> None:
    running = pod(phase="Running", containers=[{"name": "agent", "state": {"running": {"startedAt": stamp(NOW)}}}])
    assert podevidence.agent_times(running) == (NOW, None)
    assert not podevidence.overran(running, 60, NOW + 70, 15)  # its container's timer has until +60, we wait +15
    assert podevidence.overran(running, 60, NOW + 75, 15)
    ended = pod(phase="Running", containers=[{"name": "agent", "state": {"terminated": {
        "startedAt": stamp(NOW), "finishedAt": stamp(NOW + 5), "exitCode": 0}}}])
    assert podevidence.agent_times(ended) == (NOW, NOW + 5) and not podevidence.overran(ended, 1, NOW + 100, 0)
    assert classify(Verdict("timeout", "past", "pod", "t-a0").attempt_end(60)).reason is Reason.TIMEOUT


def test_a_job_without_a_pod_reads_the_job_controllers_refusal() -> None:
    runtime = [{"reason": "FailedCreate", "involvedObject": {"namespace": "trials"},
                "message": 'Error creating: pods "t-a0-" is forbidden: pod rejected: RuntimeClass "gvisor" not found'}]
    verdict, again = podevidence.failed_create(runtime, "t-a0", NOW, NOW + 20, unschedulable_after=600)
    assert verdict is not None and verdict.reason == "pod_rejected" and 'RuntimeClass "gvisor"' in verdict.message
    assert verdict.evidence == "job trials/t-a0: event FailedCreate" and not again
    quota = [{"reason": "FailedCreate", "involvedObject": {"namespace": "trials"},
              "message": 'pods "t-a0-x" is forbidden: exceeded quota: trials, requested: cpu=1, limited: cpu=100m'}]
    assert podevidence.failed_create(quota, "t-a0", NOW, NOW + 20, unschedulable_after=600) == (None, True)
    verdict, _ = podevidence.failed_create(quota, "t-a0", NOW, NOW + 601, unschedulable_after=600)
    assert verdict is not None and verdict.reason == "quota_exceeded"
    assert podevidence.failed_create([], "t-a0", NOW, NOW + 601, unschedulable_after=600) == (None, True)


def test_the_first_verdict_recorded_is_the_one_kept(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    first = Verdict("image_pull", "cannot pull", "pod a/b", "t-a0")
    assert podevidence.record(store, "c/t", first) == first
    assert podevidence.record(store, "c/t", Verdict("timeout", "x", "y", "t-a0")) == first
    assert podevidence.recorded(store, "c/t", "t-a0") == first and podevidence.recorded(store, "c/t", "t-a1") is None


# ----- the watch's handling (PodEvents), its API calls stood in for -----------------------------------------------


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> tuple[pods.PodEvents, list[Any]]:
    calls: list[Any] = []
    monkeypatch.setattr(pods, "_open_store", lambda ns, name: calls.append(("label", ns, name)) or True)

    async def end(self: pods.PodEvents, job: dict[str, Any], verdict: Verdict) -> None:
        calls.append(("end", job["metadata"]["name"], job["metadata"]["uid"], verdict.reason))

    monkeypatch.setattr(pods.PodEvents, "_end", end)
    monkeypatch.setattr(pods, "_job_events", lambda ns, uid: calls.append(("events", uid)) or [
        {"reason": "FailedCreate", "message": "RuntimeClass \"x\" not found", "involvedObject": {"namespace": ns}}])
    monkeypatch.setattr(pods.kube, "job_pods", lambda ns, name: [])
    return pods.PodEvents(settings=OperatorConfig(start_after_sec=10), paused=lambda: False), calls


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0.01)


async def test_the_store_opens_once_when_the_kubelet_says_the_agent_ended(
        events: tuple[pods.PodEvents, list[Any]]) -> None:
    handler, calls = events
    now = time.time()
    running = [{"name": "agent", "state": {"running": {"startedAt": stamp(now)}}}]
    handler("MODIFIED", pod(phase="Running", containers=running))
    ended = [{"name": "agent", "state": {"terminated": {"startedAt": stamp(now), "finishedAt": stamp(now),
                                                         "exitCode": 0}}}]
    handler("MODIFIED", pod(phase="Running", containers=ended))
    handler("MODIFIED", pod(phase="Running", containers=ended))  # the same state again: no second write
    handler("MODIFIED", pod(phase="Running", containers=ended, labels={jobs.LABEL_STORE_ACCESS: "true"}, uid="p2"))
    handler("MODIFIED", pod(phase="Succeeded", containers=ended, uid="p3"))  # ended: nothing left to upload
    await settle()
    assert calls == [("label", "trials", "t-a0-x1")]
    handler.stop()


async def test_an_agent_past_its_time_and_a_failing_pull_end_their_attempts_once(
        events: tuple[pods.PodEvents, list[Any]]) -> None:
    handler, calls = events
    started = time.time() - 60 - pods.SLACK - 1
    handler("MODIFIED", pod(phase="Running", containers=[{"name": "agent", "state": {"running": {
        "startedAt": stamp(started)}}}], timeout=60))
    handler("MODIFIED", pod(phase="Running", containers=[{"name": "agent", "state": {"running": {
        "startedAt": stamp(started)}}}], timeout=60))
    await settle()
    assert calls == [("end", "t-a0", "j1", "timeout")]
    calls.clear()
    other = pod(init=[waiting("fetch-task", "ErrImagePull", "connection refused")], uid="p9")
    other["metadata"]["ownerReferences"][0]["uid"] = "j9"
    handler("MODIFIED", other)
    assert handler.due["p9"] == pytest.approx(time.time() + 10, abs=2)  # start_after_sec from its first sighting
    handler.seen["p9"]["fetch-task/ErrImagePull"] -= 11
    handler.evaluate("p9", time.time())
    await settle()
    assert calls == [("end", "t-a0", "j9", "image_pull")]
    handler.stop()


async def test_a_job_without_a_pod_is_explained_by_its_events(events: tuple[pods.PodEvents, list[Any]],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    handler, calls = events
    monkeypatch.setattr(pods, "TICK", 0.05)
    old = stamp(time.time() - 60)
    job = {"metadata": {"name": "t-a0", "namespace": "trials", "uid": "j5", "creationTimestamp": old},
           "spec": {}}
    handler.job_event("ADDED", {**job, "metadata": {**job["metadata"], "uid": "j6"}, "spec": {"suspend": True}}, False)
    handler.job_event("ADDED", job, False)
    for _ in range(40):
        await asyncio.sleep(0.05)
        if ("end", "t-a0", "j5", "pod_rejected") in calls:
            break
    assert ("events", "j5") in calls and ("end", "t-a0", "j5", "pod_rejected") in calls
    assert ("events", "j6") not in calls  # a suspended Job (a queue holds it) has no pod on purpose
    handler.stop()
