"""Run one command in a sandbox: private network, read-only host, writable results, hard limits.

Called by :mod:`anchorage.runtime.local.trials` (one call per trial) and by ``bench/sandbox.py``.

Mechanisms, in order of preference (:func:`detect_mechanism`):

* ``bwrap`` — bubblewrap: new user/pid/net/ipc/uts/cgroup namespaces, an empty root with only the
  system directories (``/usr``, ``/etc``, the interpreter prefixes) bound read-only, ``/root/data``
  read-only, ``/root/results`` and ``/logs/agent`` bound writable from the trial's run folder, tmpfs
  ``/tmp`` and ``/root`` (size-capped), the root itself remounted read-only.
* ``unshare`` — util-linux ``unshare`` as root, same layout built by a small shell script
  (``mount --bind`` + ``chroot``), capabilities dropped with ``setpriv`` before the agent starts.
* ``none`` — only with the explicit ``--unsandboxed`` flag, announced loudly by the caller.

Network: the namespace has only loopback. When a gateway socket is given, it is bound at
``/run/anchorage/gateway.sock`` and the in-sandbox launcher (``inside/launcher.py``) relays
``127.0.0.1:GATEWAY_PORT`` to it, so agents use ``OPENAI_BASE_URL=http://127.0.0.1:PORT/v1`` (and
``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT``: Anthropic clients append ``/v1/messages`` themselves).

Limits: memory, pids and CPU through a per-trial cgroup (:mod:`.cgroups`) — with rlimits
(``RLIMIT_AS``, ``RLIMIT_NPROC``) and ``taskset`` as the fallback —, file size through
``RLIMIT_FSIZE``, wall time by SIGKILL of the whole process group and then of every process left in
the cgroup (the pid namespace dies with its init). Every outcome is returned as data; this module
raises only when no sandbox mechanism exists at all.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from anchorage.errors import InfrastructureError
from anchorage.runtime.local import cgroups

Mechanism = Literal["bwrap", "unshare", "none"]
Outcome = Literal["exited", "timeout", "oom", "sandbox_error"]

INSIDE_DIR = Path(__file__).resolve().parent / "inside"
INSIDE_MOUNT = "/.anchorage"
GATEWAY_SOCKET = "/run/anchorage/gateway.sock"
GATEWAY_PORT = 18080
DATA = "/root/data"
RESULTS = "/root/results"
LOGS = "/logs/agent"
SANDBOX_ERROR_EXIT = 125
_SYSTEM_DIRS = ("/usr", "/etc")
_ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib64", "/lib32")


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed run; ``None`` means "not limited"."""

    timeout_sec: float
    cpus: float | None = None
    memory_mb: int | None = None
    pids: int | None = 1024
    result_max_bytes: int | None = None
    file_max_bytes: int | None = None
    tmp_mb: int = 1024


@dataclass(frozen=True)
class SandboxSpec:
    """What to run and what it may see. Host paths are bound at the fixed in-sandbox paths."""

    argv: list[str]
    results_dir: Path
    logs_dir: Path
    limits: SandboxLimits
    data_dir: Path | None = None
    ro_binds: dict[str, Path] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    gateway_socket: Path | None = None
    cwd: str = "/root"


@dataclass
class SandboxResult:
    """How the run ended. ``outcome`` is what happened to the process; ``oversized`` is about results."""

    outcome: Outcome
    exit_code: int | None
    wall_sec: float
    mechanism: Mechanism
    result_bytes: int = 0
    oversized: bool = False
    enforced: dict[str, str] = field(default_factory=dict)
    detail: str = ""
    killed_processes: int = 0


def detect_mechanism(*, unsandboxed: bool = False) -> Mechanism:
    """The best sandbox available here; raises :class:`InfrastructureError` naming the fix otherwise."""
    if unsandboxed:
        return "none"
    if shutil.which("bwrap") and _bwrap_works():
        return "bwrap"
    if os.geteuid() == 0 and shutil.which("unshare") and shutil.which("setpriv"):
        return "unshare"
    raise InfrastructureError(
        "no sandbox is available: bubblewrap is not installed (or cannot create namespaces here) "
        "and the engine is not running as root with util-linux 'unshare'",
        hint="install bubblewrap (apt-get install bubblewrap / dnf install bubblewrap), or run as root; "
        "running agents unsandboxed needs the explicit --unsandboxed flag",
    )


_BWRAP_OK: bool | None = None


def _bwrap_works() -> bool:
    global _BWRAP_OK
    if _BWRAP_OK is None:
        probe = ["bwrap", "--unshare-all", "--ro-bind", "/usr", "/usr", *_root_link_args(), "--", "/usr/bin/true"]
        _BWRAP_OK = subprocess.run(probe, capture_output=True, check=False).returncode == 0
    return _BWRAP_OK


def _root_link_args() -> list[str]:
    args: list[str] = []
    for link in _ROOT_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    return args


def python_prefixes() -> list[str]:
    """Interpreter folders the sandbox must see so Python agents (and the launcher) run."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    real_exe = os.path.realpath(sys.executable)
    prefixes.add(str(Path(real_exe).parent.parent))
    return sorted(p for p in prefixes if not p.startswith(_SYSTEM_DIRS))


def sandbox_python() -> str:
    """The interpreter agents' ``python3`` resolves to (the engine's environment, numpy & co included)."""
    return str(Path(sys.prefix) / "bin" / "python3")


def sandbox_path() -> str:
    """The PATH agents see: the engine's environment first (python3 with numpy & co), then the system."""
    return ":".join([str(Path(sys.prefix) / "bin"), str(Path(sys.base_prefix) / "bin"), "/usr/local/bin", "/usr/bin", "/bin"])


def sandbox_env(spec: SandboxSpec, mechanism: Mechanism, port: int = GATEWAY_PORT) -> dict[str, str]:
    """The agent's whole environment: nothing is inherited from the engine."""
    inside = mechanism != "none"
    path = sandbox_path()
    env = {
        "PATH": path,
        "HOME": "/root" if inside else str(spec.results_dir.parent),
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "MPLBACKEND": "Agg",
        "PYTHONDONTWRITEBYTECODE": "1",
        "ANCHORAGE_DATA_DIR": DATA if inside else str(spec.data_dir or ""),
        "ANCHORAGE_RESULTS_DIR": RESULTS if inside else str(spec.results_dir),
        "ANCHORAGE_LOGS_DIR": LOGS if inside else str(spec.logs_dir),
    }
    if spec.gateway_socket is not None:
        env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
        env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{port}"  # Anthropic clients append /v1/messages
    env.update(spec.env)
    return env


def _bwrap_argv(spec: SandboxSpec) -> list[str]:
    limits = spec.limits
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--hostname", "anchorage"]
    for directory in _SYSTEM_DIRS:
        args += ["--ro-bind", directory, directory]
    args += _root_link_args()
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--size", str(limits.tmp_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    args += ["--size", str(limits.tmp_mb * 1024 * 1024), "--tmpfs", "/root"]
    for prefix in python_prefixes():
        args += ["--ro-bind", prefix, prefix]
    if spec.data_dir is not None:
        args += ["--ro-bind", str(spec.data_dir), DATA]
    else:
        args += ["--dir", DATA]
    args += ["--bind", str(spec.results_dir), RESULTS, "--bind", str(spec.logs_dir), LOGS]
    args += ["--ro-bind", str(INSIDE_DIR), INSIDE_MOUNT]
    for target, source in sorted(spec.ro_binds.items()):
        args += ["--ro-bind", str(source), target]
    if spec.gateway_socket is not None:
        args += ["--ro-bind", str(spec.gateway_socket), GATEWAY_SOCKET]
    args += ["--remount-ro", "/", "--chdir", spec.cwd, "--"]
    return args


# The unshare mechanism: the same layout as bwrap, built by hand inside new namespaces, then chroot
# and drop every capability. Arguments: $1 root dir, then "KIND SRC DST" triples, "--", the command.
_UNSHARE_SCRIPT = r"""
set -e
AGENT_PATH=$PATH; export PATH=/usr/sbin:/usr/bin:/sbin:/bin; CHROOT=$(command -v chroot)
R=$1; shift
mount --make-rprivate /
mount -t tmpfs -o size=64m tmpfs "$R"
ip link set lo up 2>/dev/null || true
while [ "$1" != "--" ]; do
  kind=$1; src=$2; dst=$R$3; shift 3
  case $kind in
    ro|rw) if [ -d "$src" ]; then mkdir -p "$dst"; else mkdir -p "$(dirname "$dst")"; : > "$dst"; fi
           mount --rbind "$src" "$dst"
           [ "$kind" = ro ] && mount -o remount,bind,ro "$dst" ;;
    link) ln -s "$src" "$dst" ;;
    tmpfs) mkdir -p "$dst"; mount -t tmpfs -o "size=$src" tmpfs "$dst" ;;
    dir) mkdir -p "$dst" ;;
  esac
done
shift
mkdir -p "$R/proc" "$R/dev"; mount -t proc proc "$R/proc"
for d in null zero full random urandom tty; do : > "$R/dev/$d"; mount --bind "/dev/$d" "$R/dev/$d"; done
mkdir -p "$R/dev/shm"; mount -t tmpfs -o size=64m tmpfs "$R/dev/shm"
mount -o remount,ro "$R"
cd "$R"
export PATH=$AGENT_PATH
exec "$CHROOT" "$R" /usr/bin/setpriv --no-new-privs --inh-caps=-all --bounding-set=-all -- \
  /bin/sh -c 'cd "$0" && exec "$@"' "$CHDIR" "$@"
"""


def _unshare_argv(spec: SandboxSpec, root: Path) -> list[str]:
    limits = spec.limits
    triples: list[str] = []
    for directory in _SYSTEM_DIRS:
        triples += ["ro", directory, directory]
    for link in _ROOT_LINKS:
        if os.path.islink(link):
            triples += ["link", os.readlink(link), link]
    triples += ["tmpfs", f"{limits.tmp_mb}m", "/tmp", "tmpfs", f"{limits.tmp_mb}m", "/root"]
    for prefix in python_prefixes():
        triples += ["ro", prefix, prefix]
    triples += ["ro", str(spec.data_dir), DATA] if spec.data_dir is not None else ["dir", "-", DATA]
    triples += ["rw", str(spec.results_dir), RESULTS, "rw", str(spec.logs_dir), LOGS]
    triples += ["ro", str(INSIDE_DIR), INSIDE_MOUNT]
    for target, source in sorted(spec.ro_binds.items()):
        triples += ["ro", str(source), target]
    if spec.gateway_socket is not None:
        triples += ["ro", str(spec.gateway_socket), GATEWAY_SOCKET]
    return [
        "unshare", "--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child",
        "/bin/sh", "-c", _UNSHARE_SCRIPT, "sandbox", str(root), *triples, "--",
    ]


def _agent_argv(spec: SandboxSpec, mechanism: Mechanism, host_port: int | None) -> list[str]:
    if spec.gateway_socket is None:
        return list(spec.argv)
    launcher = f"{INSIDE_MOUNT}/launcher.py" if mechanism != "none" else str(INSIDE_DIR / "launcher.py")
    port = GATEWAY_PORT if host_port is None else host_port
    socket_path = GATEWAY_SOCKET if mechanism != "none" else str(spec.gateway_socket)
    return [sandbox_python(), "-I", "-S", launcher, str(port), socket_path, "--", *spec.argv]


# Joins the trial's cgroups (one cgroup.procs file per argument before "--"), then execs the rest.
_JOIN = 'for f; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; shift; done; shift; exec "$@"'


def _rlimit_argv(limits: SandboxLimits, group: cgroups.Group | None, enforced: dict[str, str]) -> list[str]:
    args = ["prlimit"]
    if limits.file_max_bytes is not None:
        args.append(f"--fsize={limits.file_max_bytes}")
        enforced["file_size"] = f"RLIMIT_FSIZE={limits.file_max_bytes}"
    controlled = group.enforced if group is not None else {}
    if limits.memory_mb is not None and "memory" not in controlled:
        args.append(f"--as={limits.memory_mb * 1024 * 1024}")
        enforced["memory"] = f"RLIMIT_AS={limits.memory_mb}MiB (no cgroup memory controller)"
    if limits.pids is not None and "pids" not in controlled:
        args.append(f"--nproc={limits.pids}")
        enforced["pids"] = f"RLIMIT_NPROC={limits.pids} (no cgroup pids controller)"
    args.append("--")
    if limits.cpus is not None and "cpus" not in controlled and shutil.which("taskset"):
        count = max(1, min(os.cpu_count() or 1, math.ceil(limits.cpus)))
        args += ["taskset", "-c", f"0-{count - 1}"]
        enforced["cpus"] = f"taskset cores 0-{count - 1} (no cgroup cpu controller)"
    return args if len(args) > 2 else []


def results_size(directory: Path) -> int:
    """Total bytes of regular files under ``directory`` (symlinks not followed)."""
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def build_command(
    spec: SandboxSpec, mechanism: Mechanism, group: cgroups.Group | None, enforced: dict[str, str], scratch: Path,
    host_port: int | None = None,
) -> list[str]:
    """The full host argv: join cgroups → rlimits → sandbox → (launcher →) agent."""
    agent = _agent_argv(spec, mechanism, host_port)
    if mechanism == "bwrap":
        inner = _bwrap_argv(spec) + agent
    elif mechanism == "unshare":
        inner = _unshare_argv(spec, scratch) + agent
    else:
        inner = agent
    command = _rlimit_argv(spec.limits, group, enforced) + inner
    if group is not None:
        command = ["/bin/sh", "-c", _JOIN, "join", *map(str, group.procs_files), "--", *command]
    return command


def run(spec: SandboxSpec, *, mechanism: Mechanism, trial_id: str | None = None) -> SandboxResult:
    """Run ``spec`` to completion (or to its timeout) and say how it ended. Never raises for agent behaviour."""
    ident = trial_id or uuid.uuid4().hex[:12]
    limits = spec.limits
    group = None
    if mechanism != "none":
        group = cgroups.open_group(ident, cpus=limits.cpus, memory_mb=limits.memory_mb, pids_max=limits.pids)
    enforced: dict[str, str] = dict(group.enforced) if group is not None else {}
    scratch = Path("/tmp") / f"anchorage-root-{ident}"
    if mechanism == "unshare":
        scratch.mkdir(parents=True, exist_ok=True)
    host_port = _free_port() if mechanism == "none" and spec.gateway_socket is not None else None
    env = sandbox_env(spec, mechanism, host_port or GATEWAY_PORT)
    if mechanism == "unshare":
        env["CHDIR"] = spec.cwd
    command = build_command(spec, mechanism, group, enforced, scratch, host_port)
    enforced["wall_time"] = f"SIGKILL of the process group after {limits.timeout_sec:g}s"
    started = time.monotonic()
    try:
        return _supervise(spec, command, env, mechanism, group, enforced, started)
    finally:
        if group is not None:
            group.kill_all()
            group.remove()
        if mechanism == "unshare":
            with contextlib.suppress(OSError):
                scratch.rmdir()


def _supervise(
    spec: SandboxSpec,
    command: list[str],
    env: dict[str, str],
    mechanism: Mechanism,
    group: cgroups.Group | None,
    enforced: dict[str, str],
    started: float,
) -> SandboxResult:
    stdout_path, stderr_path = spec.logs_dir / "stdout.log", spec.logs_dir / "stderr.log"
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        try:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env,
                start_new_session=True, close_fds=True,
                cwd=spec.results_dir if mechanism == "none" else None,
            )
        except OSError as exc:
            return SandboxResult("sandbox_error", None, time.monotonic() - started, mechanism, detail=str(exc))
        # A timer kills the group at the deadline while this thread blocks in waitpid: Popen.wait(timeout=...)
        # polls with sleeps of up to 50 ms, which would add that much latency to every trial.
        expired = threading.Event()

        def _expire() -> None:
            expired.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            if group is not None:
                group.kill_all()

        timer = threading.Timer(spec.limits.timeout_sec, _expire)
        timer.daemon = True
        timer.start()
        try:
            code: int | None = process.wait()
        finally:
            timer.cancel()
        timed_out = expired.is_set()
        if timed_out:
            code = None
        killed = group.kill_all() if group is not None else 0
    wall = time.monotonic() - started
    result = SandboxResult("exited", code, wall, mechanism, enforced=enforced, killed_processes=killed)
    result.result_bytes = results_size(spec.results_dir)
    cap = spec.limits.result_max_bytes
    result.oversized = cap is not None and result.result_bytes > cap
    if timed_out:
        result.outcome, result.detail = "timeout", f"killed after {spec.limits.timeout_sec:g}s"
    elif group is not None and group.oom_killed():
        result.outcome, result.detail = "oom", "the kernel's OOM killer acted in the trial's memory cgroup"
    elif _sandbox_failed(code, stderr_path, mechanism):
        result.outcome, result.detail = "sandbox_error", _tail(stderr_path)
    elif code is not None and "memory" in enforced and "RLIMIT_AS" in enforced["memory"] and _says_oom(stderr_path):
        result.outcome, result.detail = "oom", "allocation failed under RLIMIT_AS"
    return result


def _tail(path: Path, limit: int = 2000) -> str:
    with contextlib.suppress(OSError):
        return path.read_bytes()[-limit:].decode("utf-8", "replace").strip()
    return ""


def _sandbox_failed(code: int | None, stderr_path: Path, mechanism: Mechanism) -> bool:
    """The sandbox itself (not the agent) failed to start: its own diagnostics and exit status."""
    if code == SANDBOX_ERROR_EXIT:
        return True
    if mechanism == "bwrap" and code == 1:
        head = _tail(stderr_path, 4096)
        return head.startswith("bwrap:")
    return False


def _says_oom(stderr_path: Path) -> bool:
    text = _tail(stderr_path, 8192)
    return "MemoryError" in text or "Cannot allocate memory" in text or "out of memory" in text.lower()
