"""When a Job has ended, and how: read from its ``Complete``/``Failed`` conditions (:func:`job_result`), the filter
the operator's Job watch applies (:data:`ENDED_JOBS`), and the first time this process sees an end (:func:`first_end`)
— shared by the trial, protocol and verifier Jobs' handlers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anchorage.controller.caches import Once


def job_result(job: Mapping[str, Any]) -> str | None:
    """``Complete``, the ``Failed`` condition's reason (``DeadlineExceeded``, ``BackoffLimitExceeded``, …), or None
    while the Job runs."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return "Complete" if cond["type"] == "Complete" else str(cond.get("reason") or "Failed")
    return None


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
