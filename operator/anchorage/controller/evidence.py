"""How a trial's attempt ended, from Kubernetes' own evidence: the lifecycle's :class:`AttemptEnd`.

Called by :mod:`anchorage.controller.attempts` when an attempt's Job has ended (its event, or the repair path).
The evidence, all of it the platform's — nothing the agent can write decides a phase:

* the Job's condition (``Complete``, ``DeadlineExceeded``, ``BackoffLimitExceeded``, ...); ``DeadlineExceeded`` is the
  Job's backstop (the agent's timeout plus the platform's allowance): the model's ``timeout`` only when the kubelet's
  times say the agent container ran its whole time, else the platform's failure;
* the agent container's own times (``startedAt``/``finishedAt``): killed by its container's timer
  (``kube.jobs.timed``) after running its whole timeout, it is the model's ``timeout``, whatever its exit code;
* the Pod's ``containerStatuses`` / ``initContainerStatuses`` as the kubelet reports them: the ``agent``
  container's exit code and reason (``OOMKilled`` is the kernel's kill, ``StartError`` /
  ``ContainerCannotRun`` / ``ContainerStatusUnknown`` the node's failure), and the ``fetch-task`` init
  container's exit code (:data:`anchorage.runtime.kube.pod.REPLAY_MISSING_EXIT`: a replay whose artifact does
  not exist — no agent code has run yet) and the ``await-policy`` one's
  (:data:`anchorage.runtime.kube.pod.POLICY_OPEN_EXIT`: the pod's NetworkPolicies never took hold, the agent never
  started — the platform's failure);
* the Pod's own ``status.reason`` ``Evicted`` (the kubelet killed every container at once, e.g. the agent's
  HOME or ``/tmp`` emptyDir over its ``sizeLimit``; the Job only says ``BackoffLimitExceeded``): without the
  upload marker, the platform's failure quoting the kubelet's message;
* the upload sidecar's marker ``upload.json`` (the sidecar holds the store's credentials; the agent shares
  no writable folder with it but what it uploads): whether the results were collected, and whether a folder
  measured over its quota. The exit code the agent's wrapper wrote into its run folder (and the sidecar
  copies into the marker) is the agent's own writing: never used.

A ``Complete`` Job needs no pod: its pod succeeded, which the kubelet reports only when every container exited
0 (an OOM kill of the agent container, a node's failure to run it, an init container's refusal all fail the
pod), so the operator reads the pods of failed Jobs only.

The local engine's counterpart is ``runtime/local/trials._evidence`` (the sandbox's own status channel).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from anchorage.controller.podevidence import agent_times, parse_time
from anchorage.runtime.kube.jobs import POLICY_CONTAINER
from anchorage.runtime.kube.pod import POLICY_OPEN_EXIT, REPLAY_MISSING_EXIT
from anchorage.trials import AgentPlan, AttemptEnd
from anchorage.trials.agents.plans import missing_replay_message

AGENT_CONTAINER = "agent"
FETCH_CONTAINER = "fetch-task"
#: Container reasons that say the node, not the agent, ended the container.
NODE_REASONS = frozenset({"StartError", "ContainerCannotRun", "ContainerStatusUnknown", "CreateContainerError",
                          "RunContainerError"})


def eviction(pods: Iterable[Mapping[str, Any]]) -> str | None:
    """The kubelet's eviction message of the first of ``pods`` it evicted (``status.reason`` ``Evicted``), else None."""
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("reason") == "Evicted":
            return str(status.get("message") or "").strip() or "no message"
    return None


def terminated(pods: Iterable[Mapping[str, Any]], container: str, *, init: bool = False) -> dict[str, Any] | None:
    """The kubelet's ``state.terminated`` of ``container`` in the newest of ``pods`` that has one, else None."""
    key = "initContainerStatuses" if init else "containerStatuses"
    newest = sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""), reverse=True)
    for pod in newest:
        for status in (pod.get("status") or {}).get(key) or []:
            state = (status.get("state") or {}).get("terminated") if isinstance(status, dict) else None
            if status.get("name") == container and isinstance(state, dict):
                return state
    return None


def _ran(state: Mapping[str, Any]) -> float | None:
    """Seconds between a container state's ``startedAt`` and ``finishedAt`` (the kubelet's, in whole seconds)."""
    started, finished = parse_time(state.get("startedAt")), parse_time(state.get("finishedAt"))
    return finished - started if started is not None and finished is not None else None


def _backstop(pods: list[Mapping[str, Any]], timeout_sec: float | None) -> AttemptEnd:
    """The Job's own deadline passed (the agent's timeout plus the platform's allowance: ``kube.jobs.trial_job``). The
    agent is timed from its container's start, so this is the model's timeout only when the kubelet says the agent
    container ran its whole time; otherwise the platform kept it from running that long."""
    newest = sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""), reverse=True)
    for pod in newest[:1]:
        started, finished = agent_times(pod)
        if started is not None and timeout_sec and (finished or time.time()) - started >= timeout_sec - 1:
            return AttemptEnd(timed_out=True, timeout_sec=timeout_sec)
    return AttemptEnd(launcher_failure="the attempt's Job reached its deadline (the agent's timeout plus the "
                                       "platform's allowance) before its agent had run its time: the platform kept "
                                       "the pod from running")


def attempt_end(result: str, upload: Mapping[str, Any] | None, timeout_sec: float | None,
                cli: str | None = None, *, pods: Iterable[Mapping[str, Any]] = (),
                plan: AgentPlan | None = None) -> AttemptEnd:
    """A finished Job (how it ended, ``result``), its pods and the upload sidecar's marker as the lifecycle's
    evidence (see the module's docstring). Without a pod to read (gone with its Job), a ``Complete`` Job says
    the agent exited 0 (a pod succeeds only when every container did); a failed one is the agent's failure
    whose message names the lost evidence (the marker's exit code is the agent's own writing: never used)."""
    pods = list(pods)
    if result == "DeadlineExceeded":
        return _backstop(pods, timeout_sec)
    fetch = terminated(pods, FETCH_CONTAINER, init=True)
    if fetch is not None and fetch.get("exitCode") == REPLAY_MISSING_EXIT:
        return AttemptEnd(agent_problem=missing_replay_message(plan) if plan is not None and plan.replay is not None
                          else "the replay artifact does not exist")
    policy = terminated(pods, POLICY_CONTAINER, init=True)
    if policy is not None and policy.get("exitCode") == POLICY_OPEN_EXIT:
        return AttemptEnd(launcher_failure="the pod still reached the Kubernetes API a minute after it started (its "
                                           "NetworkPolicies were not enforced for it), so its agent was not started")
    if upload is None:
        evicted = eviction(pods)
        if evicted is not None:
            return AttemptEnd(launcher_failure=f"the node evicted the attempt's pod before its results were "
                                               f"collected: {evicted}")
        if result == "Complete":
            return AttemptEnd(storage_failure="the attempt ended but its results were never uploaded "
                                              "(the upload sidecar wrote no marker)")
        hint = (f" (its check-agent init container fails when the agent image lacks the pinned {cli} CLI: build "
                f"images/agent-base with AGENT_CLIS including {cli})") if cli else ""
        return AttemptEnd(launcher_failure=f"the attempt's pod ended ({result}) before its results were collected{hint}")
    oversized = upload.get("oversized")  # measured by the sidecar against the folders' quotas
    agent = terminated(pods, AGENT_CONTAINER)
    if agent is None:
        if result == "Complete":
            return AttemptEnd(exit_code=0, oversized=bool(oversized), oversized_detail=str(oversized or ""))
        return AttemptEnd(agent_problem=f"the attempt's Job ended {result} and its pod is gone, and with it the "
                                        "kubelet's record of the agent's exit status (evidence lost; nothing shows "
                                        "the platform failed, so it counts as the agent's failure)")
    reason = str(agent.get("reason") or "")
    code = agent.get("exitCode")
    if reason in NODE_REASONS:
        detail = f": {agent['message']}" if agent.get("message") else ""
        return AttemptEnd(launcher_failure=f"the node ended the agent's container ({reason}){detail}")
    ran = _ran(agent)
    if reason != "OOMKilled" and code != 0 and timeout_sec and ran is not None and ran >= timeout_sec - 1:
        # killed by its container's timer (kube.jobs.timed): the kubelet's own times say it ran its whole time
        return AttemptEnd(exit_code=code if isinstance(code, int) else None, timed_out=True, timeout_sec=timeout_sec)
    return AttemptEnd(exit_code=code if isinstance(code, int) else None, oom_killed=reason == "OOMKilled",
                      oom_detail="the kernel killed the agent's container (OOMKilled)" if reason == "OOMKilled" else "",
                      oversized=bool(oversized), oversized_detail=str(oversized or ""))
