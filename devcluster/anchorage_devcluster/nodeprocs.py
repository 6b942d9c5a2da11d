"""A real node's processes, supervised inside the node's network and mount namespaces.

Started by :meth:`anchorage_devcluster.realnode.RealNode.start` as
``ip netns exec <netns> python -m anchorage_devcluster.nodeprocs CONFIG.json``: ``ip netns exec`` gives this process
the node's network namespace and a mount namespace of its own, which every child shares — containerd and the kubelet
must see the same mounts (volumes the kubelet mounts are bind-mounted into containers by runc), and every mount of
the node vanishes with the namespace when the node's last process ends.

``ip netns exec`` mounts the namespace's own sysfs on ``/sys``, which hides the host's cgroup hierarchies; the
supervisor mounts them again, as the host has them (:func:`remount_cgroups`), before anything starts.

In order: containerd (waits for its socket), then the kubelet, kube-proxy and kube-router (its firewall controller
only: the NetworkPolicy engine). Each logs to ``<logs>/<node>-<program>.log``; one that exits is started again after a
growing pause (1 s, doubling to 30 s), as a node's service manager would. The supervisor itself and every program
run in the node's cgroup (``<cgroup>/system``; the kubelet puts pods under ``<cgroup>/kubepods``), so stopping the
node — SIGTERM here, or :func:`kill_cgroup` from outside for a node that is *lost* — ends everything the node started,
containers and their shims included. SIGTERM stops the programs, then kills what is left in the cgroup.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from anchorage_devcluster.lifetimes import die_with_parent

CGROUP_ROOT = Path("/sys/fs/cgroup")
SUBSYSTEM_FOR_PROCS = "pids"  # the hierarchy whose tree lists every process of the node


def cgroup_mounts() -> list[tuple[str, str, str]]:
    """The host's cgroup mounts under /sys/fs/cgroup as (type, options, path), read where they are visible."""
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, path, kind, options, *_ = line.split()
        if kind in ("cgroup", "cgroup2") and path.startswith(f"{CGROUP_ROOT}/"):
            kept = [o for o in options.split(",") if o not in ("rw", "ro", "relatime", "noatime", "nosuid", "nodev",
                                                                 "noexec", "seclabel")]
            found.append((kind, ",".join(kept), path))
    return found


def remount_cgroups(mounts: list[tuple[str, str, str]]) -> None:
    """Mount ``mounts`` (:func:`cgroup_mounts` of the host) again in this mount namespace: a tmpfs on /sys/fs/cgroup,
    then each hierarchy (mounting a v1 hierarchy with its controllers attaches to the existing one)."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "cgroup", str(CGROUP_ROOT)], check=True)
    for kind, options, path in mounts:
        Path(path).mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", kind, *(["-o", options] if options else []), kind, path], check=True)


def hierarchies() -> list[Path]:
    """The mounted cgroup hierarchies (v1 controllers, the named systemd one and the unified v2 one)."""
    return sorted(p for p in CGROUP_ROOT.iterdir() if p.is_dir() and (p / "cgroup.procs").exists())


def make_cgroup(relative: str) -> None:
    """``relative`` (e.g. ``anchorage-0-node-1/system``) in every hierarchy; a cpuset gets its parent's CPUs/nodes."""
    for hierarchy in hierarchies():
        path = hierarchy
        for part in Path(relative).parts:
            parent, path = path, path / part
            if not path.is_dir():
                path.mkdir()
                if hierarchy.name == "cpuset":
                    for name in ("cpuset.cpus", "cpuset.mems"):
                        (path / name).write_text((parent / name).read_text())


def join_cgroup(relative: str, pid: int) -> None:
    for hierarchy in hierarchies():
        (hierarchy / relative / "cgroup.procs").write_text(str(pid))


def cgroup_pids(relative: str) -> list[int]:
    """Every process in ``relative`` and below (from the pids hierarchy)."""
    top = CGROUP_ROOT / SUBSYSTEM_FOR_PROCS / relative
    found: list[int] = []
    if top.is_dir():
        for folder, _, _ in os.walk(top):
            try:
                found += [int(line) for line in Path(folder, "cgroup.procs").read_text().split()]
            except OSError:
                continue
    return found


def kill_cgroup(relative: str, *, spare: int | None = None, timeout: float = 30) -> None:
    """SIGKILL every process in ``relative`` and below but ``spare`` (frozen first, so nothing forks away)."""
    freezer = CGROUP_ROOT / "freezer" / relative / "freezer.state"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        victims = [pid for pid in cgroup_pids(relative) if pid != spare]
        if not victims:
            break
        frozen = spare is None and freezer.exists()
        if frozen:
            freezer.write_text("FROZEN")
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if frozen:
            freezer.write_text("THAWED")
        time.sleep(0.2)


def remove_cgroup(relative: str) -> None:
    """Remove ``relative`` and its descendants (deepest first) from every hierarchy; busy ones stay."""
    for hierarchy in hierarchies():
        top = hierarchy / relative
        if not top.is_dir():
            continue
        for folder, _, _ in sorted(os.walk(top), key=lambda entry: -len(entry[0])):
            with contextlib.suppress(OSError):
                os.rmdir(folder)


PROGRAMS = ("containerd", "kubelet", "kube-proxy", "kube-router")


class Supervisor:
    """The node's programs (see the module docstring)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.stopping = False

    def spawn(self, name: str, argv: list[str]) -> None:
        log = Path(self.config["logs"]) / f"{self.config['name']}-{name}.log"
        with log.open("ab") as handle:
            self.procs[name] = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                preexec_fn=die_with_parent)

    def wait_for_socket(self, path: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not Path(path).exists():
            if self.procs["containerd"].poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"containerd did not open {path} (see its log)")
            time.sleep(0.1)

    def run(self) -> int:
        config = self.config
        signal.signal(signal.SIGTERM, lambda *_: self.stop())
        signal.signal(signal.SIGINT, lambda *_: self.stop())
        argv = {name: config[name.replace("-", "_")] for name in PROGRAMS}
        self.spawn("containerd", argv["containerd"])
        self.wait_for_socket(config["containerd_socket"])
        for name in PROGRAMS[1:]:
            self.spawn(name, argv[name])
        pause = dict.fromkeys(PROGRAMS, 1.0)
        due: dict[str, float] = {}
        while not self.stopping:
            for name, proc in list(self.procs.items()):
                if proc.poll() is None or self.stopping:
                    continue
                if name not in due:
                    print(f"{config['name']}: {name} exited with {proc.returncode}; starting it again in "
                          f"{pause[name]:.0f} s", file=sys.stderr, flush=True)
                    due[name] = time.monotonic() + pause[name]
                    pause[name] = min(pause[name] * 2, 30.0)
                elif time.monotonic() >= due[name]:
                    del due[name]
                    self.spawn(name, argv[name])
            time.sleep(0.5)
        return 0

    def stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        running = [proc for proc in self.procs.values() if proc.poll() is None]
        for proc in running:  # all at once: nothing of a node waits for another part of it on the way down
            proc.terminate()
        deadline = time.monotonic() + 10
        for proc in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.1, deadline - time.monotonic()))
        kill_cgroup(self.config["cgroup"], spare=os.getpid())


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    config = json.loads(Path(args[0]).read_text())
    remount_cgroups([(kind, options, path) for kind, options, path in config["cgroup_mounts"]])
    join_cgroup(f"{config['cgroup']}/system", os.getpid())
    return Supervisor(config).run()


if __name__ == "__main__":
    sys.exit(main())
