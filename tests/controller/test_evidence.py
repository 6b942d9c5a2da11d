"""The operator's evidence of an attempt's end: the kubelet's container statuses decide, never a file the agent
can write (the exit code its wrapper leaves in the run folder, copied by the sidecar into ``upload.json``); a
replay whose artifact does not exist ends the trial by the local engine's rule."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from anchorage.controller.evidence import attempt_end
from anchorage.manifests import AgentSpec
from anchorage.runtime.kube import pod
from anchorage.runtime.kube.pod import REPLAY_MISSING_EXIT
from anchorage.tasks import load_task, resolve_task
from anchorage.trials import Phase, Reason, classify, plan_agent, should_retry
from anchorage.trials.agents.plans import missing_replay_message

MARKER = {"exit_code": 0, "files": {"artifacts": 1}}


def _pod(created: str = "2026-12-01T10:00:00Z", *, agent: dict[str, Any] | None = None,
         fetch: dict[str, Any] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Failed"}
    if agent is not None:
        status["containerStatuses"] = [{"name": "agent", "state": {"terminated": agent}}]
    if fetch is not None:
        status["initContainerStatuses"] = [{"name": "fetch-task", "state": {"terminated": fetch}}]
    return {"metadata": {"creationTimestamp": created}, "status": status}


def _outcome(result: str, upload: dict[str, Any] | None, pods: list[dict[str, Any]], **kw: Any) -> tuple[str, str, str]:
    outcome = classify(attempt_end(result, upload, 60.0, pods=pods, **kw))
    return str(outcome.phase), str(outcome.reason), outcome.message


def test_the_exit_code_comes_from_the_container_status_not_from_the_marker() -> None:
    """The agent wrote 0 where its wrapper keeps the exit code (the sidecar copied it): the kubelet says 3."""
    forged = _outcome("BackoffLimitExceeded", MARKER, [_pod(agent={"exitCode": 3, "reason": "Error"})])
    assert forged == ("Failed", "agent_error", "the agent exited with status 3")
    # and 137 written by the agent is not an OOM kill: only the kubelet's OOMKilled is
    fake_oom = _outcome("BackoffLimitExceeded", {**MARKER, "exit_code": 137}, [_pod(agent={"exitCode": 1, "reason": "Error"})])
    assert fake_oom[:2] == ("Failed", "agent_error")
    real_oom = _outcome("BackoffLimitExceeded", MARKER, [_pod(agent={"exitCode": 137, "reason": "OOMKilled"})])
    assert real_oom[:2] == ("Failed", "oom") and "OOMKilled" in real_oom[2]


def test_the_newest_pod_speaks() -> None:
    pods = [_pod("2026-12-01T10:00:00Z", agent={"exitCode": 0, "reason": "Completed"}),
            _pod("2026-12-01T10:05:00Z", agent={"exitCode": 2, "reason": "Error"})]
    assert _outcome("BackoffLimitExceeded", MARKER, pods)[2] == "the agent exited with status 2"


def test_a_node_failure_of_the_container_is_the_platforms() -> None:
    lost = _outcome("BackoffLimitExceeded", MARKER,
                    [_pod(agent={"exitCode": 137, "reason": "ContainerStatusUnknown", "message": "the node restarted"})])
    assert lost[:2] == ("InfrastructureFailed", "sandbox_error") and "the node restarted" in lost[2]


def test_without_a_pod_a_complete_job_means_exit_0_and_a_failed_one_names_the_lost_evidence() -> None:
    assert _outcome("Complete", MARKER, []) == ("Succeeded", "completed", "")
    unknown = attempt_end("BackoffLimitExceeded", {**MARKER, "exit_code": 0}, 60.0, pods=[])
    assert unknown.exit_code is None  # not the marker's 0
    phase, reason, message = _outcome("BackoffLimitExceeded", MARKER, [])
    assert (phase, reason) == ("Failed", "agent_error")
    assert "BackoffLimitExceeded" in message and "pod is gone" in message and "evidence lost" in message


def test_the_sidecars_marker_still_decides_collection_and_quotas() -> None:
    assert _outcome("Complete", None, [_pod(agent={"exitCode": 0, "reason": "Completed"})])[:2] == \
        ("InfrastructureFailed", "storage_error")
    over = {**MARKER, "oversized": "artifacts: over the 10-byte quota"}
    assert _outcome("Complete", over, [_pod(agent={"exitCode": 0, "reason": "Completed"})])[:2] == \
        ("Failed", "oversized_result")


def _plan(artifact: str) -> Any:
    task = load_task(resolve_task("smoke-inventory"))
    return plan_agent(AgentSpec.model_validate({"kind": "replay", "artifact": artifact}), task, 1)


def test_a_missing_replay_artifact_follows_the_local_engines_rule() -> None:
    plan = _plan("/nowhere/{task}.json")
    pods = [_pod(fetch={"exitCode": REPLAY_MISSING_EXIT, "reason": "Error"})]
    end = attempt_end("BackoffLimitExceeded", None, 60.0, pods=pods, plan=plan)
    outcome = classify(end)
    assert (outcome.phase, outcome.reason) == (Phase.FAILED, Reason.AGENT_ERROR)
    assert outcome.message == missing_replay_message(plan) == \
        "replay artifact /nowhere/smoke-inventory.json does not exist (check the entry's agent.artifact)"
    assert not should_retry(outcome, 1, 3)
    # any other failure of fetch-task is the platform's, as before
    other = _outcome("BackoffLimitExceeded", None, [_pod(fetch={"exitCode": 1, "reason": "Error"})], plan=plan)
    assert other[:2] == ("InfrastructureFailed", "sandbox_error")


def test_fetch_task_exits_with_the_missing_replay_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "store"
    store.mkdir()
    monkeypatch.setenv("ANCHORAGE_STORE", f"file://{store}")
    results = tmp_path / "results"
    results.mkdir()
    args = ["fetch-task", "--task", "smoke-inventory", "--dest", str(tmp_path / "task"), "--results", str(results)]
    assert pod.main([*args, "--replay", str(tmp_path / "nothing.json")]) == REPLAY_MISSING_EXIT
    assert pod.main([*args, "--replay", "no/such/key.json"]) == REPLAY_MISSING_EXIT
    monkeypatch.delenv("ANCHORAGE_STORE")  # fetch-task's own environment in a trial pod: no store
    assert pod.main([*args, "--replay", "no/such/key.json"]) == REPLAY_MISSING_EXIT
    assert pod.main([*args, "--replay-in-task", "tests/none.json"]) == REPLAY_MISSING_EXIT
    present = tmp_path / "present.json"
    present.write_text("{}")
    assert pod.main([*args, "--replay", str(present)]) == 0
    artifact = load_task(resolve_task("smoke-inventory")).artifact_name
    assert os.listdir(results) == [artifact] and (results / artifact).read_text() == "{}"


def _ran(seconds: int, code: int = 137, reason: str = "Error") -> dict[str, Any]:
    return {"exitCode": code, "reason": reason, "startedAt": "2026-12-01T10:00:00Z",
            "finishedAt": f"2026-12-01T10:{seconds // 60:02d}:{seconds % 60:02d}Z"}


def test_the_agent_killed_by_its_containers_timer_is_the_models_timeout() -> None:
    """The agent's time is its container's (the kubelet's startedAt/finishedAt): killed after its whole 60 s, it
    timed out; an agent that exits 137 by itself early did not (its own code is the agent's error)."""
    assert _outcome("BackoffLimitExceeded", MARKER, [_pod(agent=_ran(60))]) == \
        ("Failed", "timeout", "the agent ran past 60s and was killed")
    assert _outcome("BackoffLimitExceeded", MARKER, [_pod(agent=_ran(12))])[:2] == ("Failed", "agent_error")
    # an OOM kill at the deadline is still the OOM; a clean exit is a clean exit
    assert _outcome("BackoffLimitExceeded", MARKER, [_pod(agent=_ran(60, 137, "OOMKilled"))])[1] == "oom"
    assert _outcome("Complete", MARKER, [_pod(agent=_ran(60, 0, "Completed"))])[:2] == ("Succeeded", "completed")


def test_the_jobs_deadline_is_a_backstop_the_model_pays_only_for_its_own_time() -> None:
    """``DeadlineExceeded`` (the agent's timeout plus the platform's allowance) is the model's timeout only when the
    kubelet says the agent container ran its whole time; a pod the platform kept from running is the platform's."""
    running = {"metadata": {"creationTimestamp": "2026-12-01T10:00:00Z"}, "status": {"phase": "Running",
               "containerStatuses": [{"name": "agent", "state": {"running": {"startedAt": "2026-12-01T10:00:00Z"}}}]}}
    assert _outcome("DeadlineExceeded", None, [running])[:2] == ("Failed", "timeout")
    assert _outcome("DeadlineExceeded", None, [_pod(agent=_ran(60))])[:2] == ("Failed", "timeout")
    pending = {"metadata": {"creationTimestamp": "2026-12-01T10:00:00Z"}, "status": {"phase": "Pending"}}
    for pods in ([pending], []):
        phase, reason, message = _outcome("DeadlineExceeded", None, pods)
        assert (phase, reason) == ("InfrastructureFailed", "sandbox_error") and "platform" in message


def test_a_pod_whose_policies_never_took_hold_is_the_platforms_failure_and_retried() -> None:
    """``await-policy`` exited POLICY_OPEN_EXIT: the agent never started; the platform's failure, retried."""
    failed = {"metadata": {"creationTimestamp": "2026-12-01T10:00:00Z"},
              "status": {"phase": "Failed", "initContainerStatuses": [
                  {"name": "await-policy", "state": {"terminated": {"exitCode": pod.POLICY_OPEN_EXIT, "reason": "Error"}}}]}}
    outcome = classify(attempt_end("BackoffLimitExceeded", None, 60.0, pods=[failed]))
    assert outcome.phase == Phase.INFRASTRUCTURE_FAILED and "NetworkPolicies were not enforced" in outcome.message
    assert should_retry(outcome, 1, 3)


def test_await_policy_waits_while_the_api_answers_and_goes_on_once_it_is_blocked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A listener on loopback stands for the Kubernetes API: while it accepts, ``await-policy`` waits and, past its
    time, exits POLICY_OPEN_EXIT; once nothing accepts there (the policy blocks it), it exits 0."""
    import socket
    import threading
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(port))
    args = ["await-policy", "--seconds", "0.5", "--interval", "0.05", "--probe-timeout", "0.5"]
    accepting = threading.Event()
    accepting.set()

    def serve() -> None:
        while accepting.is_set():
            listener.settimeout(0.1)
            try:
                listener.accept()[0].close()
            except OSError:
                continue

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    started = time.monotonic()
    assert pod.main(args) == pod.POLICY_OPEN_EXIT
    assert time.monotonic() - started >= 0.5
    accepting.clear()
    server.join()
    listener.close()  # the port now refuses, as a policy's REJECT does
    assert pod.main(args) == 0
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert pod.main(args) == pod.POLICY_OPEN_EXIT  # nothing to check against: the agent does not start
