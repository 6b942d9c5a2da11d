"""Hostile agents looking for the host: its paths in /proc, and the host id they run as.

The attacker dumps everything ``/proc`` offers about the sandbox's processes — every command line and
environment (pid 1's included), every descriptor link, mountinfo, maps, cgroup — and the test checks
that none of it names the checkout (its ``.venv``), the cache (``sandbox-etc``, the seccomp program,
agent CLIs), the quota or view mounts' folders, the gateway socket's folder or the trial's own folder.
From outside, the agent's processes (and bubblewrap's) run as an unprivileged id of the agents' range,
never as root; inside, ``id`` shows the mapped ids.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from anchorage.runtime.local import identity, interpreter, sandbox, uids
from anchorage.runtime.local.sandbox import SandboxLimits, SandboxResult, SandboxSpec
from runtime.fake_gateway import FakeGateway

pytestmark = pytest.mark.sandbox

REPO = Path(__file__).resolve().parents[2]

DUMP = r"""
import os, sys
def show(label, read):
    try:
        print(label, read())
    except OSError as exc:
        print(label, "unreadable", exc.errno)
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    for part in ("cmdline", "environ", "cgroup", "mountinfo", "maps"):
        show(f"{pid}/{part}", lambda: open(f"/proc/{pid}/{part}", "rb").read().decode(errors="replace").replace("\0", " "))
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        fds = []
    for fd in fds:
        show(f"{pid}/fd/{fd}", lambda: os.readlink(f"/proc/{pid}/fd/{fd}"))
    show(f"{pid}/cwd", lambda: os.readlink(f"/proc/{pid}/cwd"))
    show(f"{pid}/exe", lambda: os.readlink(f"/proc/{pid}/exe"))
import glob, numpy
print("numpy", numpy.__file__)
site = glob.glob(sys.prefix + "/lib/python3*/site-packages")[0]
for path in sorted(glob.glob(site + "/*.pth") + glob.glob(site + "/__editable__*") + glob.glob(site + "/*/direct_url.json")
                   + glob.glob(site + "/__pycache__/__editable__*")):
    print("file", path, open(path, "rb").read().decode(errors="replace"))
print("pyvenv.cfg", open(sys.prefix + "/pyvenv.cfg").read())
"""


def _forbidden(tmp_path: Path, socket: Path | None) -> list[str]:
    """Host paths that must never show inside."""
    paths = [str(REPO), os.path.realpath(sys.prefix), str(identity.cache_root()),
             str(identity.synthetic_etc(identity.SANDBOX_ID, identity.SANDBOX_ID)),
             f"{tempfile.gettempdir()}/anchorage-quota-", f"{tempfile.gettempdir()}/anchorage-views-",
             str(tmp_path), os.path.realpath(tmp_path)]
    if socket is not None:
        paths.append(str(socket.parent))
    return paths


def _folders(tmp_path: Path) -> dict[str, Path]:
    out = {name: tmp_path / "trial" / name for name in ("results", "logs", "data")}
    for folder in out.values():
        folder.mkdir(parents=True)
    (out["data"] / "input.csv").write_text("a,b\n1,2\n")
    return out


@pytest.mark.parametrize("with_gateway", [False, True])
def test_nothing_inside_names_a_host_path(mech: sandbox.Mechanism, tmp_path: Path, with_gateway: bool) -> None:
    folders = _folders(tmp_path)
    (tmp_path / "gw").mkdir(mode=0o700)  # like the gateway's own folder: closed to other ids
    gateway = FakeGateway(tmp_path / "gw" / "gateway.sock", "{}") if with_gateway else None
    spec = SandboxSpec(argv=[sandbox.sandbox_python(), "-c", DUMP], results_dir=folders["results"],
                       logs_dir=folders["logs"], data_dir=folders["data"],
                       limits=SandboxLimits(timeout_sec=60, memory_mb=512, pids=256),
                       gateway_socket=gateway.path if gateway is not None else None)
    try:
        result = sandbox.run(spec, mechanism=mech)
    finally:
        if gateway is not None:
            gateway.stop()
    out = (folders["logs"] / "stdout.log").read_text()
    assert result.exit_code == 0, (result, (folders["logs"] / "stderr.log").read_text())
    assert "1/cmdline" in out and "1/mountinfo" in out and "/fd/1 " in out, out[:2000]
    # the gateway socket is bound from its hard link in the engine's hand-off folder (views.file): that folder's
    # name (the engine's pid) may show on the socket's mountinfo line, nothing else may
    socket_line = f"{tempfile.gettempdir()}/anchorage-views-"
    lines = [line for line in out.splitlines() if not (socket_line in line and "/run/anchorage/gateway.sock" in line)]
    assert (len(lines) < len(out.splitlines())) == with_gateway  # each process's mountinfo has that line
    for path in _forbidden(tmp_path, gateway.path if gateway is not None else None):
        assert not any(path in line for line in lines), (path, [line[:300] for line in lines if path in line][:5])
    # the interpreter is the fixed one, and the logs are linked by their in-sandbox paths
    assert f"numpy {interpreter.VENV}/lib/" in out
    assert "/fd/1 /logs/agent/stdout.log" in out and "/fd/2 /logs/agent/stderr.log" in out
    assert "command" not in out.split("pyvenv.cfg", 1)[1], out.split("pyvenv.cfg", 1)[1][:500]
    if interpreter.layout().binds[-1].cover:  # editable installs: their hooks are there, and empty
        hooks = [line for line in out.splitlines() if line.startswith("file ") and "__editable__" in line]
        assert hooks and all(line.endswith(".pth ") or line.endswith(".py ") or line.endswith(".pyc ")
                             for line in hooks), hooks
    if mech == "bwrap":  # pid 1 is bubblewrap, whose options (and with them the host paths) came from a memfd
        first = next(line for line in out.splitlines() if line.startswith("1/cmdline"))
        assert first.startswith("1/cmdline bwrap --args "), first


def _find_agent(marker: str, deadline: float) -> dict[int, str]:
    """Pids (and argv[0]) of the agent's interpreter and of bubblewrap, found by the marker in their command line
    (the engine-side steps before them, as root, carry the marker too: joining the cgroup, unshare's script)."""
    wanted = (sandbox.sandbox_python(), "bwrap")
    while time.monotonic() < deadline:
        found = {}
        for pid in (p for p in os.listdir("/proc") if p.isdigit()):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker.encode() in argv and argv[0].decode() in wanted:
                found[int(pid)] = argv[0].decode()
        if sandbox.sandbox_python() in found.values():
            return found
        time.sleep(0.1)
    return {}


def _ids(pid: int) -> tuple[list[int], list[int]]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return [int(x) for x in fields["Uid"].split()], [int(x) for x in fields["Gid"].split()]


@pytest.mark.skipif(os.geteuid() != 0, reason="the engine starts agents as ids of its range only as root")
def test_agent_processes_run_as_an_unprivileged_host_id(mech: sandbox.Mechanism, tmp_path: Path) -> None:
    folders = _folders(tmp_path)
    marker = f"anchorage-marker-{uuid.uuid4().hex[:8]}"
    code = "import subprocess, time; print(subprocess.run(['id'], capture_output=True, text=True).stdout); time.sleep(5)"
    spec = SandboxSpec(argv=[sandbox.sandbox_python(), "-c", code, marker], results_dir=folders["results"],
                       logs_dir=folders["logs"], limits=SandboxLimits(timeout_sec=60, memory_mb=512, pids=256))
    box: dict[str, SandboxResult] = {}
    runner = threading.Thread(target=lambda: box.setdefault("result", sandbox.run(spec, mechanism=mech)))
    runner.start()
    try:
        pids = _find_agent(marker, time.monotonic() + 30)
        assert pids, "the agent's processes were never seen"
        seen = {pid: _ids(pid) for pid in pids}
        assert mech != "bwrap" or "bwrap" in pids.values(), pids
    finally:
        runner.join(timeout=60)
    ids = uids.id_range()
    host_uids = {uid for uid_fields, _ in seen.values() for uid in uid_fields}
    host_gids = {gid for _, gid_fields in seen.values() for gid in gid_fields}
    assert len(host_uids) == 1 and len(host_gids) == 1, seen  # real, effective, saved, fs: one id
    (uid,), (gid,) = host_uids, host_gids
    assert uid != 0 and ids.start < uid < ids.start + ids.count and gid == uid, seen
    out = (folders["logs"] / "stdout.log").read_text()
    inside = 1000 if mech == "bwrap" else uid
    assert out.startswith(f"uid={inside}(agent) gid={inside}(agent)"), out
    assert f"host {uid}:{gid}" in box["result"].user
