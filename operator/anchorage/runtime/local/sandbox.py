"""Run one command in a sandbox: unprivileged, no capabilities, private network, read-only host, quotas.

Called by :mod:`anchorage.runtime.local.trials` (one call per trial), :mod:`.verifying` (one per model
call of a panel) and ``bench/sandbox.py``.

Mechanisms, in order of preference (:func:`detect_mechanism`):

* ``bwrap`` — bubblewrap: new user/pid/net/ipc/uts/cgroup namespaces; the agent is ``agent``
  (uid/gid 1000) in its own user namespace with every capability dropped and further user namespaces
  disabled (``--disable-userns`` where the kernel allows it); an empty root with only ``/usr`` and the
  interpreter prefixes bound read-only, a synthetic ``/etc`` (:mod:`.identity`) instead of the host's,
  ``/proc/sys`` read-only, ``/root/data`` read-only, ``/root/results`` and ``/logs/agent`` writable,
  tmpfs ``/tmp`` and ``/root`` (the agent's HOME, size-capped), the root itself remounted read-only.
* ``unshare`` — util-linux ``unshare`` as root, the same layout built by a small shell script
  (``mount --bind`` + ``chroot``); the agent runs as the unprivileged host id 60999 with no
  capabilities (``setpriv``), since there is no user namespace to map it.
* ``none`` — only with the explicit ``--unsandboxed`` flag, announced loudly by the caller.

Network: the namespace has only loopback. When a gateway socket is given, it is bound at
``/run/anchorage/gateway.sock`` and the in-sandbox launcher (``inside/launcher.py``) relays
``127.0.0.1:GATEWAY_PORT`` to it, so agents use ``OPENAI_BASE_URL=http://127.0.0.1:PORT/v1`` (and
``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT``: Anthropic clients append ``/v1/messages`` themselves).

Limits: memory, pids and CPU through a per-trial cgroup (:mod:`.cgroups`), written from outside and
read back after the run — with rlimits (``RLIMIT_AS``, ``RLIMIT_NPROC``) and ``taskset`` as the
fallback —; file size through ``RLIMIT_FSIZE``; the results and log folders on size- and
inode-limited tmpfs mounts while the agent runs (:mod:`.quotas`); wall time by SIGKILL of the whole
process group and then of every process left in the cgroup (the pid namespace dies with its init).

Evidence: the agent never decides that the platform failed. The sandbox is *started* when its first
program inside — our own start wrapper or launcher, before any agent code — writes ``started`` to the
status pipe the engine gave it as stdin (then replaces stdin by ``/dev/null``). Only a sandbox that
never reported its start is a ``sandbox_error``; once started, every exit code and every byte of
output is the agent's. Kernel counters of the cgroup (OOM kills, refused forks) are the other
evidence. Every outcome is returned as data; this module raises only when no sandbox mechanism exists.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from anchorage import confined
from anchorage.errors import InfrastructureError
from anchorage.runtime.local import cgroups, identity, quotas
from anchorage.runtime.local.identity import Identity
from anchorage.trials.agents.templating import expand_references

Mechanism = Literal["bwrap", "unshare", "none"]
Outcome = Literal["exited", "timeout", "oom", "sandbox_error"]

INSIDE_DIR = Path(__file__).resolve().parent / "inside"
INSIDE_MOUNT = "/.anchorage"
GATEWAY_SOCKET = "/run/anchorage/gateway.sock"
GATEWAY_PORT = 18080
DATA = "/root/data"
RESULTS = "/root/results"
LOGS = "/logs/agent"
STARTED = b"started"
_SYSTEM_DIRS = ("/usr",)
_ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib64", "/lib32")
MIB = 1024 * 1024

# The first program inside the sandbox when there is no launcher: report the start on the status pipe
# (stdin), give the agent /dev/null as stdin instead, then become the agent.
_START = 'printf started >&0 && exec 0</dev/null && exec "$@"'


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
    result_max_files: int = 10_000
    log_max_bytes: int = 256 * MIB
    log_max_files: int = 1_000


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
    expand_references: bool = False
    """Expand Kubernetes-style ``$(NAME)`` references in ``argv`` against the agent's environment, as the
    kubelet does in a pod (agent plans: :func:`anchorage.trials.agents.templating.expand_references`)."""


@dataclass
class SandboxResult:
    """How the run ended. ``outcome`` is what happened to the process; ``oversized`` is about results.

    ``started`` is the sandbox's own report that its setup finished and the agent was started (the status
    pipe); ``evidence`` holds what decided the outcome, all of it out of the agent's reach: the status
    pipe, the cgroup's kernel counters, the limits read back from the cgroup, the engine's own errors.
    """

    outcome: Outcome
    exit_code: int | None
    wall_sec: float
    mechanism: Mechanism
    result_bytes: int = 0
    oversized: bool = False
    enforced: dict[str, str] = field(default_factory=dict)
    detail: str = ""
    killed_processes: int = 0
    started: bool = False
    evidence: dict[str, Any] = field(default_factory=dict)
    user: str = ""
    quotas: dict[str, Any] = field(default_factory=dict)
    logs_oversized: bool = False
    oversized_detail: str = ""


@dataclass(frozen=True)
class _Bwrap:
    works: bool
    disable_userns: bool


_BWRAP: _Bwrap | None = None


def detect_mechanism(*, unsandboxed: bool = False) -> Mechanism:
    """The best sandbox available here; raises :class:`InfrastructureError` naming the fix otherwise."""
    if unsandboxed:
        return "none"
    if shutil.which("bwrap") and _bwrap().works:
        return "bwrap"
    if os.geteuid() == 0 and shutil.which("unshare") and shutil.which("setpriv"):
        return "unshare"
    raise InfrastructureError(
        "no sandbox is available: bubblewrap is not installed (or cannot create user namespaces here) "
        "and the engine is not running as root with util-linux 'unshare'",
        hint="install bubblewrap (apt-get install bubblewrap / dnf install bubblewrap), or run as root; "
        "running agents unsandboxed needs the explicit --unsandboxed flag",
    )


def _bwrap() -> _Bwrap:
    """Probe once whether bubblewrap can make the agent's user namespace (and disable nested ones) here."""
    global _BWRAP
    if _BWRAP is None:
        base = ["bwrap", "--unshare-all", "--unshare-user", "--uid", str(identity.SANDBOX_ID), "--gid",
                str(identity.SANDBOX_ID), "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr", *_root_link_args()]
        tail = ["--", "/usr/bin/true"]
        with_disable = _probe([*base, "--disable-userns", *tail])
        _BWRAP = _Bwrap(with_disable or _probe([*base, *tail]), with_disable)
    return _BWRAP


def _probe(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, check=False, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _root_link_args() -> list[str]:
    return list(_root_links())


@functools.lru_cache(maxsize=1)
def _root_links() -> tuple[str, ...]:
    args: list[str] = []
    for link in _ROOT_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    return tuple(args)


def agent_identity(mechanism: Mechanism) -> Identity:
    """Who the agent is for ``mechanism`` (``none``: whoever runs the engine)."""
    if mechanism == "bwrap":
        return identity.bwrap_identity()
    if mechanism == "unshare":
        return identity.fallback_identity()
    return Identity(os.getuid(), os.getgid(), os.getuid(), os.getgid(), False)


def python_prefixes() -> list[str]:
    """Interpreter folders the sandbox must see so Python agents (and the launcher) run."""
    return list(_python_prefixes())


@functools.lru_cache(maxsize=1)
def _python_prefixes() -> tuple[str, ...]:
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    real_exe = os.path.realpath(sys.executable)
    prefixes.add(str(Path(real_exe).parent.parent))
    return tuple(sorted(p for p in prefixes if not p.startswith(_SYSTEM_DIRS)))


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
        "HOME": identity.HOME if inside else str(spec.results_dir.parent),
        "USER": identity.AGENT_USER,
        "LOGNAME": identity.AGENT_USER,
        "LANG": "C.UTF-8",
        "TZ": "UTC",
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


def _bwrap_argv(spec: SandboxSpec, etc_dir: Path) -> list[str]:
    limits = spec.limits
    ident = identity.bwrap_identity()
    args = ["bwrap", "--unshare-all", "--unshare-user", "--uid", str(ident.uid), "--gid", str(ident.gid)]
    if _bwrap().disable_userns:
        args.append("--disable-userns")
    args += ["--cap-drop", "ALL", "--die-with-parent", "--new-session", "--hostname", identity.HOSTNAME]
    for directory in _SYSTEM_DIRS:
        args += ["--ro-bind", directory, directory]
    args += _root_link_args()
    args += ["--ro-bind", str(etc_dir), "/etc"]
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys",
             "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger", "--dev", "/dev"]
    args += ["--size", str(limits.tmp_mb * MIB), "--tmpfs", "/tmp"]
    args += ["--perms", "0700", "--size", str(limits.tmp_mb * MIB), "--tmpfs", identity.HOME]
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


# The unshare mechanism: the same layout as bwrap, built by hand inside new namespaces, then chroot and
# become the unprivileged agent id with no capabilities. Arguments: $1 root dir, $2 uid, $3 gid, then
# "KIND SRC DST" triples, "--", the command.
_UNSHARE_SCRIPT = r"""
set -e
AGENT_PATH=$PATH; export PATH=/usr/sbin:/usr/bin:/sbin:/bin; CHROOT=$(command -v chroot)
R=$1; U=$2; G=$3; shift 3
mount --make-rprivate /
mount -t tmpfs -o size=64m tmpfs "$R"
ip link set lo up 2>/dev/null || true
while [ "$1" != "--" ]; do
  kind=$1; src=$2; dst=$R$3; shift 3
  case $kind in
    ro|rw) if [ -d "$src" ]; then mkdir -p "$dst"; else mkdir -p "$(dirname "$dst")"; : > "$dst"; fi
           mount --rbind "$src" "$dst"
           [ "$kind" = ro ] && mount -o remount,bind,ro,nosuid,nodev "$dst" ;;
    link) ln -s "$src" "$dst" ;;
    tmpfs) mkdir -p "$dst"; mount -t tmpfs -o "nosuid,nodev,$src" tmpfs "$dst" ;;
    dir) mkdir -p "$dst" ;;
  esac
done
shift
mkdir -p "$R/proc" "$R/dev"; mount -t proc -o nosuid,nodev,noexec proc "$R/proc"
mount --bind "$R/proc/sys" "$R/proc/sys"; mount -o remount,bind,ro "$R/proc/sys"
for d in null zero full random urandom tty; do : > "$R/dev/$d"; mount --bind "/dev/$d" "$R/dev/$d"; done
mkdir -p "$R/dev/shm"; mount -t tmpfs -o nosuid,nodev,size=64m,mode=1777 tmpfs "$R/dev/shm"
mount -o remount,ro "$R"
cd "$R"
export PATH=$AGENT_PATH
exec "$CHROOT" "$R" /usr/bin/setpriv --reuid="$U" --regid="$G" --clear-groups --no-new-privs \
  --inh-caps=-all --bounding-set=-all -- /bin/sh -c 'cd "$0" && exec "$@"' "$CHDIR" "$@"
"""


def _unshare_argv(spec: SandboxSpec, root: Path, etc_dir: Path) -> list[str]:
    limits = spec.limits
    ident = identity.fallback_identity()
    triples: list[str] = []
    for directory in _SYSTEM_DIRS:
        triples += ["ro", directory, directory]
    for link in _ROOT_LINKS:
        if os.path.islink(link):
            triples += ["link", os.readlink(link), link]
    triples += ["ro", str(etc_dir), "/etc"]
    triples += ["tmpfs", f"size={limits.tmp_mb}m,mode=1777", "/tmp",
                "tmpfs", f"size={limits.tmp_mb}m,mode=0700,uid={ident.uid},gid={ident.gid}", identity.HOME]
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
        "/bin/sh", "-c", _UNSHARE_SCRIPT, "sandbox", str(root), str(ident.uid), str(ident.gid), *triples, "--",
    ]


def _agent_argv(spec: SandboxSpec, mechanism: Mechanism, host_port: int | None) -> list[str]:
    """The first program inside: the launcher (gateway relay) or the start wrapper, then the agent."""
    if spec.gateway_socket is None:
        return ["/bin/sh", "-c", _START, "anchorage-start", *spec.argv]
    launcher = f"{INSIDE_MOUNT}/launcher.py" if mechanism != "none" else str(INSIDE_DIR / "launcher.py")
    port = GATEWAY_PORT if host_port is None else host_port
    socket_path = GATEWAY_SOCKET if mechanism != "none" else str(spec.gateway_socket)
    return [sandbox_python(), "-I", "-S", launcher, str(port), socket_path, "--", *spec.argv]


# Joins the trial's cgroups (one cgroup.procs file per argument before "--"), then execs the rest. A
# failure here ends before the sandbox starts, so the status pipe stays silent: a sandbox_error.
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


def results_size(directory: Path, max_entries: int = 100_000) -> int:
    """Total apparent bytes of the regular files under ``directory`` (links not followed, walk bounded)."""
    return confined.usage(directory, max_entries=max_entries).bytes


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def build_command(
    spec: SandboxSpec, mechanism: Mechanism, group: cgroups.Group | None, enforced: dict[str, str], scratch: Path,
    host_port: int | None = None,
) -> list[str]:
    """The full host argv: join cgroups → rlimits → sandbox → launcher or start wrapper → agent."""
    agent = _agent_argv(spec, mechanism, host_port)
    if mechanism == "bwrap":
        inner = _bwrap_argv(spec, identity.synthetic_etc(identity.SANDBOX_ID, identity.SANDBOX_ID)) + agent
    elif mechanism == "unshare":
        ident = identity.fallback_identity()
        inner = _unshare_argv(spec, scratch, identity.synthetic_etc(ident.uid, ident.gid)) + agent
    else:
        inner = agent
    command = _rlimit_argv(spec.limits, group, enforced) + inner
    if group is not None:
        command = ["/bin/sh", "-c", _JOIN, "join", *map(str, group.procs_files), "--", *command]
    return command


@dataclass
class _Quotas:
    """The quota tmpfs of one run (or, where none could be had, why), by folder name."""

    mounts: dict[str, quotas.QuotaMount | str]
    folders: dict[str, Path]
    limits: dict[str, quotas.Quota]

    def bound(self, name: str) -> Path:
        """What the sandbox binds for a folder: its quota tmpfs, else the trial's folder itself."""
        mounted = self.mounts[name]
        return mounted.path if isinstance(mounted, quotas.QuotaMount) else self.folders[name]

    def release(self) -> None:
        for item in self.mounts.values():
            if isinstance(item, quotas.QuotaMount):
                item.release()


def _inner_first(folders: dict[str, Path]) -> list[str]:
    """Folder names, a folder inside another first (a model call's results sit in its log folder)."""
    return sorted(folders, key=lambda name: -len(folders[name].resolve().parts))


def _open_quotas(spec: SandboxSpec, mechanism: Mechanism, ident: Identity) -> _Quotas:
    limits = spec.limits
    results_cap = limits.result_max_bytes or limits.file_max_bytes or 512 * MIB
    wanted = {"results": quotas.Quota(results_cap, limits.result_max_files),
              "logs": quotas.Quota(limits.log_max_bytes, limits.log_max_files)}
    folders = {"results": spec.results_dir, "logs": spec.logs_dir}
    if mechanism == "none":
        return _Quotas(dict.fromkeys(folders, "unsandboxed: sizes are checked after the run"), folders, wanted)
    mounts: dict[str, quotas.QuotaMount | str] = {
        name: quotas.acquire(folders[name], wanted[name], uid=ident.host_uid, gid=ident.host_gid) for name in folders}
    if os.geteuid() == 0 and ident.host_uid != 0:  # a folder without its tmpfs must still be the agent's
        for name, mounted in mounts.items():
            if not isinstance(mounted, quotas.QuotaMount):
                with contextlib.suppress(OSError):
                    os.chown(folders[name], ident.host_uid, ident.host_gid)
        if spec.gateway_socket is not None:  # only the socket is bound in; its folder (0700) keeps others out
            with contextlib.suppress(OSError):
                os.chmod(spec.gateway_socket, 0o666)
    return _Quotas(mounts, folders, wanted)


def run(spec: SandboxSpec, *, mechanism: Mechanism, trial_id: str | None = None) -> SandboxResult:
    """Run ``spec`` to completion (or to its timeout) and say how it ended. Never raises for agent behaviour."""
    ident = trial_id or uuid.uuid4().hex[:12]
    limits = spec.limits
    who = agent_identity(mechanism)
    group = None
    if mechanism != "none":
        group = cgroups.open_group(ident, cpus=limits.cpus, memory_mb=limits.memory_mb, pids_max=limits.pids)
    enforced: dict[str, str] = dict(group.enforced) if group is not None else {}
    scratch = Path("/tmp") / f"anchorage-root-{ident}"
    if mechanism == "unshare":
        scratch.mkdir(parents=True, exist_ok=True)
    host_port = _free_port() if mechanism == "none" and spec.gateway_socket is not None else None
    env = sandbox_env(spec, mechanism, host_port or GATEWAY_PORT)
    if spec.expand_references:
        spec = replace(spec, argv=[expand_references(part, env) for part in spec.argv])
    if mechanism == "unshare":
        env["CHDIR"] = spec.cwd
    mounts = _open_quotas(spec, mechanism, who)
    started = time.monotonic()
    try:
        bound = replace(spec, results_dir=mounts.bound("results"), logs_dir=mounts.bound("logs"))
        command = build_command(bound, mechanism, group, enforced, scratch, host_port)
        enforced["wall_time"] = f"SIGKILL of the process group after {limits.timeout_sec:g}s"
        result = _supervise(bound, command, env, mechanism, group, enforced, started)
        result.user = who.describe()
        if group is not None:  # _wait killed everything left in the group: nothing writes while we copy out
            result.evidence["cgroup_events"] = group.events()
            result.evidence["cgroup_limits_after"] = group.read_limits()
        _finish_quotas(result, mounts)
        return result
    finally:
        mounts.release()
        if group is not None:
            group.kill_all()
            group.remove()
        if mechanism == "unshare":
            with contextlib.suppress(OSError):
                scratch.rmdir()


def _finish_quotas(result: SandboxResult, mounts: _Quotas) -> None:
    """Measure (and copy out of their tmpfs, inner folders first) the results and logs; decide ``oversized``."""
    verdicts: dict[str, quotas.Collected] = {}
    for name in _inner_first(mounts.folders):
        mounted, quota = mounts.mounts[name], mounts.limits[name]
        if isinstance(mounted, quotas.QuotaMount):
            verdicts[name] = mounted.collect(keep_tail=name == "logs")
        else:
            verdicts[name] = quotas.check_unmounted(mounts.folders[name], quota)
        collected = verdicts[name]
        result.quotas[name] = {
            "mechanism": "tmpfs" if collected.mounted else str(mounted),
            "max_bytes": quota.max_bytes, "max_entries": quota.max_entries,
            "bytes": collected.usage.bytes, "entries": collected.usage.entries, "over": collected.over,
            **({"why": collected.why} if collected.why else {}),
            **({"copy_note": collected.copy_note} if collected.copy_note else {}),
        }
    results, logs = verdicts["results"], verdicts["logs"]
    result.result_bytes = results.usage.bytes
    result.oversized = results.over
    result.logs_oversized = logs.over
    if results.over:
        result.oversized_detail = f"/root/results holds {results.why}"
    elif logs.over:
        result.oversized_detail = f"{LOGS} holds {logs.why}"


def _status_pipe() -> tuple[int, int]:
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    return read_end, write_end


def _read_status(fd: int) -> bytes:
    """What the sandbox reported on its status pipe (every writer has exited: read to EOF, bounded)."""
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    with contextlib.suppress(BlockingIOError, OSError):
        while len(chunks) < 4:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def _supervise(
    spec: SandboxSpec,
    command: list[str],
    env: dict[str, str],
    mechanism: Mechanism,
    group: cgroups.Group | None,
    enforced: dict[str, str],
    started: float,
) -> SandboxResult:
    status_read, status_write = _status_pipe()
    try:
        stdout = os.open(spec.logs_dir / "stdout.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        stderr = os.open(spec.logs_dir / "stderr.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        os.close(status_read)
        os.close(status_write)
        return SandboxResult("sandbox_error", None, time.monotonic() - started, mechanism,
                             detail=f"cannot create the agent's log files: {exc}", evidence={"engine_error": str(exc)})
    try:
        try:
            process = subprocess.Popen(
                command, stdin=status_write, stdout=stdout, stderr=stderr, env=env,
                start_new_session=True, close_fds=True,
                cwd=spec.results_dir if mechanism == "none" else None,
            )
        except OSError as exc:
            return SandboxResult("sandbox_error", None, time.monotonic() - started, mechanism, detail=str(exc),
                                 evidence={"engine_error": f"{type(exc).__name__}: {exc}"})
        finally:
            os.close(status_write)
            os.close(stdout)
            os.close(stderr)
        code, timed_out, killed = _wait(process, spec.limits.timeout_sec, group)
        status = _read_status(status_read)
    finally:
        os.close(status_read)
    wall = time.monotonic() - started
    result = SandboxResult("exited", code, wall, mechanism, enforced=enforced, killed_processes=killed)
    result.started = status.startswith(STARTED)
    result.evidence["status_pipe"] = "started" if result.started else "silent (the sandbox never started the agent)"
    oom_kills = group.events().get("oom_kill", 0) if group is not None else 0
    if not result.started:
        result.outcome = "sandbox_error"
        result.detail = _setup_failure(spec, mechanism, code, timed_out)
    elif timed_out:
        result.outcome, result.detail = "timeout", f"killed after {spec.limits.timeout_sec:g}s"
    elif oom_kills > 0:
        result.outcome, result.detail = "oom", "the kernel's OOM killer acted in the trial's memory cgroup"
    elif code is not None and "memory" in enforced and "RLIMIT_AS" in enforced["memory"] and _says_oom(spec):
        result.outcome, result.detail = "oom", "allocation failed under RLIMIT_AS"  # both are the model's own
    return result


def _wait(process: subprocess.Popen[bytes], timeout_sec: float, group: cgroups.Group | None) -> tuple[int | None, bool, int]:
    # A timer kills the group at the deadline while this thread blocks in waitpid: Popen.wait(timeout=...)
    # polls with sleeps of up to 50 ms, which would add that much latency to every trial.
    expired = threading.Event()

    def _expire() -> None:
        expired.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        if group is not None:
            group.kill_all()

    timer = threading.Timer(timeout_sec, _expire)
    timer.daemon = True
    timer.start()
    try:
        code: int | None = process.wait()
    finally:
        timer.cancel()
    killed = group.kill_all() if group is not None else 0
    if expired.is_set():
        return None, True, killed
    return code, False, killed


def _setup_failure(spec: SandboxSpec, mechanism: Mechanism, code: int | None, timed_out: bool) -> str:
    """Why the sandbox did not start: its own stderr (no agent ran to write there) and exit status."""
    said = confined.tail(spec.logs_dir, "stderr.log", window=2000).strip()
    how = "its setup timed out" if timed_out else f"exit status {code}"
    return f"the {mechanism} sandbox failed before starting the agent ({how})" + (f": {said}" if said else "")


def _says_oom(spec: SandboxSpec) -> bool:
    text = confined.tail(spec.logs_dir, "stderr.log", window=8192)
    return "MemoryError" in text or "Cannot allocate memory" in text or "out of memory" in text.lower()
