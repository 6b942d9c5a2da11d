"""A trial whose pod the node evicted (its HOME or /tmp emptyDir over its ``sizeLimit``): the Job only says
``BackoffLimitExceeded``; the pod's status says ``Evicted`` and the operator classifies the platform's failure
with the kubelet's message. The real thing on the real control plane: ``tests/kube/test_real_operator.py``."""

from __future__ import annotations

from typing import Any

from anchorage.controller.evidence import attempt_end, eviction
from anchorage.trials import Phase, Reason, classify

EVICTED = 'Usage of EmptyDir volume "tmp" exceeds the limit "1Gi". '


def _pod(status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "t-job-abcde", "creationTimestamp": "2026-12-01T10:00:00Z"}, "status": status}


def _killed(code: int) -> dict[str, Any]:
    return {"name": "agent", "state": {"terminated": {"exitCode": code, "reason": "Error"}}}


def test_an_evicted_pod_is_the_platforms_failure_naming_the_eviction() -> None:
    pods = [_pod({"phase": "Failed", "reason": "Evicted", "message": EVICTED, "containerStatuses": [_killed(137)]})]
    assert eviction(pods) == EVICTED.strip()
    outcome = classify(attempt_end("BackoffLimitExceeded", None, 60.0, pods=pods))
    assert outcome.phase is Phase.INFRASTRUCTURE_FAILED and outcome.reason is Reason.SANDBOX_ERROR
    assert "evicted" in outcome.message and 'EmptyDir volume "tmp" exceeds the limit "1Gi"' in outcome.message


def test_a_pod_that_merely_failed_is_not_an_eviction() -> None:
    pods = [_pod({"phase": "Failed", "containerStatuses": [_killed(1)]})]
    assert eviction(pods) is None and eviction([]) is None
    assert "evicted" not in classify(attempt_end("BackoffLimitExceeded", None, 60.0, pods=pods)).message


def test_the_uploaded_marker_outweighs_the_eviction() -> None:
    """The agent's end was collected (the sidecar's marker): the kubelet's exit code decides, not a later eviction."""
    pods = [_pod({"phase": "Failed", "reason": "Evicted", "message": EVICTED, "containerStatuses": [_killed(1)]})]
    outcome = classify(attempt_end("BackoffLimitExceeded", {"exit_code": 1}, 60.0, pods=pods))
    assert outcome.phase is not Phase.INFRASTRUCTURE_FAILED
