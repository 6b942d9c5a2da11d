"""When a Job has ended, and how: read from its ``Complete``/``Failed`` conditions (:func:`job_result`), the filter
the operator's Job watch applies (:data:`ENDED_JOBS`), and the first time this process sees an end (:func:`first_end`)
— shared by the trial, protocol and verifier Jobs' handlers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anchorage.controller.caches import Once
from anchorage.controller.podevidence import parse_time


def job_result(job: Mapping[str, Any]) -> str | None:
    """``Complete``, the ``Failed`` condition's reason (``DeadlineExceeded``, ``BackoffLimitExceeded``, …), or None
    while the Job runs.

    A Job judged failed once its ``activeDeadlineSeconds`` had passed is ``DeadlineExceeded`` whatever reason the
    condition gives: the Job controller deletes the running pod at the deadline, and when its sync cannot record the
    end at once (its expectations of the Job's pods not yet met, kube-controller-manager v1.34 ``syncJob``) the next
    sync counts the deleted pod as a failed one and says ``BackoffLimitExceeded`` — seen on the real nodes under load.
    The judgement's time is the ``FailureTarget`` condition's (the decision, before the pods end), else the
    ``Failed`` one's; both it and ``status.startTime`` are whole seconds, so the deadline is read to within 1 s."""
    conditions = [c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    for cond in conditions:
        if cond.get("type") == "Complete":
            return "Complete"
        if cond.get("type") == "Failed":
            reason = str(cond.get("reason") or "Failed")
            target = next((c for c in conditions if c.get("type") == "FailureTarget"), cond)
            return "DeadlineExceeded" if _past_deadline(job, target.get("lastTransitionTime")) else reason
    return None


def _past_deadline(job: Mapping[str, Any], when: Any) -> bool:
    """Whether ``when`` (an RFC 3339 time) is at or after the Job's ``status.startTime`` plus its
    ``spec.activeDeadlineSeconds``; False when the Job has no deadline or either time is missing."""
    deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
    started = parse_time((job.get("status") or {}).get("startTime"))
    judged = parse_time(when)
    return isinstance(deadline, int) and started is not None and judged is not None and judged >= started + deadline


def has_ended(value: Any, **_: Any) -> bool:
    """Whether a Job's ``status.conditions`` (``value``) hold its end: ``Complete`` or ``Failed`` true."""
    return isinstance(value, list) and any(
        isinstance(cond, dict) and cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True"
        for cond in value)


#: Only events of ended Jobs matter: ``status.conditions`` holding ``Complete`` or ``Failed`` (what
#: :func:`job_result` reads). The operator's own Job watch (:mod:`anchorage.controller.watching`) checks it before
#: calling the Job handlers; ``bench/kopf_floor.py`` gives kopf the same filter (its no-op Job handlers).
ENDED_JOBS: dict[str, Any] = {"field": "status.conditions", "value": has_ended}


def first_end(type_: str | None, body: Mapping[str, Any], once: Once) -> str | None:
    """How a Job ended (:func:`job_result`) the first time this process sees its end (``once``); else None."""
    result = job_result(body) if type_ != "DELETED" else None
    return result if result is not None and once.first(str(body["metadata"].get("uid"))) else None
