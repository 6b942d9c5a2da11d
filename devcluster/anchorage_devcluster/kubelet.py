"""The fake Job controller and kubelet of the cluster fake.

Started by ``anchorage_devcluster.serving``. For every Job written to the ``ObjectStore`` it creates one
Pod (owned by the Job), runs it with ``pods.PodRun`` (the same runner as the sandbox node agent of the
real control plane: init containers, native sidecars, bubblewrap, limits) and reports Pod and Job status
as the kubelet and the Job controller would: ``activeDeadlineSeconds`` (condition
``Failed``/``DeadlineExceeded``), ``ttlSecondsAfterFinished`` and ``suspend``.

``simulate`` (load tests, ``bench/kube_operator.py``): a callable given by the caller that receives each pod
and returns its containers' exit codes without running anything (the tests' ``simulated_pods``).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from anchorage_devcluster.pods import PodRun, Simulate
from anchorage_devcluster.storage import ApiError, Event, Obj, ObjectStore, Resource, now


class _StoreReferences:
    """Secrets and ConfigMaps read from the fake's storage."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    async def read(self, plural: str, namespace: str, name: str) -> Obj | None:
        try:
            return self.store.get(self.store.resource("", plural), namespace, name)
        except ApiError:
            return None

    async def token(self, pod: Obj, audience: str | None, seconds: int) -> str:
        """The fake mints no real tokens: a placeholder, named as such."""
        return "anchorage-fake-cluster-token-not-valid-anywhere"


class FakeKubelet:
    """Runs Jobs' pods (see the module docstring)."""

    def __init__(self, store: ObjectStore, *, writable: tuple[Path, ...] = (), grace: float = 5.0,
                 simulate: Simulate | None = None) -> None:
        self.store = store
        self.simulate = simulate
        self.writable = writable
        self.grace = grace
        self.runs: dict[tuple[str, str], PodRun] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._root = Path(tempfile.mkdtemp(prefix="anchorage-kubelet-"))
        self._refs = _StoreReferences(store)

    @property
    def jobs(self) -> Resource:
        return self.store.resource("batch", "jobs")

    @property
    def pods(self) -> Resource:
        return self.store.resource("", "pods")

    def start(self) -> None:
        """Begin reacting to Job and Pod changes."""
        self.store.on_change.append(self._on_change)

    async def stop(self) -> None:
        """Kill every running pod and stop reacting."""
        with contextlib.suppress(ValueError):
            self.store.on_change.remove(self._on_change)
        for run in list(self.runs.values()):
            run.kill()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for run in list(self.runs.values()):
            run.cleanup()
        shutil.rmtree(self._root, ignore_errors=True)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_change(self, res: Resource, event: Event) -> None:
        meta = event.obj["metadata"]
        if res.plural == "jobs" and res.group == "batch":
            fresh = event.type == "ADDED" or (event.type == "MODIFIED" and not event.obj.get("status"))
            if fresh and not event.obj["spec"].get("suspend"):  # created, or resumed from suspend
                self._spawn(self._start_job(event.obj))
        elif res.plural == "pods" and res.group == "" and event.type == "DELETED":
            run = self.runs.pop((meta.get("namespace"), meta["name"]), None)
            if run is not None:
                run.kill()

    # ------------------------------------------------------------------ the Job controller
    async def _start_job(self, job: Obj) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        template = job["spec"]["template"]
        pod = {
            "metadata": {
                "name": f"{name}-{job['metadata']['uid'][:5]}",
                "labels": {**template.get("metadata", {}).get("labels", {}), "job-name": name,
                           "batch.kubernetes.io/job-name": name, "controller-uid": job["metadata"]["uid"]},
                "annotations": template.get("metadata", {}).get("annotations", {}),
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                     "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": {**template["spec"], "nodeName": "anchorage-fake-node"},
        }
        try:
            created = self.store.create(self.pods, ns, pod)
            self._patch_status(self.jobs, ns, name, {"startTime": now(), "active": 1})
        except ApiError:
            return
        pod_name = created["metadata"]["name"]

        async def report(status: Obj) -> None:
            with contextlib.suppress(ApiError):
                self._patch_status(self.pods, ns, pod_name, status)

        run = PodRun(created, self._root / f"{ns}-{pod_name}", self._refs, report, writable=self.writable,
                     simulate=self.simulate, grace=self.grace)
        self.runs[(ns, pod_name)] = run
        await self._run_job(job, run, job["spec"].get("activeDeadlineSeconds"))

    async def _run_job(self, job: Obj, run: PodRun, deadline: float | None) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        try:
            phase = await asyncio.wait_for(run.run(), timeout=deadline)
            reason = "" if phase == "Succeeded" else "BackoffLimitExceeded"
        except TimeoutError:
            run.kill()
            with contextlib.suppress(ApiError):
                self._patch_status(self.pods, run.ns, run.name, {"phase": "Failed", "reason": "DeadlineExceeded"})
            phase, reason = "Failed", "DeadlineExceeded"
        finally:
            self.runs.pop((run.ns, run.name), None)
        done = "Complete" if phase == "Succeeded" else "Failed"
        condition = {"type": done, "status": "True", "lastProbeTime": now(), "lastTransitionTime": now(),
                     "reason": reason if done == "Failed" else "", "message": ""}
        counts = {"succeeded": 1} if done == "Complete" else {"failed": 1}
        extra = {"completionTime": now()} if done == "Complete" else {}
        try:
            self._patch_status(self.jobs, ns, name, {"active": 0, **counts, **extra, "conditions": [condition]})
        except ApiError:
            return
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        if ttl is not None:
            await asyncio.sleep(ttl)
            with contextlib.suppress(ApiError):
                self.store.delete(self.jobs, ns, name)

    def _patch_status(self, res: Resource, ns: str, name: str, status: dict[str, Any]) -> None:
        obj = self.store.get(res, ns, name)
        merged = {**obj, "status": {**(obj.get("status") or {}), **status}}
        self.store.update(res, ns, name, merged, status_only=True)

    def logs(self, ns: str, pod: str, container: str) -> str:
        """What a container printed (``kubectl logs`` is not served; tests read it here)."""
        path = self._root / f"{ns}-{pod}" / f"{container}.log"
        return path.read_text(errors="replace") if path.exists() else ""
