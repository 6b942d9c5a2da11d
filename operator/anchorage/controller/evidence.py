"""How a trial's attempt ended, from Kubernetes' own evidence: the lifecycle's :class:`AttemptEnd`.

Called by :mod:`anchorage.controller.trials` when an attempt's Job has ended (its event, or the repair path).
The evidence, all of it the platform's — nothing the agent can write decides a phase:

* the Job's condition (``Complete``, ``DeadlineExceeded``, ``BackoffLimitExceeded``, ...);
* the Pod's ``containerStatuses`` / ``initContainerStatuses`` as the kubelet reports them: the ``agent``
  container's exit code and reason (``OOMKilled`` is the kernel's kill, ``StartError`` /
  ``ContainerCannotRun`` / ``ContainerStatusUnknown`` the node's failure), and the ``fetch-task`` init
  container's exit code (:data:`anchorage.runtime.kubepod.REPLAY_MISSING_EXIT`: a replay whose artifact does
  not exist — no agent code has run yet);
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

from collections.abc import Iterable, Mapping
from typing import Any

from anchorage.runtime.kubepod import REPLAY_MISSING_EXIT
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


def attempt_end(result: str, upload: Mapping[str, Any] | None, timeout_sec: float | None,
                cli: str | None = None, *, pods: Iterable[Mapping[str, Any]] = (),
                plan: AgentPlan | None = None) -> AttemptEnd:
    """A finished Job (how it ended, ``result``), its pods and the upload sidecar's marker as the lifecycle's
    evidence (see the module's docstring). Without a pod to read (gone with its Job), a ``Complete`` Job says
    the agent exited 0 (a pod succeeds only when every container did); a failed one is the agent's failure
    whose message names the lost evidence (the marker's exit code is the agent's own writing: never used)."""
    pods = list(pods)
    if result == "DeadlineExceeded":
        return AttemptEnd(timed_out=True, timeout_sec=timeout_sec)
    fetch = terminated(pods, FETCH_CONTAINER, init=True)
    if fetch is not None and fetch.get("exitCode") == REPLAY_MISSING_EXIT:
        return AttemptEnd(agent_problem=missing_replay_message(plan) if plan is not None and plan.replay is not None
                          else "the replay artifact does not exist")
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
    return AttemptEnd(exit_code=code if isinstance(code, int) else None, oom_killed=reason == "OOMKilled",
                      oom_detail="the kernel killed the agent's container (OOMKilled)" if reason == "OOMKilled" else "",
                      oversized=bool(oversized), oversized_detail=str(oversized or ""))
