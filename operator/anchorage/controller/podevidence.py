"""What a trial pod's status says before its Job ends — the platform's evidence the operator's pod watch decides on.

Pure functions over a pod (and a Job's Events) as the API sends them, used by :mod:`anchorage.controller.pods` (the
watch's handling) and :mod:`anchorage.controller.attempts` (a recorded :class:`Verdict` decides how an attempt ended).
Every decision here rests on what the scheduler, the kubelet, the Job controller or the node lifecycle controller
wrote — conditions, container states, their timestamps —, never on anything the agent can write:

* :func:`platform_failure` — a pod kept from running: no node takes it (``PodScheduled=False``, ``Unschedulable``) for
  ``unschedulable_after_sec``; a container that cannot start (``ErrImagePull``/``ImagePullBackOff``,
  ``CreateContainerConfigError``, ``CreateContainerError``) for ``start_after_sec`` — an image the registry does not
  have, an invalid image name at once; a pod the platform is taking away (condition ``DisruptionTarget``: the taint
  manager's eviction from a lost node, the eviction API, the kubelet's node-pressure eviction, the scheduler's
  preemption) at once, naming the node;
* :func:`failed_create` — a Job whose pod was never created: the Job controller's ``FailedCreate`` Events (a missing
  RuntimeClass, a pod the admission refuses: at once; a ResourceQuota refusal: after ``unschedulable_after_sec``);
* :func:`agent_times` — when the kubelet started (and ended) the ``agent`` container: the agent's own time starts
  there, so scheduling and image pulls never count against it (:func:`overran`).

A :class:`Verdict` is the operator's decision that an attempt ended (a platform failure, or the agent past its time):
recorded in the trial's folder (:func:`record`) before the Job is deleted, read back when the trial is finished
(:func:`recorded`), so an operator killed in between finishes it the same way.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from anchorage.store.base import AlreadyStored, ArtifactStore
from anchorage.trials import AttemptEnd, Reason

Obj = Mapping[str, Any]
AGENT = "agent"
TIMEOUT = "timeout"
#: Waiting reasons of a container whose image cannot be pulled, and those of a container the node cannot create.
PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff"})
NEVER_PULLS = frozenset({"InvalidImageName", "ErrImageNeverPull"})
CONFIG_REASONS = frozenset({"CreateContainerConfigError"})
CREATE_REASONS = frozenset({"CreateContainerError", "RunContainerError"})
#: ``DisruptionTarget`` reasons (Kubernetes' pod disruption conditions) → the platform's reason.
DISRUPTIONS = {"DeletionByTaintManager": Reason.NODE_LOST, "DeletionByPodGC": Reason.NODE_LOST,
               "EvictionByEvictionAPI": Reason.EVICTED, "TerminationByKubelet": Reason.EVICTED,
               "PreemptionByScheduler": Reason.EVICTED}


@dataclass(frozen=True)
class Verdict:
    """How the operator decided an attempt ended: ``reason`` — a platform :class:`Reason` value, or ``timeout`` (the
    agent ran past its time: the model's); ``message``; ``evidence`` — the object that says so (``pod ns/name:
    condition ...``); ``job`` — the attempt's Job."""

    reason: str
    message: str
    evidence: str
    job: str

    def attempt_end(self, timeout_sec: float | None) -> AttemptEnd:
        """The lifecycle's evidence of this end."""
        if self.reason == TIMEOUT:
            return AttemptEnd(timed_out=True, timeout_sec=timeout_sec)
        return AttemptEnd(launcher_failure=f"{self.message} ({self.evidence})", platform_reason=Reason(self.reason))


def key(prefix: str, job: str) -> str:
    """Where the verdict about Job ``job`` is kept in its trial's folder."""
    return f"{prefix}/verdicts/{job}.json"


def record(store: ArtifactStore, prefix: str, verdict: Verdict) -> Verdict:
    """Keep ``verdict`` in the trial's folder; the verdict kept there (the first one recorded wins)."""
    try:
        store.put_bytes(key(prefix, verdict.job), json.dumps(asdict(verdict)).encode(), exclusive=True)
    except AlreadyStored:
        return recorded(store, prefix, verdict.job) or verdict
    return verdict


def recorded(store: ArtifactStore, prefix: str, job: str) -> Verdict | None:
    """The verdict kept about Job ``job``, if one was."""
    try:
        data = json.loads(store.get_bytes(key(prefix, job)))
        return Verdict(**{k: str(data[k]) for k in ("reason", "message", "evidence", "job")})
    except (OSError, KeyError, ValueError, TypeError):
        return None


def parse_time(text: Any) -> float | None:
    """An RFC 3339 timestamp as seconds since the epoch (None: absent or not one)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _name(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"pod {meta.get('namespace', '')}/{meta.get('name', '')}"


def _statuses(pod: Obj) -> Iterable[Mapping[str, Any]]:
    status = pod.get("status") or {}
    for group in ("initContainerStatuses", "containerStatuses"):
        for item in status.get(group) or []:
            if isinstance(item, Mapping):
                yield item


def condition(pod: Obj, type_: str) -> Mapping[str, Any] | None:
    """The pod's condition of ``type_``, if it has one."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == type_:
            return cond
    return None


def agent_times(pod: Obj) -> tuple[float | None, float | None]:
    """(started, finished) of the ``agent`` container as the kubelet reports them (None: not yet)."""
    for item in (pod.get("status") or {}).get("containerStatuses") or []:
        if isinstance(item, Mapping) and item.get("name") == AGENT:
            state = item.get("state") or {}
            if "running" in state:
                return parse_time((state["running"] or {}).get("startedAt")), None
            if "terminated" in state:
                ended = state["terminated"] or {}
                return parse_time(ended.get("startedAt")), parse_time(ended.get("finishedAt"))
    return None, None


def overran(pod: Obj, timeout: float, now: float, slack: float) -> bool:
    """Whether the agent container is still running ``slack`` seconds past its timeout (from its own start)."""
    started, finished = agent_times(pod)
    return started is not None and finished is None and now >= started + timeout + slack


def disruption(pod: Obj, job: str) -> Verdict | None:
    """The platform taking the pod away (condition ``DisruptionTarget``), as a verdict naming the node."""
    cond = condition(pod, "DisruptionTarget")
    if cond is None or cond.get("status") != "True":
        return None
    why = str(cond.get("reason") or "")
    reason = DISRUPTIONS.get(why, Reason.EVICTED)
    node = str((pod.get("spec") or {}).get("nodeName") or "its node")
    what = f"the node {node} was lost" if reason is Reason.NODE_LOST else f"the platform evicted the pod from {node}"
    detail = str(cond.get("message") or "").strip()
    return Verdict(str(reason), f"{what}: {detail or why}", f"{_name(pod)}: condition DisruptionTarget ({why}), "
                   f"node {node}", job)


def platform_failure(pod: Obj, job: str, now: float, first_seen: Mapping[str, float], *,
                     unschedulable_after: float, start_after: float) -> tuple[Verdict | None, float | None]:
    """A platform failure the pod shows (a verdict), else when to look again (None: nothing to wait for).

    ``first_seen``: when the operator first saw each waiting container's reason (``container/reason`` keys): the
    kubelet gives a waiting state no time of its own.
    """
    found = disruption(pod, job)
    if found is not None:
        return found, None
    due: list[float] = []
    scheduled = condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        since = parse_time(scheduled.get("lastTransitionTime")) or now
        if now >= since + unschedulable_after:
            return Verdict(str(Reason.UNSCHEDULABLE), f"no node could take the pod for {now - since:.0f} s: "
                           f"{scheduled.get('message') or 'Unschedulable'}",
                           f"{_name(pod)}: condition PodScheduled=False (Unschedulable)", job), None
        due.append(since + unschedulable_after)
    for item in _statuses(pod):
        waiting = (item.get("state") or {}).get("waiting") or {}
        why, detail = str(waiting.get("reason") or ""), str(waiting.get("message") or "").strip()
        container = str(item.get("name") or "")
        evidence = f"{_name(pod)}: container {container} waiting ({why})"
        if why in NEVER_PULLS or (why in PULL_REASONS and "not found" in detail.lower()):
            return Verdict(str(Reason.IMAGE_PULL), f"the image {item.get('image')} cannot be pulled: {detail or why}",
                           evidence, job), None
        if why in PULL_REASONS | CONFIG_REASONS | CREATE_REASONS:
            since = first_seen.get(f"{container}/{why}", now)
            if now >= since + start_after:
                reason = Reason.IMAGE_PULL if why in PULL_REASONS else \
                    Reason.CONTAINER_CONFIG if why in CONFIG_REASONS else Reason.SANDBOX_ERROR
                what = f"the image {item.get('image')} could not be pulled" if why in PULL_REASONS else \
                    f"the container {container} could not be started"
                return Verdict(str(reason), f"{what} for {now - since:.0f} s: {detail or why}", evidence, job), None
            due.append(since + start_after)
    return None, min(due) if due else None


def waiting_reasons(pod: Obj) -> list[str]:
    """The ``container/reason`` keys of the pod's waiting containers whose time :func:`platform_failure` measures."""
    keys = []
    for item in _statuses(pod):
        why = str(((item.get("state") or {}).get("waiting") or {}).get("reason") or "")
        if why in PULL_REASONS | CONFIG_REASONS | CREATE_REASONS:
            keys.append(f"{item.get('name')}/{why}")
    return keys


def failed_create(events: Iterable[Obj], job: str, created: float, now: float, *,
                  unschedulable_after: float) -> tuple[Verdict | None, bool]:
    """A Job whose pod was never created, from its Events: (a verdict, whether to look again later).

    A ResourceQuota refusal ends the attempt once the Job has waited ``unschedulable_after`` (quotas free up as other
    pods end); any other refusal of the pod (a missing RuntimeClass, the admission) at once.
    """
    refused = [e for e in events if e.get("reason") == "FailedCreate"]
    if not refused:
        return None, True
    last = refused[-1]
    message = str(last.get("message") or "").strip()
    namespace = (last.get("involvedObject") or {}).get("namespace", "")
    evidence = f"job {namespace}/{job}: event FailedCreate"
    if "exceeded quota" in message:
        if now < created + unschedulable_after:
            return None, True
        return Verdict(str(Reason.QUOTA_EXCEEDED), f"a ResourceQuota refused the pod for {now - created:.0f} s: "
                       f"{message}", evidence, job), False
    return Verdict(str(Reason.POD_REJECTED), f"the pod could not be created: {message}", evidence, job), False
