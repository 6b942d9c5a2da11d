"""What the operator knows of Kueue's API: whether Kueue is installed, a LocalQueue's existence, a Workload's state.

Used by ``trials`` (a queued trial is refused before anything is written when Kueue or its LocalQueue is missing:
:func:`require`), ``campaigns`` (the same refusal once per campaign generation) and ``queueing`` (the Workloads'
watch: :func:`workload_job`, :func:`state`). The check reads the API server's discovery of ``kueue.x-k8s.io/v1beta2``
(no RBAC needed), asked again after :data:`PRESENT_SEC` while Kueue is there and :data:`RECHECK_SEC` while it is not —
except before a refusal, which is final (the trial or campaign fails): a remembered "not installed" is asked again
then, so Kueue installed a moment ago is never refused on an old answer. A LocalQueue's existence is read once per
(namespace, queue) and process while it exists.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from anchorage.controller import kube
from anchorage.errors import InputError

#: The Kueue resources the operator uses (their CRDs' names are what a refusal names).
REQUIRED = ("workloads", "localqueues")
RECHECK_SEC = 15.0
PRESENT_SEC = 60.0
_lock = threading.Lock()
_present: bool = False
_checked_at: float = float("-inf")
_queues: set[tuple[str, str]] = set()


def crd_name(plural: str) -> str:
    return f"{plural}.{kube.KUEUE_GROUP}"


def missing_crds(*, trust_absence: bool = True) -> list[str]:
    """The CRDs of :data:`REQUIRED` the cluster does not serve (``[]``: Kueue is installed); ``trust_absence=False``:
    a remembered absence is asked of the API server again (a remembered presence still answers)."""
    global _present, _checked_at
    with _lock:
        if (_present or trust_absence) and time.monotonic() - _checked_at < (PRESENT_SEC if _present else RECHECK_SEC):
            return [] if _present else [crd_name(p) for p in REQUIRED]
    served = kube.api_resources(kube.KUEUE_GROUP, kube.KUEUE_API) or set()
    missing = [crd_name(p) for p in REQUIRED if p not in served]
    with _lock:
        _present, _checked_at = not missing, time.monotonic()
    return missing


def installed() -> bool:
    """Whether Kueue's API is served (:func:`missing_crds` is empty)."""
    return not missing_crds()


def require(queue: str, namespace: str, *, field: str = "spec.queueName") -> None:
    """Refuse a queued trial when Kueue is not installed or its LocalQueue ``queue`` does not exist in ``namespace``
    (the namespace of its Jobs): :class:`InputError` naming what is missing and how to fix it. A LocalQueue that cannot
    be read (no RBAC for it) is not refused here: Kueue then says why the workload waits."""
    missing = missing_crds(trust_absence=False)  # a refusal is final: never on a remembered answer
    if missing:
        raise InputError(f"{field} {queue!r} needs Kueue, but this cluster does not serve its CRDs "
                         f"{', '.join(missing)} (Kueue is not installed)",
                         hint=f"install Kueue (its release manifests or Helm chart) and a LocalQueue {queue!r} in "
                         f"namespace {namespace!r}, or remove {field}")
    if (namespace, queue) in _queues:
        return
    try:
        found = kube.get_local_queue(namespace, queue)
    except kube.ApiError:
        return
    if found is None:
        raise InputError(f"{field} {queue!r}: Kueue has no LocalQueue {queue!r} in namespace {namespace!r} (where the "
                         "trials' Jobs run)", hint=f"create the LocalQueue (kubectl get localqueues -n {namespace}) "
                         f"or name an existing one in {field}")
    with _lock:
        _queues.add((namespace, queue))


def forget() -> None:
    """Forget what was learnt (tests; a cluster whose Kueue was removed)."""
    global _present, _checked_at
    with _lock:
        _present, _checked_at = False, float("-inf")
        _queues.clear()


def workload_job(workload: Mapping[str, Any]) -> str | None:
    """The name of the Job a Workload stands for (its owner of kind Job), else None."""
    for owner in (workload.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("kind") == "Job" and str(owner.get("apiVersion", "")).startswith("batch/"):
            return str(owner["name"])
    return None


def condition(workload: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """A Workload's condition of type ``kind`` when its status is True, else None."""
    for cond in (workload.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def state(workload: Mapping[str, Any]) -> str:
    """``finished``, ``evicted`` (admission taken back: Kueue suspends the Job and stops its pods), ``admitted`` or
    ``pending`` (waiting for quota)."""
    if condition(workload, "Finished") is not None:
        return "finished"
    if condition(workload, "Evicted") is not None:
        return "evicted"
    if condition(workload, "Admitted") is not None:
        return "admitted"
    return "pending"


def waiting_message(workload: Mapping[str, Any]) -> str | None:
    """Why a pending Workload waits: the message of its ``QuotaReserved`` (False) condition."""
    for cond in (workload.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "QuotaReserved" and cond.get("status") == "False" and cond.get("message"):
            return str(cond["message"])[:1000]
    return None
