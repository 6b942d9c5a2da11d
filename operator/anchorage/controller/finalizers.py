"""Stopping what a deleted Trial or ScoringRun runs: the operator's finalizer across namespaces.

Jobs run in the trials namespace and the objects that start them live in the users' namespaces; Kubernetes ignores
an ownerReference to another namespace, so without this a deleted Trial's Job ran on (a deleted campaign's Jobs up to
their 4 h deadline). Every Trial and ScoringRun the operator runs carries :data:`FINALIZER`
(``anchorage.dev/stop-jobs``): in the create body of those it creates itself (a campaign's Trials, a trial's
ScoringRun — no write more), added by one patch before the first Job of those users create (:func:`hold_trial`,
:func:`hold_run`; a lone object's launch costs one write more). When such an object is being deleted
(``deletionTimestamp`` set, :func:`finalizing`) its handler calls :func:`finalize`, which retries until it is done:

1. its Jobs are deleted (:func:`stop`: ``propagationPolicy: Background`` — the Job goes at once, the garbage
   collector takes its pods and its gateway-token Secret) and the pods of the Jobs that had not ended are deleted
   with a :data:`GRACE_SECONDS` grace period: an agent's shell ignores SIGTERM, so the default 30 s would keep a
   cancelled agent running half a minute; its artifacts are not kept anyway;
2. a Trial not yet ended is recorded ``Cancelled`` by its own handler (``trials.cancel``: its gateway token
   revoked, ``trial.json``, its status, the metric);
3. the finalizer is removed (:func:`release`: a JSON patch that tests it is where it was read).

A deleted campaign is finalized by kopf (its timer's finalizer); the garbage collector then deletes its Trials (same
namespace, ownerReferences), whose finalizers stop their Jobs. The chart grants ``delete`` on Jobs and pods in the
trials namespace and ``patch`` on Trials and ScoringRuns, nothing more. Without the operator a finalized object
cannot go: ``kubectl patch <kind> <name> --type=json -p '[{"op":"remove","path":"/metadata/finalizers/0"}]'`` lets
it go (its Jobs end by their deadline and TTL).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import kopf

from anchorage.campaigns.names import label_value
from anchorage.controller import kube
from anchorage.controller.settings import config
from anchorage.runtime.kube import jobs

FINALIZER = jobs.JOBS_FINALIZER
#: Seconds a stopped pod's containers get between SIGTERM and SIGKILL.
GRACE_SECONDS = 1
#: Seconds between attempts of :func:`finalize` (the last one repeats).
BACKOFFS = (1.0, 2.0, 5.0, 10.0, 30.0)
log = logging.getLogger(__name__)
Obj = dict[str, Any]


def leaving(body: Mapping[str, Any]) -> bool:
    """Whether the object is being deleted."""
    return bool(body["metadata"].get("deletionTimestamp"))


def finalizing(body: Mapping[str, Any]) -> bool:
    """Whether the object is being deleted and still holds :data:`FINALIZER` (its Jobs may still run)."""
    return leaving(body) and FINALIZER in (body["metadata"].get("finalizers") or ())


def _with_finalizer(body: Mapping[str, Any]) -> Obj:
    meta = body["metadata"]
    return {"metadata": {"finalizers": [*(meta.get("finalizers") or ()), FINALIZER],
                         "resourceVersion": meta.get("resourceVersion")}}


def _hold(plural: str, what: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
    """``body`` with :data:`FINALIZER` (added by a patch conditional on the version read when it lacks it)."""
    if FINALIZER in (body["metadata"].get("finalizers") or ()):
        return body
    meta = body["metadata"]
    # each plural written out: the chart's RBAC is derived from these calls (tests/charts/test_chart_rbac.py)
    patched = kube.patch_custom("trials", meta["namespace"], meta["name"], _with_finalizer(body)) \
        if plural == "trials" else kube.patch_custom("scoringruns", meta["namespace"], meta["name"], _with_finalizer(body))
    if patched is None:
        raise kopf.TemporaryError(f"{what} {meta['name']} changed (or is gone) since it was read", delay=1)
    return patched


def hold_trial(trial: Mapping[str, Any]) -> Mapping[str, Any]:
    """The Trial with :data:`FINALIZER` (before its first Job: not launched while that cannot be written)."""
    return _hold("trials", "trial", trial)


def hold_run(run: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ScoringRun with :data:`FINALIZER` (as :func:`hold_trial`)."""
    return _hold("scoringruns", "scoring run", run)


def _unhooked(body: Mapping[str, Any]) -> list[Obj] | None:
    """The JSON patch removing :data:`FINALIZER` from ``body`` as read (None: it holds none)."""
    finalizers = list(body["metadata"].get("finalizers") or ())
    if FINALIZER not in finalizers:
        return None
    at = f"/metadata/finalizers/{finalizers.index(FINALIZER)}"
    return [{"op": "test", "path": at, "value": FINALIZER}, {"op": "remove", "path": at}]


def release(plural: str, body: Mapping[str, Any]) -> None:
    """Remove :data:`FINALIZER` from a Trial (``plural`` ``trials``) or a ScoringRun (``scoringruns``); the object is
    read again once when its finalizers changed since ``body`` was read."""
    meta = body["metadata"]
    for _ in range(2):
        ops = _unhooked(body)
        if ops is None:
            return
        done = kube.patch_custom("trials", meta["namespace"], meta["name"], ops, json_patch=True) \
            if plural == "trials" else \
            kube.patch_custom("scoringruns", meta["namespace"], meta["name"], ops, json_patch=True)
        if done is not None:
            return
        fresh = kube.get_custom("trials", meta["namespace"], meta["name"]) if plural == "trials" else \
            kube.get_custom("scoringruns", meta["namespace"], meta["name"])
        if fresh is None:
            return  # gone: someone else removed the last finalizer
        body = fresh
    raise kopf.TemporaryError(f"{plural}/{meta['name']}: its finalizers keep changing; trying again", delay=1)


def jobs_namespace(body: Mapping[str, Any]) -> str:
    """Where the object's Jobs run (the trials namespace, else its own)."""
    return config().trials_namespace or str(body["metadata"]["namespace"])


def _ended(job: Mapping[str, Any]) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def stop(namespace: str, found: list[Obj]) -> int:
    """Delete the Jobs ``found`` (Background) and the pods of those that had not ended (:data:`GRACE_SECONDS`); how many Jobs
    were still running."""
    running = 0
    for job in found:
        meta = job["metadata"]
        if not kube.delete_job(namespace, meta["name"], meta.get("uid")):
            continue
        if _ended(job):
            continue
        running += 1
        for pod in kube.job_pods(namespace, meta["name"]):
            kube.delete_pod(namespace, pod["metadata"]["name"], GRACE_SECONDS)
    return running


def trial_jobs(trial: Mapping[str, Any]) -> list[Obj]:
    """Every Job of a Trial still in the cluster (its attempts and verification steps; not its ScoringRun's verifier,
    which the run's own finalizer stops): by the trial's label, of this trial's namespace."""
    meta = trial["metadata"]
    namespace = jobs_namespace(trial)
    found = kube.list_jobs(namespace, f"{jobs.LABEL_TRIAL}={label_value(meta['name'])}")
    return [j for j in found if (j["metadata"].get("annotations") or {}).get(
        "anchorage.dev/trial-namespace", j["metadata"].get("namespace")) == meta["namespace"]]


def run_deleted(run: Mapping[str, Any]) -> None:
    """A ScoringRun is being deleted: stop its verifier Job, then let it go."""
    meta = run["metadata"]
    namespace = jobs_namespace(run)
    job = kube.get_job(namespace, jobs.verifier_job_name(meta["name"]))
    if job is not None and (job["metadata"].get("annotations") or {}).get(
            "anchorage.dev/scoring-run-namespace", namespace) == meta["namespace"]:
        stop(namespace, [job])
    release("scoringruns", run)


async def finalize(fn: Callable[[Obj], None], body: Mapping[str, Any]) -> None:
    """Run ``fn(body)`` (in the API worker threads) until it succeeds: a deletion has no later event to retry from.
    A permanent error is logged and tried again too (the object cannot go without it); cancelled with the operator
    (its next start lists the object and finalizes it)."""
    name = f"{body.get('kind', 'object')} {body['metadata'].get('namespace')}/{body['metadata']['name']}"
    for attempt in range(10 ** 6):
        try:
            await kube.in_thread(fn, dict(body))
            return
        except (kopf.TemporaryError, kopf.PermanentError, kube.ApiError, OSError) as exc:
            delay = BACKOFFS[min(attempt, len(BACKOFFS) - 1)]
            log.warning("finalizing %s failed (%s); again in %.0f s", name, exc, delay)
            await asyncio.sleep(delay)
