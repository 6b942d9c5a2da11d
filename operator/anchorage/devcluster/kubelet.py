"""The fake Job controller and kubelet of the cluster fake.

Started by ``devcluster.serving``. For every Job written to the ``ObjectStore`` it creates one Pod
(owned by the Job), runs the pod's containers on this machine and reports Pod and Job status as the
kubelet and the Job controller would: init containers in order, native sidecars (init containers with
``restartPolicy: Always``) beside the main containers and stopped with SIGTERM after them,
``activeDeadlineSeconds`` (condition ``Failed``/``DeadlineExceeded``), ``ttlSecondsAfterFinished``
and ``suspend``.

Containers run under bubblewrap: the host's root directories read-only, each pod volume
(``emptyDir``, ``configMap``, ``secret``) bound at its ``mountPath``, a private network namespace
when the pod carries the label ``anchorage.dev/network: none``. Environment variables from
``secretKeyRef`` / ``configMapKeyRef`` are read from the fake's storage; while a referenced object or
key is missing (and not ``optional``) the container waits, reported as ``CreateContainerConfigError``,
and starts once it appears (as a kubelet retries). **The container image is ignored**:
commands run with this machine's programs, with the virtualenv of this Python first on ``PATH`` (so
``python -m anchorage...`` works as it does in the operator image). CPU and memory limits are not
enforced here. Without bubblewrap a pod fails with reason ``SandboxUnavailable``.

``simulate=True`` (load tests, ``bench/kube_operator.py``) runs no container at all: each pod succeeds at
once and the store receives what Anchorage's own pod programs would have written: the upload sidecar's
completion marker (``--marker``: ``upload.json`` for trials, ``verifier-upload.json`` for verifiers) and,
for a verifier pod (label ``anchorage.dev/role: verifier``), one ``score.json`` per ``--item`` of its
``score`` command, in the shape ``kubepod score`` writes (``ScoreRecord.to_dict()``): a synthetic perfect
score (O-Eval 1, gradable) marked ``"simulated": true``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorage.devcluster.storage import ApiError, Event, Obj, ObjectStore, Resource, now

NO_NETWORK_LABEL = "anchorage.dev/network"
ROLE_LABEL = "anchorage.dev/role"  # kubejobs.LABEL_ROLE: "trial" or "verifier"
ENV_RETRY_SEC = 0.2  # how often a container waiting for a Secret or ConfigMap looks again
_SKIP_ROOT = {"proc", "dev", "sys", "tmp", "run", "root"}
_SOURCE_ROOT = Path(__file__).resolve().parents[3]  # the checkout (or site-packages' parent) holding anchorage/


@dataclass
class PodRun:
    """A pod being run: its working folder and the processes of its containers."""

    ns: str
    name: str
    workdir: Path
    procs: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None


class MissingReference(Exception):
    """An env ``valueFrom`` names a Secret/ConfigMap (or a key) that does not exist yet."""


@dataclass
class ContainerResult:
    """How a container ended."""

    exit_code: int
    reason: str


class FakeKubelet:
    """Runs Jobs' pods (see the module docstring)."""

    def __init__(self, store: ObjectStore, *, writable: tuple[Path, ...] = (), grace: float = 5.0,
                 simulate: bool = False) -> None:
        self.store = store
        self.simulate = simulate
        self.writable = writable
        self.grace = grace
        self.runs: dict[tuple[str, str], PodRun] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._root = Path(tempfile.mkdtemp(prefix="anchorage-kubelet-"))
        self.bwrap = shutil.which("bwrap")

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
            self._kill(run)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
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
                self._kill(run)

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
            "spec": template["spec"],
        }
        try:
            created = self.store.create(self.pods, ns, pod)
            self._patch_status(self.jobs, ns, name, {"startTime": now(), "active": 1})
        except ApiError:
            return
        run = PodRun(ns, created["metadata"]["name"], self._root / f"{ns}-{created['metadata']['name']}")
        self.runs[(ns, run.name)] = run
        deadline = job["spec"].get("activeDeadlineSeconds")
        await self._run_job(job, run, deadline)

    async def _run_job(self, job: Obj, run: PodRun, deadline: float | None) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        try:
            phase, reason = await asyncio.wait_for(self._run_pod(run), timeout=deadline)
        except TimeoutError:
            self._kill(run)
            self._pod_status(run, "Failed", reason="DeadlineExceeded")
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

    # ------------------------------------------------------------------ the kubelet
    def _pod_status(self, run: PodRun, phase: str, reason: str = "", statuses: list[Obj] | None = None) -> None:
        status: dict[str, Any] = {"phase": phase}
        if reason:
            status["reason"] = reason
        if statuses is not None:
            status["containerStatuses"] = statuses
        if phase == "Running":
            status["startTime"] = now()
        with contextlib.suppress(ApiError):
            self._patch_status(self.pods, run.ns, run.name, status)

    async def _run_pod(self, run: PodRun) -> tuple[str, str]:
        pod = self.store.get(self.pods, run.ns, run.name)
        spec = pod["spec"]
        if self.simulate:
            return self._simulate(run, pod)
        if self.bwrap is None:
            self._pod_status(run, "Failed", reason="SandboxUnavailable")
            return "Failed", "SandboxUnavailable"
        mounts = self._prepare_volumes(run, pod)
        no_net = (pod["metadata"].get("labels") or {}).get(NO_NETWORK_LABEL) == "none"
        self._pod_status(run, "Running")
        inits = [c for c in spec.get("initContainers", []) if c.get("restartPolicy") != "Always"]
        sidecars = [c for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"]
        for container in inits:
            result = await self._run_container(run, container, mounts, no_net)
            if result.exit_code != 0:
                self._pod_status(run, "Failed", reason="InitContainerFailed",
                                 statuses=[self._terminated(container["name"], result)])
                return "Failed", "BackoffLimitExceeded"
        side_tasks = [asyncio.create_task(self._run_container(run, c, mounts, no_net)) for c in sidecars]
        results = await asyncio.gather(*(self._run_container(run, c, mounts, no_net) for c in spec["containers"]))
        # Sidecars get a moment to finish by themselves (ours upload then exit), then SIGTERM and grace.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(asyncio.gather(*side_tasks, return_exceptions=True)), self.grace)
        for container in sidecars:
            proc = run.procs.get(container["name"])
            if proc is not None and proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*side_tasks, return_exceptions=True), timeout=self.grace)
        self._kill(run)
        statuses = [self._terminated(c["name"], r) for c, r in zip(spec["containers"], results, strict=True)]
        ok = all(r.exit_code == 0 for r in results)
        self._pod_status(run, "Succeeded" if ok else "Failed", statuses=statuses)
        return ("Succeeded", "") if ok else ("Failed", "BackoffLimitExceeded")

    def _simulate(self, run: PodRun, pod: Obj) -> tuple[str, str]:
        """Load-test mode: run nothing; write what Anchorage's pod programs would write to the store."""
        from anchorage.store import open_store

        containers = [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]
        env = {e["name"]: e.get("value", "") for c in containers for e in c.get("env", [])}
        store = open_store(env["ANCHORAGE_STORE"])
        dest = env["ANCHORAGE_DEST"].strip("/")
        files: dict[str, int] = {"artifacts": 1}
        if (pod["metadata"].get("labels") or {}).get(ROLE_LABEL) == "verifier":
            items = _simulated_scores(pod["spec"]["containers"])
            for out, record in items.items():
                store.put_bytes("/".join(p for p in (dest, out, "score.json") if p), json.dumps(record).encode())
            files = {"": len(items)}
        marker = _option(next((c for c in containers if c["name"] == "upload"), {}), "--marker") or "upload.json"
        store.put_bytes(f"{dest}/{marker}", json.dumps({"exit_code": 0, "files": files}).encode())
        statuses = [self._terminated(c["name"], ContainerResult(0, "Completed")) for c in pod["spec"]["containers"]]
        self._pod_status(run, "Succeeded", statuses=statuses)
        return "Succeeded", ""

    @staticmethod
    def _terminated(name: str, result: ContainerResult) -> Obj:
        return {"name": name, "ready": False, "restartCount": 0, "image": "", "imageID": "",
                "state": {"terminated": {"exitCode": result.exit_code, "reason": result.reason,
                                         "startedAt": now(), "finishedAt": now()}}}

    def _prepare_volumes(self, run: PodRun, pod: Obj) -> dict[str, Path]:
        run.workdir.mkdir(parents=True, exist_ok=True)
        folders: dict[str, Path] = {}
        for volume in pod["spec"].get("volumes", []):
            path = run.workdir / "volumes" / volume["name"]
            path.mkdir(parents=True, exist_ok=True)
            for kind, res in (("configMap", "configmaps"), ("secret", "secrets")):
                if kind in volume:
                    name = volume[kind].get("name") or volume[kind].get("secretName")
                    self._write_items(path, res, run.ns, name, decode=kind == "secret")
            folders[volume["name"]] = path
        return folders

    def _write_items(self, path: Path, plural: str, ns: str, name: str, *, decode: bool) -> None:
        with contextlib.suppress(ApiError):
            obj = self.store.get(self.store.resource("", plural), ns, name)
            for key, value in (obj.get("data") or {}).items():
                (path / key).write_bytes(base64.b64decode(value) if decode else value.encode())

    def _env(self, run: PodRun, container: Obj) -> dict[str, str]:
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp",
               "HOSTNAME": run.name, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        for source in container.get("envFrom", []):
            for kind, plural in (("secretRef", "secrets"), ("configMapRef", "configmaps")):
                if kind in source:
                    with contextlib.suppress(ApiError):
                        obj = self.store.get(self.store.resource("", plural), run.ns, source[kind]["name"])
                        for key, value in (obj.get("data") or {}).items():
                            env[key] = base64.b64decode(value).decode() if plural == "secrets" else value
        for item in container.get("env", []):
            value = self._value_from(run.ns, item["valueFrom"]) if "valueFrom" in item else item.get("value", "")
            if value is not None:
                env[item["name"]] = str(value)
        return {k: v for k, v in env.items() if v != "" or k != "PYTHONPATH"}

    def _value_from(self, ns: str, source: Obj) -> str | None:
        """An env ``valueFrom`` (secretKeyRef, configMapKeyRef); raises MissingReference while it cannot be
        resolved (None when it is optional and missing, or a kind the fake does not resolve)."""
        for kind, plural in (("secretKeyRef", "secrets"), ("configMapKeyRef", "configmaps")):
            ref = source.get(kind)
            if ref is None:
                continue
            try:
                data = self.store.get(self.store.resource("", plural), ns, ref["name"]).get("data") or {}
            except ApiError:
                data = None
            if data is None or ref["key"] not in data:
                if ref.get("optional"):
                    return None
                what = f"{plural[:-1]} {ref['name']!r}" if data is None else f"key {ref['key']!r} in {ref['name']!r}"
                raise MissingReference(f"{what} not found")
            value = data[ref["key"]]
            return base64.b64decode(value).decode() if plural == "secrets" else str(value)
        return None

    async def _container_env(self, run: PodRun, container: Obj) -> dict[str, str]:
        """The container's environment, waiting (CreateContainerConfigError) until its references exist."""
        reported = False
        while True:
            try:
                return self._env(run, container)
            except MissingReference as exc:
                if not reported:
                    reported = True
                    waiting = {"name": container["name"], "ready": False, "restartCount": 0, "image": "", "imageID": "",
                               "state": {"waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}}}
                    self._pod_status(run, "Pending", statuses=[waiting])
                await asyncio.sleep(ENV_RETRY_SEC)

    def _bwrap_argv(self, container: Obj, mounts: dict[str, Path], no_net: bool) -> list[str]:
        assert self.bwrap is not None
        argv = [self.bwrap, "--die-with-parent", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                "--tmpfs", "/root"]
        for entry in sorted(os.listdir("/")):
            path = Path("/") / entry
            if entry in _SKIP_ROOT:
                continue
            if path.is_symlink():
                argv += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                argv += ["--ro-bind", str(path), str(path)]
        for mount in container.get("volumeMounts", []):
            source = mounts[mount["name"]] / mount.get("subPath", "")
            argv += ["--ro-bind" if mount.get("readOnly") else "--bind", str(source), mount["mountPath"]]
        # After the volumes (a volume at /tmp must not hide them): this Python and the checkout it runs from (an
        # editable install's sources, the tasks) when they live under a folder the pod gets fresh (/tmp, /root;
        # CI clones may sit under /tmp), then the writable store folders.
        for prefix in sorted({sys.base_prefix, sys.prefix, str(_SOURCE_ROOT)}):
            if Path(prefix).parts[1:2] and Path(prefix).parts[1] in _SKIP_ROOT:
                argv += ["--ro-bind", prefix, prefix]
        for path in self.writable:
            argv += ["--bind", str(path), str(path)]
        if no_net:
            argv.append("--unshare-net")
        argv += ["--chdir", container.get("workingDir", "/")]
        return argv

    async def _run_container(self, run: PodRun, container: Obj, mounts: dict[str, Path], no_net: bool
                             ) -> ContainerResult:
        command = [*container.get("command", []), *container.get("args", [])]
        if not command:
            return ContainerResult(128, "ContainerCannotRun")
        env = await self._container_env(run, container)
        log = (run.workdir / f"{container['name']}.log").open("wb")
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._bwrap_argv(container, mounts, no_net), "--", *command,
                env=env, stdout=log, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True)
        except OSError:
            log.close()
            return ContainerResult(128, "ContainerCannotRun")
        run.procs[container["name"]] = proc
        try:
            code = await proc.wait()
        finally:
            log.close()
        if code < 0:
            return ContainerResult(128 - code, "Error")
        return ContainerResult(code, "Completed" if code == 0 else "Error")

    @staticmethod
    def _kill(run: PodRun) -> None:
        for proc in run.procs.values():
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)

    def logs(self, ns: str, pod: str, container: str) -> str:
        """What a container printed (``kubectl logs`` is not served; tests read it here)."""
        path = self._root / f"{ns}-{pod}" / f"{container}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _argv(container: Obj) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


def _option(container: Obj, flag: str) -> str | None:
    """The value after the first ``flag`` in a container's command line, None without one."""
    argv = _argv(container)
    return argv[argv.index(flag) + 1] if flag in argv[:-1] else None


def _simulated_scores(containers: list[Obj]) -> dict[str, dict[str, Any]]:
    """What ``kubepod score`` would write for a verifier pod's containers: ``out`` → a synthetic perfect record.

    The ``score`` sub-command sits in the container's ``command`` (behind a shell wrapper, see
    ``kubejobs.verifier_job``); each ``--item i=OUT`` gets ``OUT/score.json``.
    """
    from anchorage.scoring.records import ScoreRecord

    records: dict[str, dict[str, Any]] = {}
    for container in containers:
        argv = _argv(container)
        if "score" not in argv:
            continue
        task = _option(container, "--task") or ""
        for flag, value in itertools.pairwise(argv):
            if flag == "--item":
                record = ScoreRecord(task=task, artifact=f"/scratch/in/{value.partition('=')[0]}", gradable=True,
                                     raw=1.0, raw_before_gates=1.0, oracle_raw=1.0, oracle_source="simulated",
                                     baseline_raw=0.0, baseline_source="simulated", gap=1.0, bo_branch="simulated",
                                     o_eval=1.0, bo_eval=1.0, scoring_version="simulated")
                records[value.partition("=")[2]] = {**record.to_dict(), "simulated": True}
    return records
