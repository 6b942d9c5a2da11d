"""Running one pod's containers on this machine, and the pod status a kubelet would report for it.

Shared by the simulated node (``simulatednode``, whose pods run nothing) and the fake's
kubelet (``kubelet``). :class:`PodRun` takes a pod as the API server stores it and runs, as a kubelet
does: init containers in order, native sidecars (init containers with ``restartPolicy: Always``) started
in their turn and stopped with SIGTERM once every main container has ended, then the main containers in
parallel; a failing init container fails the pod (``restartPolicy: Never`` is all this runner supports:
Jobs' pods). After every change it hands the whole pod ``status`` (phase, conditions, container
statuses with exit codes and reasons) to the caller's ``report``.

Each container runs under bubblewrap: the host's root folders read-only, each pod volume bound at its
``mountPath`` (``emptyDir`` as a fresh folder with mode 0777 as the kubelet makes it, ``secret`` /
``configMap`` written from the API, ``projected`` with a ServiceAccount token requested for the pod), a
private network namespace for pods labelled ``anchorage.dev/network: none``, a private pid namespace, a
fresh ``/run``; as the ``runAsUser`` / ``runAsGroup`` of its security context inside a user namespace
(mapped to the node's own user outside, as a rootless runtime does), every capability dropped,
``no_new_privs``; in a cgroup of its own with the container's CPU, memory and pids limits (Anchorage's
``runtime.local.cgroups``: an OOM kill is reported ``OOMKilled``, exit code 137; where no cgroup can be made,
the memory limit becomes an address-space rlimit). A disk-backed ``emptyDir`` with a ``sizeLimit`` is measured
every second while the pod runs; over its limit the pod is evicted as a kubelet evicts it (every container
killed at once, phase ``Failed``, reason ``Evicted``, the kubelet's message naming the volume). Environment
``secretKeyRef`` / ``configMapKeyRef`` are resolved through :class:`References`; while one is missing the
container waits in ``CreateContainerConfigError`` and starts once it exists, as a kubelet retries.

Commands, args and env values are expanded as a kubelet does (``$(NAME)`` from the variables the container's
spec defines — ``env``, ``envFrom`` —, ``$$`` → ``$``; ``anchorage.trials.agents.templating.expand_references``).
**The image is not used** (there is no container runtime) — except an image this node has a root
folder for (``$ANCHORAGE_DEV_IMAGE_ROOTS``: ``IMAGE=DIR`` pairs separated by ``;``, e.g. a rootfs that
``buildah mount`` gives for an image ``tools/images.py`` built): its containers run in that folder instead
of this machine's root (its ``/usr``, ``/etc``, ``/opt``..., the pod's volumes on top). Otherwise
commands run with this machine's programs,
with this Python's virtualenv first on ``PATH`` so ``python -m anchorage...`` works as in Anchorage's
images; a container without ``command`` cannot run (``CreateContainerError``).

A memory-backed ``emptyDir`` (``medium: Memory``) is a tmpfs as the kubelet mounts it: of the ``sizeLimit`` or,
when less, the pod's memory limit (a write past it fails with ENOSPC), its pages counted against the memory limit
of the container that writes them (its cgroup); where this process may not mount (not root) it is a plain folder
evicted over its ``sizeLimit`` like a disk-backed one. Not enforced: ephemeral-storage limits of containers,
NetworkPolicies (no CNI: pods share the host's network unless labelled as above), probes.

``simulate``: a callable given by the caller (tests, benchmarks) that receives the pod and returns the
exit code of each container without running anything (see ``tests/simulated_pods.py``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import os
import re
import shutil
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from anchorage.runtime.local import cgroups
from anchorage.trials.agents.templating import expand_references

Obj = dict[str, Any]
Simulate = Callable[[Obj], dict[str, int]]
NO_NETWORK_LABEL = "anchorage.dev/network"
ENV_RETRY_SEC = 0.2
EVICTION_CHECK_SEC = 1.0
#: How long a cancelled wait gives its killed process to be reaped (:func:`exit_code`).
REAP_SEC = 10.0
_SKIP_ROOT = {"proc", "dev", "sys", "tmp", "run", "root"}
_SOURCE_ROOT = Path(sys.modules["anchorage"].__file__ or ".").resolve().parents[2]  # the checkout (tasks/ beside operator/)
_JOIN = 'for f; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; shift; done; shift; exec "$@"'
IMAGE_ROOTS_ENV = "ANCHORAGE_DEV_IMAGE_ROOTS"


def image_roots() -> dict[str, Path]:
    """The images this node runs in a root folder of their own (``$ANCHORAGE_DEV_IMAGE_ROOTS``)."""
    pairs = (item.split("=", 1) for item in os.environ.get(IMAGE_ROOTS_ENV, "").split(";") if "=" in item)
    return {image.strip(): Path(folder.strip()) for image, folder in pairs}


def now() -> str:
    """Now, as Kubernetes writes timestamps."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class MissingReference(Exception):
    """An env ``valueFrom`` / ``envFrom`` names a Secret or ConfigMap (or key) that does not exist yet."""


class References(Protocol):
    """Where Secrets and ConfigMaps come from (the API for the node agent, the fake's store for its kubelet)."""

    async def read(self, plural: str, namespace: str, name: str) -> Obj | None:
        """The object (``secrets`` or ``configmaps``), None when it does not exist."""

    async def token(self, pod: Obj, audience: str | None, seconds: int) -> str:
        """A token of the pod's ServiceAccount bound to the pod (what a projected volume holds)."""


def cpu_cores(text: str) -> float:
    """A CPU quantity (``500m``, ``2``) in cores."""
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


_UNITS = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "K": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9,
          "T": 10 ** 12, "": 1}


def quantity_bytes(text: str) -> int:
    """A memory quantity (``128Mi``, ``1Gi``, ``500M``, ``1048576``) in bytes."""
    match = re.fullmatch(r"([0-9.]+)([KMGT]i?|)", text.strip())
    if match is None:
        raise ValueError(f"unsupported quantity {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


@dataclass
class ContainerEnd:
    """How a container ended."""

    exit_code: int
    reason: str
    started_at: str
    finished_at: str
    message: str = ""


@dataclass
class StatusBook:
    """The pod status a kubelet would report, kept up to date as containers change state."""

    pod: Obj
    phase: str = "Pending"
    reason: str = ""
    message: str = ""
    start_time: str = ""
    states: dict[str, Obj] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    initialized: bool = False

    def _spec(self) -> Obj:
        return dict(self.pod["spec"])

    def container_names(self, kind: str) -> list[str]:
        return [c["name"] for c in self._spec().get(kind) or []]

    def set(self, name: str, state: Obj) -> None:
        self.states[name] = state
        if "running" in state:
            self.started.add(name)

    def _status_of(self, container: Obj) -> Obj:
        name = container["name"]
        state = self.states.get(name, {"waiting": {"reason": "PodInitializing"}})
        entry: Obj = {"name": name, "image": container.get("image", ""), "imageID": "", "restartCount": 0,
                      "ready": "running" in state, "started": "running" in state, "state": state}
        if name in self.started or "terminated" in state:
            entry["containerID"] = f"anchorage://{self.pod['metadata'].get('uid', '')[:8]}-{name}"
            entry["imageID"] = entry["image"]
        return entry

    def snapshot(self) -> Obj:
        spec = self._spec()
        mains = spec.get("containers") or []
        ready = self.phase == "Running" and all("running" in self.states.get(c["name"], {}) for c in mains)
        stamp = now()

        def condition(kind: str, ok: bool) -> Obj:
            return {"type": kind, "status": "True" if ok else "False", "lastProbeTime": None,
                    "lastTransitionTime": stamp}

        status: Obj = {"phase": self.phase, "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
                       "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}], "qosClass": _qos(spec),
                       "conditions": [condition("PodReadyToStartContainers", True),
                                      condition("Initialized", self.initialized),
                                      condition("Ready", ready), condition("ContainersReady", ready)],
                       "containerStatuses": [self._status_of(c) for c in mains]}
        if spec.get("initContainers"):
            status["initContainerStatuses"] = [self._status_of(c) for c in spec["initContainers"]]
        if self.start_time:
            status["startTime"] = self.start_time
        if self.reason:
            status["reason"] = self.reason
        if self.message:
            status["message"] = self.message
        return status


def _resolved(path: str) -> str:
    """A mount target with the host's symlinked folders on its way resolved (``/var/run/x`` → ``/run/x``):
    bubblewrap would follow such a link outside the container's root."""
    parts = Path(path).parts
    for cut in range(len(parts), 1, -1):
        prefix = Path(*parts[:cut])
        if prefix.exists():
            return str(Path(os.path.realpath(prefix), *parts[cut:]))
    return path


def _qos(spec: Obj) -> str:
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(r.get("limits") and {k: r["limits"].get(k) for k in ("cpu", "memory")} ==
                     {k: (r.get("requests") or r["limits"]).get(k) for k in ("cpu", "memory")}
                     and "cpu" in r["limits"] and "memory" in r["limits"] for r in resources)
    return "Guaranteed" if guaranteed else "Burstable"


def disk_usage(path: Path) -> int:
    """Bytes of disk a folder's files take (allocated blocks, as ``du`` counts them; hard links once)."""
    total, seen = 0, set()
    for folder, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(folder, name))
                if (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    total += info.st_blocks * 512
    return total


def _terminated(end: ContainerEnd) -> Obj:
    state: Obj = {"exitCode": end.exit_code, "reason": end.reason, "startedAt": end.started_at,
                  "finishedAt": end.finished_at}
    if end.message:
        state["message"] = end.message
    return {"terminated": state}


async def exit_code(proc: asyncio.subprocess.Process) -> int:
    """Wait for ``proc`` to end: its exit code. Cancelled meanwhile (a deadline, a node stopping), the process (its
    process group when it leads one) is killed and reaped before the cancellation goes on, so no process of a pod
    outlives its wait unreaped (asyncio warns when a running process's transport is dropped)."""
    try:
        return await proc.wait()
    except asyncio.CancelledError:
        if proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # not a group leader (mount, umount): the process alone
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), REAP_SEC)
        raise


class PodRun:
    """One pod on this machine (see the module docstring). ``await run.run()`` returns the final phase."""

    def __init__(self, pod: Obj, workdir: Path, refs: References, report: Callable[[Obj], Awaitable[None]], *,
                 writable: tuple[Path, ...] = (), simulate: Simulate | None = None, grace: float = 5.0,
                 image_binds: tuple[tuple[str, Path], ...] = (), image_path: tuple[str, ...] = ()) -> None:
        self.pod = pod
        self.ns, self.name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self.workdir = workdir
        self.refs, self.report = refs, report
        self.writable, self.simulate, self.grace = writable, simulate, grace
        self.image_binds, self.image_path = image_binds, image_path
        self.book = StatusBook(pod)
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.groups: dict[str, cgroups.Group] = {}
        self.bwrap = shutil.which("bwrap")
        self.mounts: dict[str, Path] = {}
        self.killed = False
        self.evicted = ""
        self.tmpfs: list[Path] = []  # memory-backed emptyDirs mounted as tmpfs (unmounted when the pod ends)

    async def _publish(self) -> None:
        await self.report(self.book.snapshot())

    # ------------------------------------------------------------------ the pod's lifecycle
    async def run(self) -> str:
        """Run the pod to its end; the phase it ended in (``Succeeded`` or ``Failed``)."""
        spec = self.pod["spec"]
        self.book.start_time = now()
        if self.simulate is not None:
            return await self._simulated(spec)
        problem = self._unrunnable(spec)
        if problem:
            self.book.phase, self.book.reason, self.book.message = "Failed", "SandboxUnavailable", problem
            await self._publish()
            return "Failed"
        watcher: asyncio.Task[None] | None = None
        try:
            await self._prepare_volumes()
            await self._publish()
            watcher = asyncio.create_task(self._watch_empty_dirs())
            self.book.phase = await self._containers(spec)
        finally:
            if watcher is not None:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
            await asyncio.shield(self._unmount_memory())
        if self.evicted:
            self.book.phase, self.book.reason, self.book.message = "Failed", "Evicted", self.evicted
        await self._publish()
        return self.book.phase

    async def _containers(self, spec: Obj) -> str:
        """Init containers in order (native sidecars started in their turn), then the main containers; the phase."""
        sidecars: dict[str, asyncio.Task[ContainerEnd]] = {}
        for container in spec.get("initContainers") or []:
            if self.evicted:
                break
            if container.get("restartPolicy") == "Always":
                sidecars[container["name"]] = asyncio.create_task(self._container(container))
                await self._until_started(container["name"], sidecars[container["name"]])
                continue
            end = await self._container(container)
            if end.exit_code != 0:
                await self._stop_sidecars(sidecars)
                return "Failed"
        if self.evicted:
            await self._stop_sidecars(sidecars)
            return "Failed"
        self.book.initialized = True
        self.book.phase = "Running"
        mains = [asyncio.create_task(self._container(c)) for c in spec["containers"]]
        ends = await asyncio.gather(*mains)
        await self._stop_sidecars(sidecars)
        return "Succeeded" if all(e.exit_code == 0 for e in ends) else "Failed"

    def _limited_empty_dirs(self) -> list[tuple[str, Path, str]]:
        """(name, folder, limit as written) of the pod's emptyDirs that have a ``sizeLimit`` and are folders on
        disk (not a tmpfs of that size: :meth:`_mount_memory`)."""
        found = []
        for volume in self.pod["spec"].get("volumes") or []:
            empty = volume.get("emptyDir")
            path = self.mounts[volume["name"]]
            if isinstance(empty, dict) and empty.get("sizeLimit") and path not in self.tmpfs:
                found.append((volume["name"], path, str(empty["sizeLimit"])))
        return found

    def _pod_memory_limit(self) -> int | None:
        """The pod's memory limit as the kubelet sizes its cgroup: the main containers' and native sidecars'
        limits summed, or the largest init container's when more; None when a container has none."""
        spec = self.pod["spec"]
        inits = spec.get("initContainers") or []
        running = [*spec["containers"], *(c for c in inits if c.get("restartPolicy") == "Always")]
        limits = [((c.get("resources") or {}).get("limits") or {}).get("memory") for c in [*running, *inits]]
        if not all(limits):
            return None
        total = sum(quantity_bytes(str(((c.get("resources") or {}).get("limits") or {})["memory"])) for c in running)
        one = [quantity_bytes(str(c["resources"]["limits"]["memory"])) for c in inits if c.get("restartPolicy") != "Always"]
        return max([total, *one])

    async def _mount_memory(self, path: Path, empty: Obj) -> None:
        """A memory-backed emptyDir: a tmpfs of its ``sizeLimit`` or the pod's memory limit, the smaller (none:
        tmpfs's default size), as the kubelet mounts it; left a folder when mounting is refused (not root)."""
        sizes = [quantity_bytes(str(empty["sizeLimit"]))] if empty.get("sizeLimit") else []
        limit = self._pod_memory_limit()
        sizes += [limit] if limit is not None else []
        options = "mode=0777" + (f",size={min(sizes)}" if sizes else "")
        proc = await asyncio.create_subprocess_exec("mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path),
                                                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        if await exit_code(proc) == 0:
            self.tmpfs.append(path)

    async def _unmount_memory(self) -> None:
        """Unmount the pod's tmpfs emptyDirs (their contents go with the pod, as on a kubelet)."""
        while self.tmpfs:
            proc = await asyncio.create_subprocess_exec("umount", "--lazy", str(self.tmpfs.pop()),
                                                        stdout=asyncio.subprocess.DEVNULL,
                                                        stderr=asyncio.subprocess.DEVNULL)
            await exit_code(proc)

    async def _watch_empty_dirs(self) -> None:
        """Every ``EVICTION_CHECK_SEC``: evict the pod when a limited emptyDir holds more than its ``sizeLimit``
        (the kubelet's eviction manager; its message)."""
        limited = [(name, path, limit, quantity_bytes(limit)) for name, path, limit in self._limited_empty_dirs()]
        while limited and not self.evicted:
            await asyncio.sleep(EVICTION_CHECK_SEC)
            for name, path, limit, size in limited:
                if await asyncio.to_thread(disk_usage, path) > size:
                    self.evicted = f'Usage of EmptyDir volume "{name}" exceeds the limit "{limit}". '
                    self._kill_processes()
                    break

    async def _simulated(self, spec: Obj) -> str:
        assert self.simulate is not None
        codes = await asyncio.to_thread(self.simulate, self.pod)
        stamp = now()

        def end(name: str) -> int:
            code = codes.get(name, 0)
            self.book.set(name, _terminated(ContainerEnd(code, "Completed" if code == 0 else "Error", stamp, stamp)))
            return code

        # as :meth:`_containers` runs them: an init container that fails ends the pod before any main container
        # starts (they stay waiting, PodInitializing, as a kubelet reports them); native sidecars end with the pod
        sidecars: list[str] = []
        failed = False
        for container in spec.get("initContainers") or []:
            if container.get("restartPolicy") == "Always":
                sidecars.append(container["name"])
            elif end(container["name"]) != 0:
                failed = True
                break
        if not failed:
            self.book.initialized = True
            failed = not all([end(c["name"]) == 0 for c in spec["containers"]])
        for name in sidecars:
            end(name)
        self.book.phase = "Failed" if failed else "Succeeded"
        await self._publish()
        return self.book.phase

    def _unrunnable(self, spec: Obj) -> str:
        if self.bwrap is None:
            return "bubblewrap (bwrap) is not installed: this node runs containers with it (apt install bubblewrap)"
        for container in [*(spec.get("initContainers") or []), *spec["containers"]]:
            if not container.get("command"):
                return (f"container {container['name']!r} has no command: this node runs no images, so it cannot "
                        "know the image's entrypoint")
        return ""

    async def _until_started(self, name: str, task: asyncio.Task[ContainerEnd]) -> None:
        while name not in self.book.started and not task.done():
            await asyncio.sleep(0.05)

    async def _stop_sidecars(self, sidecars: dict[str, asyncio.Task[ContainerEnd]]) -> None:
        """Let sidecars finish by themselves for a moment (ours upload, then exit), then SIGTERM and grace."""
        if not sidecars:
            return
        tasks = list(sidecars.values())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(asyncio.gather(*tasks, return_exceptions=True)), self.grace)
        for name in sidecars:
            proc = self.procs.get(name)
            if proc is not None and proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(asyncio.gather(*tasks, return_exceptions=True)), self.grace)
        self._kill_processes()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def fail(self, message: str) -> None:
        """End the pod as Failed with ``message`` (the runner itself failed): its containers are stopped."""
        self._kill_processes()
        self.book.phase, self.book.reason, self.book.message = "Failed", "NodeAgentError", message[:1000]
        await self._publish()

    def kill(self) -> None:
        """SIGKILL every container of the pod (deletion, deadline, node shutdown): ``killed`` says so after."""
        self.killed = True
        self._kill_processes()

    def _kill_processes(self) -> None:
        for proc in self.procs.values():
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        for group in self.groups.values():
            group.kill_all()

    def cleanup(self) -> None:
        """Remove the pod's cgroups and its working folder."""
        for group in self.groups.values():
            group.remove()
        self.groups.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)

    # ------------------------------------------------------------------ one container
    async def _container(self, container: Obj) -> ContainerEnd:
        name = container["name"]
        env, defined = await self._container_env(container)
        group = self._cgroup(container)
        command = [expand_references(part, defined) for part in [*container.get("command", []), *container.get("args", [])]]
        argv = [*(["/bin/sh", "-c", _JOIN, "join", *map(str, group.procs_files), "--"] if group else
                  self._rlimits(container)),
                *self._bwrap_argv(container), "--", *command]
        started = now()
        log = (self.workdir / f"{name}.log").open("ab")
        try:
            proc = await asyncio.create_subprocess_exec(*argv, env=env, stdout=log, stderr=asyncio.subprocess.STDOUT,
                                                        start_new_session=True)
        except OSError as exc:
            log.close()
            end = ContainerEnd(128, "StartError", started, now(), str(exc))
            self.book.set(name, _terminated(end))
            await self._publish()
            return end
        self.procs[name] = proc
        self.book.set(name, {"running": {"startedAt": started}})
        await self._publish()
        try:
            code = await exit_code(proc)
        finally:
            log.close()
        if group is not None and group.oom_killed():
            end = ContainerEnd(137, "OOMKilled", started, now())
        elif code < 0:
            end = ContainerEnd(128 - code, "Error", started, now())
        else:
            end = ContainerEnd(code, "Completed" if code == 0 else "Error", started, now())
        self.book.set(name, _terminated(end))
        await self._publish()
        return end

    def _cgroup(self, container: Obj) -> cgroups.Group | None:
        limits = (container.get("resources") or {}).get("limits") or {}
        cpus = cpu_cores(str(limits["cpu"])) if "cpu" in limits else None
        memory = quantity_bytes(str(limits["memory"])) // 2 ** 20 if "memory" in limits else None
        uid = self.pod["metadata"].get("uid", "")[:8]
        group = cgroups.open_group(f"pod-{uid}-{container['name']}", cpus=cpus, memory_mb=memory, pids_max=4096)
        if group is not None:
            self.groups[container["name"]] = group
        return group

    @staticmethod
    def _rlimits(container: Obj) -> list[str]:
        """Without a cgroup: the memory limit as an address-space rlimit (``prlimit``), as the local sandbox does."""
        memory = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        if memory is None or shutil.which("prlimit") is None:
            return []
        return ["prlimit", f"--as={quantity_bytes(str(memory))}", "--"]

    def _identity(self, container: Obj) -> list[str]:
        """bubblewrap's options for the container's user: ``runAsUser`` / ``runAsGroup`` inside a user namespace
        (mapped to this node's own user outside, as a rootless runtime does), every capability dropped."""
        ctx = {**(self.pod["spec"].get("securityContext") or {}), **(container.get("securityContext") or {})}
        uid = ctx.get("runAsUser")
        if uid is None:
            return []
        return ["--unshare-user", "--uid", str(uid), "--gid", str(ctx.get("runAsGroup", uid)), "--cap-drop", "ALL"]

    async def _prepare_volumes(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for volume in self.pod["spec"].get("volumes") or []:
            path = self.workdir / "volumes" / volume["name"]
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(0o777)  # as the kubelet makes an emptyDir: any container user may write
            empty = volume.get("emptyDir")
            if isinstance(empty, dict) and empty.get("medium") == "Memory":
                await self._mount_memory(path, empty)
            for kind, plural in (("configMap", "configmaps"), ("secret", "secrets")):
                if kind in volume:
                    name = volume[kind].get("name") or volume[kind].get("secretName")
                    obj = await self.refs.read(plural, self.ns, name)
                    self._write_items(path, (obj or {}).get("data") or {}, volume[kind].get("items"),
                                      decode=kind == "secret")
            for source in (volume.get("projected") or {}).get("sources") or []:
                await self._project(path, source)
            self.mounts[volume["name"]] = path

    @staticmethod
    def _write_items(path: Path, data: Obj, items: list[Obj] | None, *, decode: bool) -> None:
        """A Secret's or ConfigMap's keys as files (``items``: only those keys, at their paths)."""
        chosen: dict[str, str] = {i["key"]: str(i.get("path") or i["key"]) for i in items} if items else \
            {str(k): str(k) for k in data}
        for key, relative in chosen.items():
            if key not in data:
                continue
            target = path / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            value = data[key]
            target.write_bytes(base64.b64decode(value) if decode else str(value).encode())
            target.chmod(0o444)

    async def _project(self, path: Path, source: Obj) -> None:
        """One source of a projected volume: a ServiceAccount token (requested for this pod, as a kubelet
        does), a ConfigMap or Secret, or downward-API fields."""
        if "serviceAccountToken" in source:
            spec = source["serviceAccountToken"]
            token = await self.refs.token(self.pod, spec.get("audience"), int(spec.get("expirationSeconds", 3607)))
            target = path / spec["path"]
            target.write_text(token)
            target.chmod(0o444)
        for kind, plural in (("configMap", "configmaps"), ("secret", "secrets")):
            if kind in source:
                obj = await self.refs.read(plural, self.ns, source[kind]["name"])
                self._write_items(path, (obj or {}).get("data") or {}, source[kind].get("items"),
                                  decode=kind == "secret")
        for item in (source.get("downwardAPI") or {}).get("items") or []:
            value = await self._value({"fieldRef": item.get("fieldRef") or {}})
            if value is not None:
                (path / item["path"]).write_text(value)

    async def _value(self, source: Obj) -> str | None:
        for kind, plural in (("secretKeyRef", "secrets"), ("configMapKeyRef", "configmaps")):
            ref = source.get(kind)
            if ref is None:
                continue
            obj = await self.refs.read(plural, self.ns, ref["name"])
            data = (obj or {}).get("data") or {}
            if obj is None or ref["key"] not in data:
                if ref.get("optional"):
                    return None
                what = f"{plural[:-1]} {ref['name']!r}" if obj is None else f"key {ref['key']!r} in {ref['name']!r}"
                raise MissingReference(f"{what} not found")
            value = data[ref["key"]]
            return base64.b64decode(value).decode() if plural == "secrets" else str(value)
        field_ref = (source.get("fieldRef") or {}).get("fieldPath")
        if field_ref:
            return {"metadata.name": self.name, "metadata.namespace": self.ns,
                    "spec.nodeName": self.pod["spec"].get("nodeName", ""),
                    "metadata.uid": self.pod["metadata"].get("uid", "")}.get(field_ref)
        return None

    async def _env(self, container: Obj) -> tuple[dict[str, str], dict[str, str]]:
        """(the process environment, the variables the container spec defines — what ``$(VAR)`` may name)."""
        defined: dict[str, str] = {}
        for source in container.get("envFrom") or []:
            for kind, plural in (("secretRef", "secrets"), ("configMapRef", "configmaps")):
                if kind in source:
                    obj = await self.refs.read(plural, self.ns, source[kind]["name"])
                    if obj is None and not source[kind].get("optional"):
                        raise MissingReference(f"{plural[:-1]} {source[kind]['name']!r} not found")
                    for key, value in ((obj or {}).get("data") or {}).items():
                        defined[key] = base64.b64decode(value).decode() if plural == "secrets" else str(value)
        for item in container.get("env") or []:
            value = await self._value(item["valueFrom"]) if "valueFrom" in item else expand_references(
                item.get("value", ""), defined)
            if value is not None:
                defined[item["name"]] = str(value)
        env = {"PATH": ":".join([*self.image_path, str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin",
                                 "/bin"]), "HOME": "/tmp", "HOSTNAME": self.name}
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        return {**env, **defined}, defined

    async def _container_env(self, container: Obj) -> tuple[dict[str, str], dict[str, str]]:
        """The container's environment (and its defined variables), waiting (``CreateContainerConfigError``)
        until its references exist."""
        reported = False
        while True:
            try:
                return await self._env(container)
            except MissingReference as exc:
                if not reported:
                    reported = True
                    self.book.set(container["name"], {"waiting": {"reason": "CreateContainerConfigError",
                                                                  "message": str(exc)}})
                    await self._publish()
                await asyncio.sleep(ENV_RETRY_SEC)

    def _bwrap_argv(self, container: Obj) -> list[str]:
        assert self.bwrap is not None
        argv = [self.bwrap, "--die-with-parent", "--unshare-pid", *self._identity(container), "--dev", "/dev",
                "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/root", "--tmpfs", "/run"]
        image_root = image_roots().get(str(container.get("image", "")))
        root = image_root or Path("/")
        # top-level folders that must be writable to create an image bind's target the root lacks (/opt/...)
        grown = {Path(target).parts[1] for target, _ in self.image_binds
                 if not (root / Path(target).relative_to("/")).exists()}
        for entry in sorted(os.listdir(root)):
            path = root / entry
            if entry in _SKIP_ROOT:
                continue
            if path.is_symlink():
                argv += ["--symlink", os.readlink(path), f"/{entry}"]
            elif path.is_dir() and entry in grown:
                argv += ["--tmpfs", f"/{entry}"] + [arg for child in sorted(path.iterdir()) for arg in (
                    ["--symlink", os.readlink(child), f"/{entry}/{child.name}"] if child.is_symlink() else
                    ["--ro-bind", str(child), f"/{entry}/{child.name}"])]
            elif path.is_dir():
                argv += ["--ro-bind", str(path), f"/{entry}"]
        for mount in container.get("volumeMounts") or []:
            source = self.mounts[mount["name"]] / mount.get("subPath", "")
            source.mkdir(parents=True, exist_ok=True)
            argv += ["--ro-bind" if mount.get("readOnly") else "--bind", str(source), _resolved(mount["mountPath"])]
        # After the volumes (a volume at /tmp must not hide them): this Python and the checkout it runs from
        # when they live under a folder the container gets fresh (/tmp, /root), then the writable store folders.
        for prefix in sorted({sys.base_prefix, sys.prefix, str(_SOURCE_ROOT)}) if image_root is None else ():
            if Path(prefix).parts[1:2] and Path(prefix).parts[1] in _SKIP_ROOT:
                argv += ["--ro-bind", prefix, prefix]
        for path in self.writable:
            argv += ["--bind", str(path), str(path)]
        for target, source in self.image_binds:
            argv += ["--ro-bind", str(source), target]
        if (self.pod["metadata"].get("labels") or {}).get(NO_NETWORK_LABEL) == "none":
            argv.append("--unshare-net")
        return [*argv, "--chdir", container.get("workingDir", "/")]

    def logs(self, container: str) -> str:
        """What a container printed so far."""
        path = self.workdir / f"{container}.log"
        return path.read_text(errors="replace") if path.exists() else ""
