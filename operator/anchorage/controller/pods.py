"""The trial pods' lifecycle on the operator's side: what its pod watch does with each event of a trial pod.

Registered by :mod:`anchorage.controller.watching`, which watches the pods labelled ``anchorage.dev/role=trial`` in
the trials namespace and calls :class:`PodEvents` for each event (and, for the trial Jobs' events, :meth:`job_event`),
in kopf's event loop; the API calls run in the handlers' threads. Per trial pod:

* **store access after the agent** — once the kubelet reports the ``agent`` container terminated while the pod still
  runs (its upload sidecar does), the pod gets the label ``anchorage.dev/store-access=true``, which opens its egress
  to DNS and the store (``kube.jobs.network_policies``: P3). That is the platform's evidence that every process of the
  agent has ended (its pid namespace ended with its container); an agent writing its exit-code file early opens
  nothing. One write per trial whose agent runs (a replay's pod has the label from the start; a pod that has already
  ended needs none).
* **the agent's deadline from its container's start** — the agent container kills the agent when its timeout has
  passed since it started (``kube.jobs.timed``); should the agent outlive that, the operator ends the attempt as the
  model's ``timeout`` :data:`SLACK` seconds later (the kubelet's ``startedAt`` + timeout). Scheduling and image pulls
  never count.
* **platform failures** (:mod:`anchorage.controller.podevidence`) — a pod no node takes, an image that cannot be
  pulled, a container that cannot be created, the platform taking the pod away (a lost node: named), and a Job
  whose pod was never created (its ``FailedCreate`` Events: a missing RuntimeClass, a ResourceQuota refusal) end the
  attempt ``InfrastructureFailed`` with the reason and the object that says so, retried per ``retries``.

An attempt the operator ends goes to :func:`anchorage.controller.attempts.end_attempt` (the verdict recorded in the
trial's folder, the Job deleted, the trial finished by the verdict). The operator's clock for "for this long" runs
from the platform's timestamps where it has them (conditions' ``lastTransitionTime``, the Job's
``creationTimestamp``), else from the first event that showed the state (a restarted operator starts that clock
again: a later verdict, never an early one).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from anchorage.controller import attempts, kube, podevidence
from anchorage.controller.peering import PEERING
from anchorage.controller.podevidence import TIMEOUT, Verdict
from anchorage.runtime.kube import jobs

log = logging.getLogger("anchorage.pods")
Obj = dict[str, Any]
#: Seconds past the agent's timeout (from its container's start) before the operator stops a pod whose agent
#: outlived its container's own timer.
SLACK = 15.0
#: Seconds a trial Job may be without a pod before its Events are read (a pod normally comes within a second or two).
PODLESS_SECONDS = 15.0
#: How often due checks run.
TICK = 2.0
ENDED_PHASES = ("Succeeded", "Failed")


def owner_uid(pod: Mapping[str, Any]) -> str:
    """The uid of the pod's Job (its controller owner reference), "" without one."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "Job" and ref.get("controller"):
            return str(ref.get("uid") or "")
    return ""


def job_stub(pod: Mapping[str, Any]) -> Obj:
    """The pod's Job as :func:`anchorage.controller.attempts.end_attempt` needs it: name, namespace, uid, and the
    annotations naming its trial (the pod template carries them)."""
    meta = pod.get("metadata") or {}
    return {"metadata": {"name": (meta.get("labels") or {}).get(kube.JOB_NAME_LABEL, ""),
                         "namespace": meta.get("namespace", ""), "uid": owner_uid(pod),
                         "annotations": dict(meta.get("annotations") or {}), "labels": dict(meta.get("labels") or {})}}


@dataclass
class JobNote:
    """A trial Job the watch has seen, not ended: whether it has a pod yet."""

    job: Obj
    created: float
    suspended: bool
    checked: float = 0.0


class PodEvents:
    """Trial pods' events (and trial Jobs' events) → the actions of the module docstring."""

    def __init__(self, settings: Any = None, paused: Any = None) -> None:
        self._settings, self._paused = settings, paused
        self.pods: dict[str, Obj] = {}  # uid → latest body of an unended pod
        self.seen: dict[str, dict[str, float]] = {}  # uid → first sighting of each waiting container's reason
        self.due: dict[str, float] = {}  # uid → when to look again
        self.jobs: dict[str, JobNote] = {}  # Job uid → unended trial Job
        self.with_pods: set[str] = set()  # Job uids that have had a pod
        self.labelled: set[str] = set()  # pod uids labelled (or being labelled)
        self.decided: set[str] = set()  # Job uids whose attempt the operator ended (or is ending)
        self.tasks: set[asyncio.Task[Any]] = set()
        self._ticker: asyncio.Task[None] | None = None

    # ----- configuration and peering (late: settings and watching import this module's users) -----

    def config(self) -> jobs.OperatorConfig:
        if self._settings is not None:
            return self._settings  # type: ignore[no-any-return]
        from anchorage.controller.settings import config

        return config()

    def paused(self) -> bool:
        if self._paused is not None:
            return bool(self._paused())
        return PEERING.paused

    # ----- events -----

    def __call__(self, type_: str, pod: Obj) -> None:
        if self.paused():
            return
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        job_uid = owner_uid(pod)
        if job_uid:
            self.with_pods.add(job_uid)
        phase = (pod.get("status") or {}).get("phase")
        if type_ == "DELETED" or meta.get("deletionTimestamp") or phase in ENDED_PHASES:
            if type_ != "DELETED" and job_uid and job_uid not in self.decided:
                found = podevidence.disruption(pod, job_stub(pod)["metadata"]["name"])
                if found is not None:  # the pod is going: its evidence is kept before it is gone
                    self._decide(pod, found)
            self._forget(uid)
            return
        self.pods[uid] = pod
        self.evaluate(uid, time.time())

    def job_event(self, type_: str, job: Obj, ended: bool) -> None:
        """A trial Job's event (the first listing's too): kept while it has no pod, for :meth:`_podless`."""
        meta = job.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if type_ == "DELETED" or ended or not uid:
            self.jobs.pop(uid, None)
            self.with_pods.discard(uid)
            self.decided.discard(uid)
            return
        created = podevidence.parse_time(meta.get("creationTimestamp")) or time.time()
        note = self.jobs.get(uid)
        suspended = bool((job.get("spec") or {}).get("suspend"))
        if note is None:
            self.jobs[uid] = JobNote(job, created, suspended)
        else:
            note.job, note.suspended = job, suspended
        self._tick()

    def _forget(self, uid: str) -> None:
        self.pods.pop(uid, None)
        self.seen.pop(uid, None)
        self.due.pop(uid, None)
        self.labelled.discard(uid)

    def evaluate(self, uid: str, now: float) -> None:
        """Act on a held pod's latest body at ``now``: label it, end its attempt, or note when to look again."""
        pod = self.pods.get(uid)
        if pod is None:
            return
        cfg = self.config()
        meta = pod.get("metadata") or {}
        started, finished = podevidence.agent_times(pod)
        if finished is not None and (meta.get("labels") or {}).get(jobs.LABEL_STORE_ACCESS) != "true" \
                and uid not in self.labelled:
            self.labelled.add(uid)
            self._spawn(self._label(pod))
        job = job_stub(pod)["metadata"]["name"]
        seen = self.seen.setdefault(uid, {})
        for key in podevidence.waiting_reasons(pod):
            seen.setdefault(key, now)
        verdict, due = podevidence.platform_failure(pod, job, now, seen, unschedulable_after=cfg.unschedulable_after_sec,
                                                    start_after=cfg.start_after_sec)
        timeout = _float((meta.get("annotations") or {}).get(jobs.ANNOTATION_TIMEOUT))
        if verdict is None and started is not None and finished is None and timeout is not None:
            if podevidence.overran(pod, timeout, now, SLACK):
                verdict = Verdict(TIMEOUT, f"the agent ran past {timeout:g} s from its container's start and was "
                                  "stopped", f"pod {meta.get('namespace')}/{meta.get('name')}: container agent "
                                  f"running since {_stamp(started)}", job)
            else:
                due = min(due or float("inf"), started + timeout + SLACK)
        if verdict is not None:
            self._decide(pod, verdict)
            self.due.pop(uid, None)
        elif due is not None:
            self.due[uid] = due
            self._tick()
        else:
            self.due.pop(uid, None)

    # ----- actions (in the handlers' threads) -----

    def _decide(self, pod: Obj, verdict: Verdict) -> None:
        stub = job_stub(pod)
        uid = stub["metadata"]["uid"]
        if not uid or uid in self.decided:
            return
        self.decided.add(uid)
        self._spawn(self._end(stub, verdict))

    async def _end(self, job: Obj, verdict: Verdict) -> None:
        log.warning("ending attempt %s/%s: %s: %s (%s)", job["metadata"]["namespace"], verdict.job, verdict.reason,
                    verdict.message, verdict.evidence)
        try:
            await kube.in_thread(attempts.end_attempt, job, verdict)
        except Exception:
            self.decided.discard(job["metadata"]["uid"])  # the next event, or the next check, tries again
            raise

    async def _label(self, pod: Obj) -> None:
        meta = pod["metadata"]
        try:
            await kube.in_thread(_open_store, meta["namespace"], meta["name"])
        except Exception:
            self.labelled.discard(str(meta.get("uid")))  # the next event tries again
            raise

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(self._logged(work))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    @staticmethod
    async def _logged(work: Any) -> None:
        try:
            await work
        except Exception:
            log.exception("a trial pod's action failed (the next event or check tries again)")

    # ----- the clock: due checks and Jobs without a pod -----

    def _tick(self) -> None:
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self.due or any(uid not in self.with_pods for uid in self.jobs):
            await asyncio.sleep(TICK)
            if self.paused():
                continue
            now = time.time()
            for uid in [u for u, when in self.due.items() if when <= now]:
                self.due.pop(uid, None)
                self.evaluate(uid, now)
            for uid, note in list(self.jobs.items()):
                if uid in self.with_pods or uid in self.decided or note.suspended:
                    continue
                if now - note.created >= PODLESS_SECONDS and now - note.checked >= PODLESS_SECONDS:
                    note.checked = now
                    self._spawn(self._podless(note))

    async def _podless(self, note: JobNote) -> None:
        """A Job without a pod: its Events say whether the platform refused the pod (then its attempt ends)."""
        meta = note.job["metadata"]
        events = await kube.in_thread(_job_events, meta["namespace"], str(meta["uid"]))
        verdict, _ = podevidence.failed_create(events, meta["name"], note.created, time.time(),
                                               unschedulable_after=self.config().unschedulable_after_sec)
        if verdict is None or meta["uid"] in self.with_pods or meta["uid"] in self.decided:
            return
        if await kube.in_thread(kube.job_pods, meta["namespace"], meta["name"]):
            return  # its pod came after all (an earlier refusal, since cured)
        stub = {"metadata": {k: meta.get(k) for k in ("name", "namespace", "uid", "annotations", "labels")}}
        self.decided.add(str(meta["uid"]))
        self._spawn(self._end(stub, verdict))

    def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()


def _open_store(namespace: str, name: str) -> bool:
    """Label a trial pod whose agent has ended: its store egress opens (policy P3)."""
    return kube.label_pod(namespace, name, {jobs.LABEL_STORE_ACCESS: "true"})


def _job_events(namespace: str, uid: str) -> list[dict[str, Any]]:
    return kube.events_of(namespace, "Job", uid)


def _float(text: Any) -> float | None:
    try:
        return float(text) if text is not None else None
    except (TypeError, ValueError):
        return None


def _stamp(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


PODS = PodEvents()
