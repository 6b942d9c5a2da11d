"""Trials admitted by the cluster's batch queue (Kueue): Queued until admitted, preempted attempts retried.

Registered by importing ``anchorage.controller``. A trial whose spec (``queueName``, from its campaign) or the
operator (``--kueue-queue``) names a LocalQueue is launched by ``launching.start_attempt`` as ``Queued`` — after
:func:`anchorage.controller.kueue.require` found Kueue and the LocalQueue — with its Job created suspended and
labelled for Kueue (``kube.jobs.trial_job``). Kueue makes a Workload of the Job and admits it within its ClusterQueue's
quota (fair sharing, priorities and preemption are the ClusterQueue's) by resuming the Job. This module follows the
Workloads of the Jobs' namespaces (the operator's trials namespace, else the namespaces it serves) with
``watching.Watch``, started once Kueue's API is served (checked at startup and every :data:`DISCOVERY_SEC` until then;
stopped again if Kueue goes away):

* **admitted** — the trial becomes ``Running``; its ``startTime`` is the admission, so the agent's time (the Job's
  ``activeDeadlineSeconds``, which Kubernetes counts from the Job's start, and a suspended Job has not started) never
  includes the wait. ``anchorage_queue_wait_seconds`` observes the wait.
* **evicted** while the trial runs (Kueue preempted it for a higher priority, or its queue was stopped): Kueue has
  suspended the Job and its pod is stopped. The attempt ends ``InfrastructureFailed`` / ``preempted`` — the platform's,
  never the model's — through the same path as any attempt's end (``attempts.conclude``): the Job is deleted, and the
  trial is retried as a new Job (queued again) while ``retries`` allow. ``anchorage_preemptions_total`` counts it.
* **pending** — every :data:`POSITION_SEC` the LocalQueues that hold Queued trials are asked for their pending
  workloads (Kueue's visibility API); a trial's ``queuePosition`` and ``queueMessage`` (why Kueue waits: the
  Workload's ``QuotaReserved`` condition) are written when they change. ``anchorage_queue_workloads`` counts the
  operator's workloads by queue and state.

A Queued trial whose Workload event was missed (a restart) is repaired by :func:`check_queued` (``trials.repair``:
the campaign's sweep, the lone trials' watchdog): its Job resumed means admitted; its Job gone means it is created
again (same name). Verifier, panel and CBU Jobs go to the operator's ``--kueue-scoring-queue`` when one is set;
their Workloads are not followed here (Kueue resumes them; their ends are the Jobs' as ever).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
from collections.abc import Mapping
from typing import Any

import aiohttp
import kopf

from anchorage import metrics
from anchorage.controller import kube, kueue, watching
from anchorage.controller.attempts import conclude
from anchorage.controller.caches import TRIALS, Once
from anchorage.controller.launching import start_attempt
from anchorage.controller.peering import PEERING, Peering
from anchorage.controller.podevidence import parse_time
from anchorage.controller.settings import config
from anchorage.controller.trialstate import condition, trial_spec, typed
from anchorage.runtime.kube import jobs
from anchorage.runtime.kube.conditions import carry, lifecycle
from anchorage.runtime.kube.status import TrialStatus, now_rfc3339
from anchorage.trials import AttemptEnd, Phase

log = logging.getLogger("anchorage.queueing")
POSITION_SEC = float(os.environ.get("ANCHORAGE_QUEUE_POSITION_INTERVAL", "10"))
DISCOVERY_SEC = 10.0
#: What this module lists and watches (the chart's RBAC grants list and watch: ``tests/charts/test_chart_rbac.py``).
WATCHED = {"workloads": (kube.KUEUE_GROUP, kube.KUEUE_API, "workloads")}
Obj = dict[str, Any]


def _trial_of(job: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the Trial whose attempt Job ``job`` is; None for any other Job."""
    meta = job.get("metadata") or {}
    if (meta.get("labels") or {}).get(jobs.LABEL_ROLE) != "trial":
        return None
    name = jobs.named(meta, jobs.LABEL_TRIAL)
    ns = (meta.get("annotations") or {}).get("anchorage.dev/trial-namespace", meta.get("namespace"))
    return (str(ns), name) if name else None


def _current(job_ns: str, job_name: str, phases: tuple[str, ...]) -> dict[str, Any] | None:
    """The Trial whose current attempt is Job ``job_name``, when it is in one of ``phases``."""
    job = kube.get_job(job_ns, job_name)
    key = _trial_of(job) if job is not None else None
    if key is None:
        return None

    def current(trial: Mapping[str, Any]) -> bool:
        status = trial.get("status") or {}
        return status.get("phase") in phases and status.get("jobName") == job_name

    trial = TRIALS.current(*key, current)
    return trial if trial is not None and current(trial) else None


def _seconds_between(start: str | None, end: str | None) -> float:
    first, last = parse_time(start), parse_time(end)
    return max(0.0, last - first) if first is not None and last is not None else 0.0


def admitted(job_ns: str, job_name: str, workload: Mapping[str, Any]) -> bool:
    """Kueue admitted Job ``job_name``: its Queued trial becomes Running from the admission on. False when the trial
    changed meanwhile (the caller tries again on the next event)."""
    trial = _current(job_ns, job_name, ("Queued",))
    if trial is None:
        return True
    meta, status = trial["metadata"], trial.get("status") or {}
    cond = kueue.condition(workload, "Admitted") or {}
    start = str(cond.get("lastTransitionTime") or now_rfc3339())
    queue = str(status.get("queue") or (workload.get("spec") or {}).get("queueName") or "")
    waited = _seconds_between(status.get("queuedTime"), start)
    why = f"admitted by Kueue LocalQueue {queue} after {waited:.0f} s in the queue; the agent is running"
    running = TrialStatus(
        phase=Phase.RUNNING, start_time=start, queue_position=None, queue_message=None,
        conditions=typed(carry(status.get("conditions"), [
            condition("Ready", "False", "Running", why, meta.get("generation")),
            *lifecycle("working", "Running", why, meta.get("generation"))])))
    if not kube.patch_status("trials", meta["namespace"], meta["name"], running.patch(),
                             resource_version=meta.get("resourceVersion")):
        return False
    metrics.operator_trial_admitted(trial, queue, waited)
    return True


def evicted(job_ns: str, job_name: str, workload: Mapping[str, Any]) -> None:
    """Kueue took Job ``job_name``'s admission back while its trial ran: the attempt ends InfrastructureFailed /
    preempted (its Job deleted, the trial retried per its retries). A trial still Queued lost nothing: Kueue queues
    the same Job again."""
    trial = _current(job_ns, job_name, ("Running",))
    if trial is None:
        return
    cond = kueue.condition(workload, "Evicted") or {}
    queue = str((trial.get("status") or {}).get("queue") or (workload.get("spec") or {}).get("queueName") or "")
    why = f"Kueue evicted the attempt's workload from LocalQueue {queue} ({cond.get('reason') or 'Evicted'}"
    why += f": {cond['message']})" if cond.get("message") else ")"
    kube.delete_job(job_ns, job_name)  # its pod is stopped already; a retry is a new Job, queued again
    metrics.operator_trial_preempted(trial, queue)
    conclude(dict(trial), AttemptEnd(preempted=why))


def check_queued(trial: Mapping[str, Any]) -> None:
    """Repair a Queued trial: its Job resumed (admitted, the event missed) → Running; its Job gone → created again."""
    status = trial.get("status") or {}
    job_ns = config().trials_namespace or trial["metadata"]["namespace"]
    job = kube.get_job(job_ns, str(status.get("jobName") or ""))
    if job is None:
        start_attempt(trial, trial_spec(trial), int(status.get("attempt") or 0))
        return
    if (job.get("spec") or {}).get("suspend") is False:
        admitted(job_ns, job["metadata"]["name"], {"spec": {"queueName": status.get("queue")},
                                                  "status": {"conditions": []}})


class WorkloadEvents:
    """The Workloads' events → :func:`admitted` / :func:`evicted` (once per Workload and transition, in a worker
    thread), and the per-queue counts of :data:`anchorage.metrics.QUEUE_WORKLOADS`."""

    def __init__(self, peering: Peering = PEERING) -> None:
        self.peering = peering
        self.once = Once()
        self.states: dict[tuple[str, str], tuple[str, str]] = {}  # (ns, workload) → (queue, state) of our Jobs'
        self.messages: dict[tuple[str, str], str] = {}  # (ns, job) → why a pending workload waits
        self.tasks: set[asyncio.Task[None]] = set()

    def __call__(self, type_: str, workload: Obj) -> None:
        meta = workload.get("metadata") or {}
        job = kueue.workload_job(workload)
        if job is None:
            return
        key, ns = (str(meta.get("namespace")), str(meta.get("name"))), str(meta.get("namespace"))
        state = kueue.state(workload)
        if type_ == "DELETED" or state == "finished":
            self.states.pop(key, None)
            self.messages.pop((ns, job), None)
        else:
            self.states[key] = (str((workload.get("spec") or {}).get("queueName") or ""), state)
            message = kueue.waiting_message(workload) if state == "pending" else None
            if message:
                self.messages[(ns, job)] = message
            else:
                self.messages.pop((ns, job), None)
        self._count()
        if type_ == "DELETED" or self.peering.paused:
            return
        uid = str(meta.get("uid"))
        if state == "admitted" and self.once.first(f"{uid}/admitted"):
            self._spawn(self._admitted, ns, job, workload, f"{uid}/admitted")
        elif state == "evicted":
            since = str((kueue.condition(workload, "Evicted") or {}).get("lastTransitionTime"))
            if self.once.first(f"{uid}/evicted/{since}"):
                self._spawn(self._evicted, ns, job, workload, f"{uid}/evicted/{since}")

    def _count(self) -> None:
        counts: collections.Counter[tuple[str, str]] = collections.Counter(self.states.values())
        metrics.queue_workloads({k: v for k, v in counts.items() if k[1] in ("pending", "admitted")})

    def _spawn(self, handler: Any, ns: str, job: str, workload: Obj, key: str) -> None:
        task = asyncio.get_running_loop().create_task(handler(ns, job, workload, key))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _admitted(self, ns: str, job: str, workload: Obj, key: str) -> None:
        try:
            if not await kube.in_thread(admitted, ns, job, workload):
                self.once.forget(key)  # the trial changed under us: the next event (or the sweep) tries again
        except (kopf.TemporaryError, kopf.PermanentError, kube.ApiError, OSError) as exc:
            self.once.forget(key)
            log.warning("the admission of job %s/%s: %s", ns, job, exc)

    async def _evicted(self, ns: str, job: str, workload: Obj, key: str) -> None:
        try:
            await kube.in_thread(evicted, ns, job, workload)
        except (kopf.TemporaryError, kopf.PermanentError, kube.ApiError, OSError) as exc:
            self.once.forget(key)
            log.warning("the eviction of job %s/%s: %s", ns, job, exc)


def positions(job_ns: str, queue: str, pending: list[Obj]) -> dict[str, int]:
    """Job name → its workload's position in its LocalQueue, from Kueue's visibility API's ``pending`` list."""
    found: dict[str, int] = {}
    for item in pending:
        job = kueue.workload_job(item)
        if job is not None and (item.get("metadata") or {}).get("namespace", job_ns) == job_ns:
            found[job] = int(item.get("positionInLocalQueue") or 0)
    return found


def refresh_positions(events: WorkloadEvents) -> int:
    """Write the position and waiting reason of every held Queued trial whose values changed; how many were written."""
    queued = [t for t in TRIALS.values() if (t.get("status") or {}).get("phase") == "Queued"]
    by_queue: dict[tuple[str, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for trial in queued:
        job_ns = config().trials_namespace or trial["metadata"]["namespace"]
        by_queue[(job_ns, str(trial["status"].get("queue") or ""))].append(trial)
    written = 0
    for (job_ns, queue), members in by_queue.items():
        pending = kube.pending_workloads(job_ns, queue) if queue else None
        places = positions(job_ns, queue, pending) if pending is not None else {}
        for trial in members:
            status, meta = trial["status"], trial["metadata"]
            job = str(status.get("jobName") or "")
            fields: dict[str, Any] = {}
            if job in places and status.get("queuePosition") != places[job]:
                fields["queue_position"] = places[job]
            message = events.messages.get((job_ns, job))
            if message and status.get("queueMessage") != message:
                fields["queue_message"] = message
            if fields and kube.patch_status("trials", meta["namespace"], meta["name"],
                                            TrialStatus(**fields).patch(), resource_version=meta.get("resourceVersion")):
                written += 1
    return written


class Follower:
    """The Workloads' watch and the positions' loop, started once Kueue's API is served."""

    def __init__(self) -> None:
        self.events = WorkloadEvents()
        self.session: aiohttp.ClientSession | None = None
        self.tasks: list[asyncio.Task[None]] = []

    def paths(self) -> list[str]:
        group, version, plural = WATCHED["workloads"]
        trials_ns = config().trials_namespace
        namespaces = [trials_ns] if trials_ns else watching.namespaces()
        if not namespaces:
            return [f"/apis/{group}/{version}/{plural}"]
        return [f"/apis/{group}/{version}/namespaces/{ns}/{plural}" for ns in namespaces]

    async def start(self) -> None:
        self.tasks = [asyncio.get_running_loop().create_task(self._follow(), name="kueue follower")]

    @staticmethod
    async def _served() -> bool:
        try:
            return await kube.in_thread(kueue.installed)
        except (kopf.TemporaryError, kube.ApiError, OSError) as exc:
            log.debug("Kueue's discovery: %s", exc)
            return False

    async def _follow(self) -> None:
        """While Kueue is served: its Workloads' watches and the positions' loop; when it goes, wait for it again."""
        client = kube.client()
        connector = aiohttp.TCPConnector(ssl=client.tls_context(), limit=0)
        self.session = aiohttp.ClientSession(connector=connector, read_bufsize=2 ** 22, trust_env=False)
        loop = asyncio.get_running_loop()
        timeout = int(os.environ.get("ANCHORAGE_WATCH_TIMEOUT", "300"))
        while True:
            while not await self._served():
                await asyncio.sleep(DISCOVERY_SEC)
            watches = [loop.create_task(watching.Watch(client, self.session, path, "", self.events,
                                                       timeout=timeout).run(), name=f"watch {path}")
                       for path in self.paths()]
            log.info("Kueue is installed: following the Workloads of %s", ", ".join(self.paths()))
            while await self._served():
                await asyncio.sleep(POSITION_SEC)
                if self.events.peering.paused:
                    continue
                try:
                    await kube.in_thread(refresh_positions, self.events)
                except (kopf.TemporaryError, kopf.PermanentError, kube.ApiError, OSError) as exc:
                    log.warning("updating the queued trials' positions: %s", exc)
            log.info("Kueue is no longer served: its Workloads are not followed until it is again")
            for task in watches:
                task.cancel()
            for task in watches:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self.events.states.clear()
            self.events._count()

    async def stop(self) -> None:
        await watching.stop_all(self.tasks, self.session)


FOLLOWER = Follower()


@kopf.on.startup()
async def start_following(**_: Any) -> None:
    """Follow Kueue's Workloads with the operator (once Kueue is installed)."""
    await FOLLOWER.start()


@kopf.on.cleanup()
async def stop_following(**_: Any) -> None:
    """Stop following with the operator."""
    await FOLLOWER.stop()
