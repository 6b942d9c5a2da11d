"""Hostile agents against the real local sandbox: every isolation and limit, each a recorded outcome."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest

from anchorage.runtime.local import sandbox
from anchorage.runtime.local.sandbox import SandboxLimits, SandboxSpec
from runtime.fake_gateway import FakeGateway
from runtime.host_processes import processes

pytestmark = pytest.mark.sandbox

PY = sandbox.sandbox_python()


def _spec(folders: dict[str, Path], code: str, **limits: object) -> SandboxSpec:
    merged: dict[str, object] = {"timeout_sec": 20.0, "memory_mb": 512, "pids": 256, "cpus": 1.0}
    merged.update(limits)
    return SandboxSpec(
        argv=[PY, "-c", code],
        results_dir=folders["results"],
        logs_dir=folders["logs"],
        data_dir=folders["data"],
        limits=SandboxLimits(**merged),  # type: ignore[arg-type]
    )


def _out(folders: dict[str, Path]) -> str:
    return (folders["logs"] / "stdout.log").read_text() + (folders["logs"] / "stderr.log").read_text()


def test_outside_tcp_fails_fast_while_gateway_answers(
    mech: sandbox.Mechanism, folders: dict[str, Path], tmp_path: Path
) -> None:
    gateway = FakeGateway(tmp_path / "gw.sock", '{"answer": 42}')
    code = """
import json, os, socket, time, urllib.request
t = time.monotonic()
try:
    socket.create_connection(("10.255.255.1", 80), timeout=5)
    print("OUTSIDE-REACHED")
except OSError as exc:
    print("outside-blocked", type(exc).__name__, round(time.monotonic() - t, 2))
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=b"{}",
                             headers={"Authorization": "Bearer tok-1"})
print("gateway", json.loads(urllib.request.urlopen(req, timeout=10).read())["choices"][0]["message"]["content"])
print("anthropic-base", os.environ["ANTHROPIC_BASE_URL"] + "/v1" == os.environ["OPENAI_BASE_URL"])
"""
    spec = _spec(folders, code)
    spec = SandboxSpec(**{**spec.__dict__, "gateway_socket": gateway.path, "env": {"OPENAI_API_KEY": "tok-1"}})
    try:
        result = sandbox.run(spec, mechanism=mech)
    finally:
        gateway.stop()
    out = _out(folders)
    assert result.outcome == "exited" and result.exit_code == 0, out
    assert "OUTSIDE-REACHED" not in out
    blocked = [line for line in out.splitlines() if line.startswith("outside-blocked")]
    assert blocked and float(blocked[0].split()[-1]) < 1.0, out
    assert 'gateway {"answer": 42}' in out
    assert "anthropic-base True" in out  # Anthropic clients reach the same relay (they add /v1/messages)
    assert gateway.tokens == ["Bearer tok-1"]


def test_writes_outside_writable_paths_fail(mech: sandbox.Mechanism, folders: dict[str, Path]) -> None:
    code = """
import pathlib
for target in ["/usr/evil", "/etc/evil", "/evil", "/root/data/evil", "/logs/evil", "PREFIX/evil"]:
    try:
        pathlib.Path(target).write_text("x")
        print("WROTE", target)
    except OSError as exc:
        print("denied", target, exc.errno)
pathlib.Path("/root/results/ok.json").write_text("{}")
pathlib.Path("/logs/agent/ok.log").write_text("log")
pathlib.Path("/tmp/scratch").write_text("tmp is private")
""".replace("PREFIX", sys.prefix)
    result = sandbox.run(_spec(folders, code), mechanism=mech)
    out = _out(folders)
    assert result.outcome == "exited" and result.exit_code == 0, out
    assert "WROTE" not in out
    assert out.count("denied") == 6
    assert (folders["results"] / "ok.json").exists() and (folders["logs"] / "ok.log").exists()
    assert not (folders["data"] / "evil").exists() and not Path("/evil").exists()
    assert not Path(sys.prefix, "evil").exists()


def test_host_files_outside_the_binds_are_invisible(mech: sandbox.Mechanism, folders: dict[str, Path]) -> None:
    secret = Path(__file__).resolve()
    code = (f"import os; print('visible' if os.path.exists({str(secret)!r}) else 'hidden'); "
            "print(open('/root/data/statement.md').read())")
    result = sandbox.run(_spec(folders, code), mechanism=mech)
    out = _out(folders)
    assert result.exit_code == 0, out
    assert "hidden" in out and "the problem" in out


def test_memory_hog_is_recorded_as_oom(mech: sandbox.Mechanism, folders: dict[str, Path]) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))"
    result = sandbox.run(_spec(folders, code, memory_mb=128), mechanism=mech)
    assert result.outcome == "oom", (result, _out(folders))


def test_fork_bomb_is_contained(mech: sandbox.Mechanism, folders: dict[str, Path]) -> None:
    code = """
import os, time
children = 0
for _ in range(100000):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
    except OSError:
        break
print("forks", children, flush=True)
time.sleep(30)
"""
    marker = f"# bomb-{uuid.uuid4().hex}"  # in every bomb process's argv (python -c CODE)
    result = sandbox.run(_spec(folders, code + marker, pids=64, timeout_sec=3.0), mechanism=mech)
    out = _out(folders)
    assert result.outcome == "timeout", (result, out)
    forks = int(out.split("forks")[1].split()[0])
    assert forks < 64, out
    survivors = processes(lambda cmdline: marker in cmdline)
    assert survivors == []  # nothing of the bomb survives the trial


def test_sleeper_and_its_escaped_children_are_killed_at_timeout(
    mech: sandbox.Mechanism, folders: dict[str, Path]
) -> None:
    marker = f"300.{uuid.uuid4().int % 10**9:09d}"  # a duration no other process on the machine sleeps
    code = f"""
import os, subprocess, time
child = subprocess.Popen(["sleep", "{marker}"], start_new_session=True)
open("/root/results/child.pid", "w").write(str(child.pid))
time.sleep(300)
"""
    started = time.monotonic()
    result = sandbox.run(_spec(folders, code, timeout_sec=1.5), mechanism=mech)
    assert result.outcome == "timeout"
    assert 1.5 <= result.wall_sec < 6.0 and time.monotonic() - started < 8.0
    assert (folders["results"] / "child.pid").is_file()  # the escaped child was started
    leftovers = processes(lambda cmdline: cmdline == f"sleep\x00{marker}\x00")
    assert leftovers == []


def test_oversized_results_are_recorded(mech: sandbox.Mechanism, folders: dict[str, Path]) -> None:
    code = "open('/root/results/big.bin', 'wb').write(b'x' * 300000)"
    result = sandbox.run(_spec(folders, code, result_max_bytes=100000), mechanism=mech)
    assert result.outcome == "exited" and result.exit_code == 0
    assert result.oversized and result.result_bytes == 300000


def test_missing_sandbox_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    with pytest.raises(sandbox.InfrastructureError) as caught:
        sandbox.detect_mechanism()
    assert "install bubblewrap" in str(caught.value) and "--unsandboxed" in str(caught.value)
    assert sandbox.detect_mechanism(unsandboxed=True) == "none"


def test_unsandboxed_mode_runs_with_relocated_paths(folders: dict[str, Path], tmp_path: Path) -> None:
    gateway = FakeGateway(tmp_path / "gw.sock", "hello")
    code = """
import os, pathlib, urllib.request
pathlib.Path(os.environ["ANCHORAGE_RESULTS_DIR"], "out.json").write_text("{}")
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=b"{}")
print(urllib.request.urlopen(req, timeout=10).read().decode())
"""
    spec = _spec(folders, code)
    spec = SandboxSpec(**{**spec.__dict__, "gateway_socket": gateway.path})
    try:
        result = sandbox.run(spec, mechanism="none")
    finally:
        gateway.stop()
    assert result.exit_code == 0, _out(folders)
    assert (folders["results"] / "out.json").exists() and "hello" in _out(folders)


def test_cpu_quota_throttles_a_busy_agent(mech: sandbox.Mechanism, folders: dict[str, Path]) -> None:
    code = """
import multiprocessing, os, time
def spin():
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        pass
procs = [multiprocessing.Process(target=spin) for _ in range(2)]
[p.start() for p in procs]
[p.join() for p in procs]
t = os.times()
print("cpu", t.children_user + t.children_system)
"""
    result = sandbox.run(_spec(folders, code, cpus=0.25), mechanism=mech)
    out = _out(folders)
    assert result.exit_code == 0, out
    assert "cpus" in result.enforced
    if "cgroup" not in result.enforced["cpus"]:
        pytest.skip(f"no cgroup cpu controller here: the fallback is {result.enforced['cpus']}")
    cpu = float(out.split("cpu")[1].split()[0])
    assert cpu < 0.6, out  # 2 spinners × 1.5 s would use ~3 s of CPU unthrottled; 0.25 CPU allows ~0.4 s
