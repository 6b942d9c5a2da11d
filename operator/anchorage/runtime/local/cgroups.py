"""Per-trial control groups: memory, pids and CPU limits, OOM detection, and kill-everything.

Used by :mod:`anchorage.runtime.local.sandbox`. Supports cgroup v2 (one unified hierarchy, when
``/sys/fs/cgroup/cgroup.controllers`` exists and the controllers can be delegated) and cgroup v1
(separate ``memory``, ``pids`` and ``cpu`` hierarchies). Each trial gets a child group of the
engine's own group, ``anchorage-<owner tag>-<id>`` (:mod:`.leftovers`), so nested container limits
still apply and groups of a killed engine are recognised and removed by the next run. When no usable
hierarchy exists, :func:`open_group` returns ``None`` and the sandbox falls back to rlimits.

Limits are written from outside, as root, before the agent joins; the sandbox mounts no cgroup
filesystem and the agent holds no capability, so it cannot change them. :meth:`Group.read_limits`
reads them back after the run (the trial record shows both), :meth:`Group.events` the kernel's own
counters (OOM kills, refused forks) — evidence the agent cannot forge.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from anchorage.runtime.local import leftovers

ROOT = Path("/sys/fs/cgroup")
_V1_CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000


def _own_paths() -> dict[str, str]:
    """Controller name (or '' for v2) → this process's group path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    return paths


@dataclass
class Group:
    """One trial's group(s). ``dirs`` maps a controller (or 'unified') to its directory."""

    dirs: dict[str, Path]
    version: int
    enforced: dict[str, str] = field(default_factory=dict)

    @property
    def procs_files(self) -> list[Path]:
        return [d / "cgroup.procs" for d in self.dirs.values()]

    def _file(self, controller: str, name: str) -> Path | None:
        base = self.dirs.get("unified" if self.version == 2 else controller)
        return base / name if base is not None else None

    def oom_killed(self) -> bool:
        """True when the kernel's OOM killer acted in this group."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        path = self._file("memory", name)
        if path is None or not path.exists():
            return False
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and int(value) > 0:
                return True
        return False

    def events(self) -> dict[str, int]:
        """Kernel counters of the group: ``oom_kill`` (OOM kills), ``pids_max`` (forks refused at pids.max)."""
        out: dict[str, int] = {}
        for controller, name, key, label in (("memory", "memory.events" if self.version == 2 else "memory.oom_control",
                                              "oom_kill", "oom_kill"),
                                             ("pids", "pids.events", "max", "pids_max")):
            path = self._file(controller, name)
            with contextlib.suppress(OSError, ValueError):
                for line in path.read_text().splitlines() if path is not None else []:
                    field_name, _, value = line.partition(" ")
                    if field_name == key:
                        out[label] = int(value)
        return out

    def read_limits(self) -> dict[str, str]:
        """The limits in force now, read back from the group's files."""
        names = {"memory": "memory.max" if self.version == 2 else "memory.limit_in_bytes", "pids": "pids.max",
                 "cpus": "cpu.max" if self.version == 2 else "cpu.cfs_quota_us"}
        out: dict[str, str] = {}
        for key, name in names.items():
            path = self._file("cpu" if key == "cpus" else key, name)
            with contextlib.suppress(OSError):
                if path is not None and key in self.enforced:
                    out[key] = path.read_text().strip()
        return out

    def pids(self) -> set[int]:
        found: set[int] = set()
        for procs in self.procs_files:
            with contextlib.suppress(OSError):
                found.update(int(p) for p in procs.read_text().split())
        return found

    def kill_all(self, deadline_sec: float = 5.0) -> int:
        """SIGKILL every process in the group until it is empty; returns how many were signalled."""
        kill_file = self._file("", "cgroup.kill") if self.version == 2 else None
        if kill_file is not None and kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        signalled: set[int] = set()
        end = time.monotonic() + deadline_sec
        while (pids := self.pids()) and time.monotonic() < end:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                signalled.add(pid)
            time.sleep(0.002)
        return len(signalled)

    def remove(self) -> None:
        for directory in self.dirs.values():
            for _ in range(50):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
    except OSError:
        return False
    return True


def _open_v1(name: str, cpus: float | None, memory_mb: int | None, pids_max: int | None) -> Group | None:
    own = _own_paths()
    dirs: dict[str, Path] = {}
    for controller in _V1_CONTROLLERS:
        hierarchy = ROOT / controller
        if not (hierarchy / "cgroup.procs").exists():
            continue
        directory = hierarchy / own.get(controller, "/").lstrip("/") / name
        try:
            directory.mkdir(parents=False, exist_ok=True)
        except OSError:
            continue
        dirs[controller] = directory
    if not dirs:
        return None
    group = Group(dirs=dirs, version=1)
    if memory_mb is not None and "memory" in dirs:
        nbytes = str(memory_mb * 1024 * 1024)
        if _write(dirs["memory"] / "memory.limit_in_bytes", nbytes):
            _write(dirs["memory"] / "memory.memsw.limit_in_bytes", nbytes)
            group.enforced["memory"] = f"cgroup v1 memory.limit_in_bytes={nbytes}"
    if pids_max is not None and "pids" in dirs and _write(dirs["pids"] / "pids.max", str(pids_max)):
        group.enforced["pids"] = f"cgroup v1 pids.max={pids_max}"
    if cpus is not None and "cpu" in dirs:
        _write(dirs["cpu"] / "cpu.cfs_period_us", str(CPU_PERIOD_US))
        quota = int(cpus * CPU_PERIOD_US)
        if _write(dirs["cpu"] / "cpu.cfs_quota_us", str(quota)):
            group.enforced["cpus"] = f"cgroup v1 cpu.cfs_quota_us={quota}/{CPU_PERIOD_US}"
    return group


def _open_v2(name: str, cpus: float | None, memory_mb: int | None, pids_max: int | None) -> Group | None:
    parent = ROOT / _own_paths().get("", "/").lstrip("/")
    available = set((parent / "cgroup.controllers").read_text().split()) if parent.exists() else set()
    wanted = [c for c in ("memory", "pids", "cpu") if c in available]
    for controller in wanted:
        _write(parent / "cgroup.subtree_control", f"+{controller}")
    directory = parent / name
    try:
        directory.mkdir(exist_ok=True)
    except OSError:
        return None
    group = Group(dirs={"unified": directory}, version=2)
    if memory_mb is not None and _write(directory / "memory.max", str(memory_mb * 1024 * 1024)):
        _write(directory / "memory.swap.max", "0")
        group.enforced["memory"] = f"cgroup v2 memory.max={memory_mb}MiB"
    if pids_max is not None and _write(directory / "pids.max", str(pids_max)):
        group.enforced["pids"] = f"cgroup v2 pids.max={pids_max}"
    if cpus is not None and _write(directory / "cpu.max", f"{int(cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}"):
        group.enforced["cpus"] = f"cgroup v2 cpu.max={int(cpus * CPU_PERIOD_US)}/{CPU_PERIOD_US}"
    return group


def sweep_stale(min_age_sec: float = 600.0) -> int:
    """Remove trial groups whose engine is gone (killed with -9), killing anything still in them.

    A group's name carries its engine's owner tag; groups of live engines are left alone. Untagged
    groups (older versions) are removed when empty and older than ``min_age_sec``.
    """
    if os.geteuid() != 0:
        return 0
    own = _own_paths()
    v2 = (ROOT / "cgroup.controllers").exists()
    parents = [ROOT / own.get("", "/").lstrip("/")] if v2 else [
        ROOT / c / own.get(c, "/").lstrip("/") for c in _V1_CONTROLLERS]
    removed = 0
    now = time.time()
    for parent in parents:
        for directory in parent.glob("anchorage-*"):
            tag = directory.name.removeprefix("anchorage-").split("-", 1)[0]
            if "." in tag:
                if leftovers.owner_alive(tag):
                    continue
                Group(dirs={"unified" if v2 else "x": directory}, version=2 if v2 else 1).kill_all(1.0)
            else:
                with contextlib.suppress(OSError):
                    if now - directory.stat().st_mtime < min_age_sec:
                        continue
            with contextlib.suppress(OSError):
                directory.rmdir()
                removed += 1
    return removed


def open_group(trial_id: str, *, cpus: float | None, memory_mb: int | None, pids_max: int | None) -> Group | None:
    """Create the trial's group with the given limits; ``None`` when cgroups cannot be used here."""
    if os.geteuid() != 0:
        return None
    name = f"anchorage-{leftovers.owner_tag()}-{trial_id}"
    try:
        if (ROOT / "cgroup.controllers").exists():
            return _open_v2(name, cpus, memory_mb, pids_max)
        return _open_v1(name, cpus, memory_mb, pids_max)
    except OSError:
        return None
