"""Run one command in a sandbox: unprivileged, no capabilities, private network, read-only host, quotas.

Called by :mod:`anchorage.runtime.local.trials` (one call per trial), :mod:`.verifying` (one per model
call of a panel) and ``bench/sandbox.py``.

Mechanisms, in order of preference (:func:`detect_mechanism`):

* ``bwrap`` — bubblewrap: new user/pid/net/ipc/uts/cgroup namespaces; the agent is ``agent``
  (uid/gid 1000) in its own user namespace with every capability dropped and further user namespaces
  disabled (``--disable-userns`` where the kernel allows it); an empty root with only ``/usr`` and the
  interpreter (:mod:`.interpreter`, at ``/opt/anchorage/venv``) bound read-only, a synthetic ``/etc``
  (:mod:`.identity`) instead of the host's, ``/proc/sys`` read-only, ``/root/data`` read-only,
  ``/root/results`` and ``/logs/agent`` writable, tmpfs ``/tmp`` and ``/root`` (the agent's HOME,
  size-capped), the root itself remounted read-only. An engine running as root starts bubblewrap as
  an unprivileged host id of its own (:mod:`.uids`, through ``setpriv``), so no namespace maps the
  agent to host root; read-only host folders are bound through views (:mod:`.views`) that hide their
  host paths and that this id may reach.
* ``unshare`` — util-linux ``unshare`` as root, the same layout built by a small shell script
  (``mount --bind`` + ``chroot``); the agent runs as an unprivileged host id of the same range with no
  capabilities (``setpriv``), since there is no user namespace to map it.
* ``none`` — only with the explicit ``--unsandboxed`` flag, announced loudly by the caller.

Every sandboxed run also gets a seccomp filter (:mod:`.seccomp`: bubblewrap's ``--seccomp``; the
fallback's ``inside/seccomp_exec.py``) and a kernel session keyring of its own (:mod:`.keyrings`).
Nothing inside names a host path: bubblewrap reads its options from a memfd (``--args``), so the
sandbox's pid 1 shows only ``bwrap --args N -- <in-sandbox command>``; its stdout and stderr are a
pipe to the engine (bubblewrap's own errors), and the first program inside opens the agent's
``stdout.log``/``stderr.log`` by their in-sandbox paths, so no descriptor links to a host path.

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
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from anchorage import confined
from anchorage.errors import InfrastructureError
from anchorage.runtime.local import cgroups, identity, interpreter, keyrings, quotas, seccomp, uids, views
from anchorage.runtime.local.identity import Identity
from anchorage.trials.agents.templating import expand_references
from anchorage.trials.limits import LOG_MAX_MB

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
_SETUP_WINDOW = 8192

# The first program inside the sandbox when there is no launcher: open the agent's logs by their in-sandbox
# paths ("-": keep the engine's descriptors, unsandboxed), report the start on the status pipe (stdin), give
# the agent /dev/null as stdin instead, then become the agent.
_START = ('if [ "$1" != - ]; then exec 1>>"$1" 2>>"$2" || exit 125; fi; shift 2; '
          'printf started >&0 && exec 0</dev/null && exec "$@"')


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
    log_max_bytes: int = LOG_MAX_MB * MIB
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
    problem: str = ""


_BWRAP: _Bwrap | None = None
_BWRAP_LOCK = threading.Lock()


def detect_mechanism(*, unsandboxed: bool = False) -> Mechanism:
    """The best sandbox available here; raises :class:`InfrastructureError` naming the fix otherwise."""
    if unsandboxed:
        return "none"
    seccomp.compiled()  # no sandbox without its seccomp filter: raises naming the fix (install libseccomp)
    root = os.geteuid() == 0
    setpriv = shutil.which("setpriv") is not None  # as root, agents are started as an unprivileged id with it
    if shutil.which("bwrap") and (setpriv or not root) and _bwrap().works:
        return "bwrap"
    if root and setpriv and shutil.which("unshare"):
        return "unshare"
    if root and not setpriv and (shutil.which("bwrap") or shutil.which("unshare")):
        raise InfrastructureError("the sandbox needs util-linux 'setpriv' to start agents as an unprivileged id",
                                  hint="install util-linux (apt-get install util-linux)")
    why = f" ({_bwrap().problem})" if shutil.which("bwrap") and _bwrap().problem else ""
    raise InfrastructureError(
        "no sandbox is available: bubblewrap is not installed (or cannot create user namespaces here"
        f"{why}) and the engine is not running as root with util-linux 'unshare'",
        hint="install bubblewrap (apt-get install bubblewrap / dnf install bubblewrap), or run as root; "
        "running agents unsandboxed needs the explicit --unsandboxed flag",
    )


def _bwrap() -> _Bwrap:
    """Probe once whether bubblewrap can make the agent's user namespace (and disable nested ones) here, started
    as the agents' unprivileged id when the engine is root."""
    global _BWRAP
    with _BWRAP_LOCK:
        if _BWRAP is None:
            lease = uids.lease() if os.geteuid() == 0 else None
            try:
                prefix = _setpriv_argv(lease) if lease is not None else []
                base = [*prefix, "bwrap", "--unshare-all", "--unshare-user", "--uid", str(identity.SANDBOX_ID), "--gid",
                        str(identity.SANDBOX_ID), "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr", *_root_links()]
                tail = ["--", "/usr/bin/true"]
                with_disable, _ = _probe([*base, "--disable-userns", *tail])
                plain, problem = (True, "") if with_disable else _probe([*base, *tail])
                _BWRAP = _Bwrap(with_disable or plain, with_disable, problem)
            finally:
                if lease is not None:
                    lease.release()
        return _BWRAP


def _probe(argv: list[str]) -> tuple[bool, str]:
    try:
        done = subprocess.run(argv, capture_output=True, check=False, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, str(exc)
    return done.returncode == 0, done.stderr.decode(errors="replace").strip()[-300:]


@functools.lru_cache(maxsize=1)
def _root_links() -> tuple[str, ...]:
    args: list[str] = []
    for link in _ROOT_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    return tuple(args)


def _setpriv_argv(lease: uids.Lease) -> list[str]:
    """Become the leased id before starting bubblewrap: no groups but the sandbox group, no capabilities."""
    return ["setpriv", f"--reuid={lease.uid}", f"--regid={lease.gid}", f"--groups={uids.sandbox_group()}",
            "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--"]


def agent_identity(mechanism: Mechanism, lease: uids.Lease | None = None) -> Identity:
    """Who the agent is for ``mechanism``, inside and on the host (``none``: whoever runs the engine)."""
    if mechanism == "bwrap":
        host = (lease.uid, lease.gid) if lease is not None else (os.geteuid(), os.getegid())
        return Identity(identity.SANDBOX_ID, identity.SANDBOX_ID, *host, True)
    if mechanism == "unshare":
        if lease is None:
            raise InfrastructureError("the unshare sandbox needs an id of the agents' range", hint="run as root")
        return Identity(lease.uid, lease.gid, lease.uid, lease.gid, False)
    return Identity(os.getuid(), os.getgid(), os.getuid(), os.getgid(), False)


def sandbox_python(mechanism: Mechanism = "bwrap") -> str:
    """The interpreter agents' ``python3`` resolves to (the engine's environment, numpy & co included)."""
    return interpreter.python_path(sandboxed=mechanism != "none")


def sandbox_path(mechanism: Mechanism = "bwrap") -> str:
    """The PATH agents see: the engine's environment first (python3 with numpy & co), then the system."""
    return interpreter.agent_path(sandboxed=mechanism != "none")


def sandbox_env(spec: SandboxSpec, mechanism: Mechanism, port: int = GATEWAY_PORT) -> dict[str, str]:
    """The agent's whole environment: nothing is inherited from the engine."""
    inside = mechanism != "none"
    env = {
        "PATH": sandbox_path(mechanism),
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


class _Descriptors:
    """Descriptors handed to the sandbox's setup (options, data files, the seccomp program); closed after the start."""

    def __init__(self) -> None:
        self.fds: list[int] = []

    def data(self, name: str, content: bytes) -> int:
        fd = os.memfd_create(f"anchorage-{name}", os.MFD_CLOEXEC)
        self.fds.append(fd)
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    def add(self, fd: int) -> int:
        self.fds.append(fd)
        return fd

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()


def _ro_source(bind: interpreter.Bind) -> Path:
    """What to bind for a read-only host folder or file: its view (:mod:`.views`), or itself."""
    if bind.source.is_dir():
        return views.of(bind.source, bind.cover).path
    if bind.source.parent.is_dir():
        return views.of(bind.source.parent).path / bind.source.name
    return bind.source  # missing: bubblewrap fails with the path, the sandbox never starts


def _read_only_binds(spec: SandboxSpec, etc_dir: Path) -> list[interpreter.Bind]:
    """Every read-only bind after ``/usr``, parents before children."""
    binds = [interpreter.Bind(etc_dir, "/etc"), *interpreter.layout().binds]
    if spec.data_dir is not None:
        binds.append(interpreter.Bind(spec.data_dir, DATA))
    binds.append(interpreter.Bind(INSIDE_DIR, INSIDE_MOUNT))
    binds += [interpreter.Bind(source, target) for target, source in sorted(spec.ro_binds.items())]
    return binds


def _bwrap_options(spec: SandboxSpec, etc_dir: Path, fds: _Descriptors) -> list[str]:
    limits = spec.limits
    args = ["--unshare-all", "--unshare-user", "--uid", str(identity.SANDBOX_ID), "--gid", str(identity.SANDBOX_ID)]
    if _bwrap().disable_userns:
        args.append("--disable-userns")
    args += ["--cap-drop", "ALL", "--die-with-parent", "--new-session", "--hostname", identity.HOSTNAME]
    for directory in _SYSTEM_DIRS:
        args += ["--ro-bind", directory, directory]
    args += _root_links()
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys",
             "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger", "--dev", "/dev"]
    args += ["--size", str(limits.tmp_mb * MIB), "--tmpfs", "/tmp"]
    args += ["--perms", "0700", "--size", str(limits.tmp_mb * MIB), "--tmpfs", identity.HOME]
    layout = interpreter.layout()
    for bind in _read_only_binds(spec, etc_dir):
        args += ["--ro-bind", str(_ro_source(bind)), bind.target]
    if spec.data_dir is None:
        args += ["--dir", DATA]
    for target, content in layout.files:
        args += ["--perms", "0644", "--file", str(fds.data("file", content)), target]
    for target, link in layout.links:
        args += ["--symlink", link, target]
    args += ["--bind", str(spec.results_dir), RESULTS, "--bind", str(spec.logs_dir), LOGS]
    if spec.gateway_socket is not None:
        args += ["--ro-bind", str(spec.gateway_socket), GATEWAY_SOCKET]  # run() made it reachable (views.file)
    args += ["--seccomp", str(fds.add(seccomp.open_program()))]
    args += ["--remount-ro", "/", "--chdir", spec.cwd]
    return args


def _bwrap_argv(spec: SandboxSpec, etc_dir: Path, fds: _Descriptors) -> list[str]:
    """``bwrap --args FD --``: the options (and with them every host path) are read from a memfd."""
    options = "\0".join(_bwrap_options(spec, etc_dir, fds)) + "\0"
    return ["bwrap", "--args", str(fds.data("bwrap-args", options.encode())), "--"]


# The unshare mechanism: the same layout as bwrap, built by hand inside new namespaces, then chroot, load the
# seccomp filter and become the unprivileged agent id with no capabilities. Arguments: $1 root dir, $2 uid,
# $3 gid, $4 the seccomp program's descriptor, $5 the interpreter, then "KIND SRC DST" triples, "--", the command.
_UNSHARE_SCRIPT = r"""
set -e
AGENT_PATH=$PATH; export PATH=/usr/sbin:/usr/bin:/sbin:/bin; CHROOT=$(command -v chroot)
R=$1; U=$2; G=$3; F=$4; PY=$5; shift 5
mount --make-rprivate /
mount -t tmpfs -o size=64m tmpfs "$R"
ip link set lo up 2>/dev/null || true
while [ "$1" != "--" ]; do
  kind=$1; src=$2; rel=$3; dst=$R$3; shift 3
  case $kind in
    ro|rw) if [ -d "$src" ]; then mkdir -p "$dst"; else mkdir -p "$(dirname "$dst")"; : > "$dst"; fi
           mount --rbind "$src" "$dst"
           [ "$kind" = ro ] && mount -o remount,bind,ro,nosuid,nodev "$dst" ;;
    text)  mkdir -p "$(dirname "$dst")"; [ -e "$dst" ] || : > "$dst"
           n=$R/.anchorage-text-$(printf %s "$rel" | tr / _); printf %s "$src" > "$n"; chmod 644 "$n"
           mount --bind "$n" "$dst"; mount -o remount,bind,ro "$dst" ;;
    link)  mkdir -p "$(dirname "$dst")"; ln -s "$src" "$dst" ;;
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
  --inh-caps=-all --bounding-set=-all -- "$PY" -I -S /.anchorage/seccomp_exec.py "$F" \
  /bin/sh -c 'cd "$0" && exec "$@"' "$CHDIR" "$@"
"""


def _unshare_argv(spec: SandboxSpec, root: Path, etc_dir: Path, who: Identity, fds: _Descriptors) -> list[str]:
    limits = spec.limits
    triples: list[str] = []
    for directory in _SYSTEM_DIRS:
        triples += ["ro", directory, directory]
    for link in _ROOT_LINKS:
        if os.path.islink(link):
            triples += ["link", os.readlink(link), link]
    triples += ["tmpfs", f"size={limits.tmp_mb}m,mode=1777", "/tmp",
                "tmpfs", f"size={limits.tmp_mb}m,mode=0700,uid={who.host_uid},gid={who.host_gid}", identity.HOME]
    for bind in _read_only_binds(spec, etc_dir):
        triples += ["ro", str(_ro_source(bind)), bind.target]
    if spec.data_dir is None:
        triples += ["dir", "-", DATA]
    for name, text in identity.generated_files(who.uid, who.gid).items():
        if name in ("passwd", "group"):  # the agent's name for its host id (the shared /etc names uid 1000)
            triples += ["text", text, f"/etc/{name}"]
    layout = interpreter.layout()
    for target, content in layout.files:
        triples += ["text", content.decode(), target]
    for target, link in layout.links:
        triples += ["link", link, target]
    triples += ["rw", str(spec.results_dir), RESULTS, "rw", str(spec.logs_dir), LOGS]
    if spec.gateway_socket is not None:
        triples += ["ro", str(spec.gateway_socket), GATEWAY_SOCKET]  # run() made it reachable (views.file)
    program = str(fds.add(seccomp.open_program()))
    return [
        "unshare", "--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child",
        "/bin/sh", "-c", _UNSHARE_SCRIPT, "sandbox", str(root), str(who.host_uid), str(who.host_gid), program,
        layout.python, *triples, "--",
    ]


def _agent_argv(spec: SandboxSpec, mechanism: Mechanism, host_port: int | None) -> list[str]:
    """The first program inside: the launcher (gateway relay) or the start wrapper, then the agent."""
    inside = mechanism != "none"
    logs = [f"{LOGS}/stdout.log", f"{LOGS}/stderr.log"] if inside else ["-", "-"]
    if spec.gateway_socket is None:
        return ["/bin/sh", "-c", _START, "anchorage-start", *logs, *spec.argv]
    launcher = f"{INSIDE_MOUNT}/launcher.py" if inside else str(INSIDE_DIR / "launcher.py")
    port = GATEWAY_PORT if host_port is None else host_port
    socket_path = GATEWAY_SOCKET if inside else str(spec.gateway_socket)
    return [sandbox_python(mechanism), "-I", "-S", launcher, str(port), socket_path, *logs, "--", *spec.argv]


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


def _unsandboxed_argv(argv: list[str]) -> list[str]:
    """Unsandboxed, the fixed in-sandbox paths callers name become the host's (interpreter, helpers)."""
    inside_python, host_python = sandbox_python("bwrap"), sandbox_python("none")
    out = []
    for part in argv:
        if part == inside_python:
            part = host_python
        elif part.startswith(INSIDE_MOUNT + "/"):
            part = str(INSIDE_DIR / part.removeprefix(INSIDE_MOUNT + "/"))
        out.append(part)
    return out


def build_command(
    spec: SandboxSpec, mechanism: Mechanism, group: cgroups.Group | None, enforced: dict[str, str], scratch: Path,
    host_port: int | None = None, *, who: Identity | None = None, lease: uids.Lease | None = None,
    fds: _Descriptors | None = None,
) -> list[str]:
    """The full host argv: join cgroups → rlimits → [become the agent's id] → sandbox → launcher or start wrapper
    → agent. Descriptors the command reads are added to ``fds`` (they must be passed to it)."""
    fds = fds if fds is not None else _Descriptors()
    who = who or agent_identity(mechanism, lease)
    agent = _agent_argv(spec, mechanism, host_port)
    if mechanism == "bwrap":
        etc_dir = identity.synthetic_etc(identity.SANDBOX_ID, identity.SANDBOX_ID)
        inner = (_setpriv_argv(lease) if lease is not None else []) + _bwrap_argv(spec, etc_dir, fds) + agent
    elif mechanism == "unshare":
        etc_dir = identity.synthetic_etc(identity.SANDBOX_ID, identity.SANDBOX_ID)
        inner = _unshare_argv(spec, scratch, etc_dir, who, fds) + agent
    else:
        inner = _unsandboxed_argv(agent)
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
        if spec.gateway_socket is not None:  # only the socket is bound in (through views.file: its folder stays closed)
            with contextlib.suppress(OSError):
                os.chmod(spec.gateway_socket, 0o666)
    return _Quotas(mounts, folders, wanted)


def _create_logs(logs: Path, ident: Identity, mechanism: Mechanism) -> tuple[int, int] | str:
    """Create the agent's empty ``stdout.log``/``stderr.log``, owned by its host id; unsandboxed, the descriptors
    the agent writes to (sandboxed, the first program inside opens them by their in-sandbox paths)."""
    fds: list[int] = []
    try:
        for name in ("stdout.log", "stderr.log"):
            fd = os.open(logs / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
            fds.append(fd)
            if mechanism != "none" and os.geteuid() == 0:
                os.fchown(fd, ident.host_uid, ident.host_gid)
    except OSError as exc:
        for fd in fds:
            os.close(fd)
        return f"cannot create the agent's log files: {exc}"
    return fds[0], fds[1]


def run(spec: SandboxSpec, *, mechanism: Mechanism, trial_id: str | None = None) -> SandboxResult:
    """Run ``spec`` to completion (or to its timeout) and say how it ended. Never raises for agent behaviour."""
    ident = trial_id or uuid.uuid4().hex[:12]
    limits = spec.limits
    lease = uids.lease() if mechanism != "none" and os.geteuid() == 0 else None
    fds = _Descriptors()
    group = None
    mounts: _Quotas | None = None
    socket_link: Path | None = None
    scratch = Path("/tmp") / f"anchorage-root-{ident}"
    try:
        who = agent_identity(mechanism, lease)
        if mechanism != "none":
            group = cgroups.open_group(ident, cpus=limits.cpus, memory_mb=limits.memory_mb, pids_max=limits.pids)
        enforced: dict[str, str] = dict(group.enforced) if group is not None else {}
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
        bound = replace(spec, results_dir=mounts.bound("results"), logs_dir=mounts.bound("logs"))
        if mechanism != "none" and spec.gateway_socket is not None:  # a link the leased id can reach, its folder closed
            socket_link = views.file(spec.gateway_socket)
            bound = replace(bound, gateway_socket=socket_link)
        command = build_command(bound, mechanism, group, enforced, scratch, host_port, who=who, lease=lease, fds=fds)
        enforced["wall_time"] = f"SIGKILL of the process group after {limits.timeout_sec:g}s"
        result = _supervise(bound, command, env, mechanism, group, enforced, started, who, fds)
        result.user = who.describe()
        if group is not None:  # _wait killed everything left in the group: nothing writes while we copy out
            result.evidence["cgroup_events"] = group.events()
            result.evidence["cgroup_limits_after"] = group.read_limits()
        _finish_quotas(result, mounts)
        return result
    finally:
        fds.close()
        if socket_link is not None:
            views.release_file(socket_link)
        if mounts is not None:
            mounts.release()
        if group is not None:
            group.kill_all()
            group.remove()
        if lease is not None:
            lease.release()
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


def _pipe() -> tuple[int, int]:
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    return read_end, write_end


def _read_pipe(fd: int, limit: int = 4 * 4096) -> bytes:
    """What the sandbox wrote on a pipe of ours (every writer has exited: read to EOF, bounded)."""
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    size = 0
    with contextlib.suppress(BlockingIOError, OSError):
        while size < limit:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks)


def _supervise(
    spec: SandboxSpec,
    command: list[str],
    env: dict[str, str],
    mechanism: Mechanism,
    group: cgroups.Group | None,
    enforced: dict[str, str],
    started: float,
    who: Identity,
    fds: _Descriptors,
) -> SandboxResult:
    logs = _create_logs(spec.logs_dir, who, mechanism)
    if isinstance(logs, str):
        return SandboxResult("sandbox_error", None, time.monotonic() - started, mechanism, detail=logs,
                             evidence={"engine_error": logs})
    status_read, status_write = _pipe()
    setup_read, setup_write = _pipe()
    # Sandboxed, the chain starts in "/" (a shell exports its working directory as PWD) and bubblewrap's own
    # output goes to the setup pipe (no descriptor inside links to a host file);
    # unsandboxed, the agent writes to its log files directly.
    out, err = (logs if mechanism == "none" else (setup_write, setup_write))
    keyring = ""
    try:
        try:
            spawned = keyrings.popen(
                command, stdin=status_write, stdout=out, stderr=err, env=env, start_new_session=True,
                close_fds=True, pass_fds=tuple(fds.fds), cwd=spec.results_dir if mechanism == "none" else "/",
            )
            process, keyring = spawned.process, spawned.keyring
        except OSError as exc:
            return SandboxResult("sandbox_error", None, time.monotonic() - started, mechanism, detail=str(exc),
                                 evidence={"engine_error": f"{type(exc).__name__}: {exc}"})
        finally:
            for fd in (status_write, setup_write, *logs):
                os.close(fd)
            fds.close()
        code, timed_out, killed = _wait(process, spec.limits.timeout_sec, group)
        status = _read_pipe(status_read)
        setup = _read_pipe(setup_read, _SETUP_WINDOW).decode(errors="replace").strip()
    finally:
        os.close(status_read)
        os.close(setup_read)
    wall = time.monotonic() - started
    result = SandboxResult("exited", code, wall, mechanism, enforced=enforced, killed_processes=killed)
    result.started = status.startswith(STARTED)
    result.evidence["status_pipe"] = "started" if result.started else "silent (the sandbox never started the agent)"
    if keyring:
        result.evidence["session_keyring"] = keyring
    if mechanism != "none":
        result.evidence["seccomp"] = f"libseccomp {seccomp.version()}, program {seccomp.compiled().digest}"
    if setup:
        result.evidence["setup_output"] = setup[-2000:]
    oom_kills = group.events().get("oom_kill", 0) if group is not None else 0
    if not result.started:
        result.outcome = "sandbox_error"
        result.detail = _setup_failure(spec, mechanism, code, timed_out, setup)
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


def _setup_failure(spec: SandboxSpec, mechanism: Mechanism, code: int | None, timed_out: bool, setup: str) -> str:
    """Why the sandbox did not start: what its setup wrote (no agent ran to write there) and its exit status."""
    said = setup[-2000:] if mechanism != "none" else confined.tail(spec.logs_dir, "stderr.log", window=2000).strip()
    how = "its setup timed out" if timed_out else f"exit status {code}"
    return f"the {mechanism} sandbox failed before starting the agent ({how})" + (f": {said}" if said else "")


def _says_oom(spec: SandboxSpec) -> bool:
    text = confined.tail(spec.logs_dir, "stderr.log", window=8192)
    return "MemoryError" in text or "Cannot allocate memory" in text or "out of memory" in text.lower()
