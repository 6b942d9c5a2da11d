"""One agent flooding the gateway from inside its sandbox, on the real local engine, while other trials run.

The attacker of a campaign sends 16 tokenless 60 MB bodies, then makes 20,000 connection attempts on its gateway
socket and holds what it gets; three well-behaved agents of the same campaign call the model every 100 ms all the
while (each writes its answer only if every call succeeded within a second), and so does a probe in the engine's
own process on a socket of its own. The gateway runs in the engine's process, as under ``anchorage run``.

Every other trial ends ``Succeeded``, the probe is answered within a second throughout, the engine's RSS grows by
less than 100 MB and its descriptors by a few hundred (before the front door: 20,300 connections took it to its
limit of 20,000 and the other trials ended ``InfrastructureFailed``), and the attacker's tokenless bodies were
answered 401 at their heads. (Measured here: 113,000 attempts in 6 s of which 193 connected — the socket's cap of
128 and its backlog —, the probe's slowest answer 13 ms, RSS +1.6 MB, descriptors +140; the same attack with the
caps lifted held 15,065 connections and an honest agent's call took 3.3 s.)
"""

from __future__ import annotations

import json
import os
import socket
import textwrap
import threading
import time
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from anchorage.manifests import VerificationCampaign
from anchorage.runtime.local import sandbox
from anchorage.runtime.local.engine import run_campaign
from anchorage.runtime.local.gatewaystart import start_local_gateway
from anchorage.runtime.local.trials import LocalRuntime
from anchorage.tasks import Task
from hostile.conftest import PY, write_expected

pytestmark = pytest.mark.sandbox

SECONDS = 6

HONEST = """
import json, os, time, urllib.request
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
body = json.dumps({"model": "mock", "messages": [{"role": "user", "content": "hi"}]}).encode()
calls = failed = 0
worst = 0.0
end = time.time() + SECONDS
while True:
    started = time.time()
    request = urllib.request.Request(base + "/chat/completions", data=body,
                                     headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
            ok = response.status == 200
    except Exception as exc:
        ok = False
        print("call failed", type(exc).__name__, exc)
    worst = max(worst, time.time() - started)
    calls += 1
    failed += not ok
    if time.time() > end:
        break
    time.sleep(0.1)
print("honest", calls, failed, round(worst, 3))
if failed == 0 and worst < 1.0:
"""

ATTACK = """
import socket, threading, time
PATH = "/run/anchorage/gateway.sock"
MB = 1 << 20
bodies = []
def body():
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(20)
    sent, got = 0, b""
    try:
        sock.connect(PATH)
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\\r\\nHost: gw\\r\\nContent-Type: application/json\\r\\n"
                     b"Content-Length: %d\\r\\n\\r\\n" % (60 * MB))
        try:
            while sent < 60 * MB:
                sock.sendall(b"x" * MB)
                sent += MB
        except OSError:
            pass
        try:
            got = sock.recv(12)
        except OSError as exc:
            got = type(exc).__name__.encode()
    except OSError as exc:
        got = type(exc).__name__.encode()
    finally:
        sock.close()
    bodies.append((sent // MB, got.decode(errors="replace")))
threads = [threading.Thread(target=body) for _ in range(16)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print("bodies", sorted(bodies))
held, attempts, refused, other = [], 0, 0, 0
end = time.time() + SECONDS
while attempts < 20000 or time.time() < end:
    attempts += 1
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        sock.connect(PATH)
        held.append(sock)
    except BlockingIOError:
        sock.close()
        refused += 1
    except OSError:
        sock.close()
        other += 1
    if attempts % 200 == 0:
        time.sleep(0.005)
print("flood", attempts, len(held), refused, other)
"""


def _campaign(smoke: Task, seconds: int, honest: int, attacker: bool) -> VerificationCampaign:
    good = textwrap.dedent(HONEST).replace("SECONDS", str(seconds)) + "    " + write_expected(smoke)
    entries = [{"name": f"honest-{i}", "agent": {"kind": "command", "command": [PY, "-c", good], "model": "mock"}}
               for i in range(honest)]
    if attacker:
        bad = textwrap.dedent(ATTACK).replace("SECONDS", str(seconds))
        entries.append({"name": "attacker", "agent": {"kind": "command", "command": [PY, "-c", bad], "model": "mock"}})
    return VerificationCampaign.model_validate({
        "apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign",
        "metadata": {"name": f"flood-{honest}-{int(attacker)}"},
        "spec": {"tasks": ["smoke-inventory"], "seeds": 1, "parallelism": len(entries), "entries": entries,
                 "limits": {"agentTimeoutSec": 120, "memoryMB": 1024, "pids": 256}}})


class Probe:
    """The engine's own view during the run: a well-behaved client on its own trial socket every 100 ms, and the
    process's RSS and open descriptors."""

    def __init__(self, path: Path, token: str) -> None:
        self.path, self.token = path, token
        self.latencies: list[float] = []
        self.rss: list[int] = []
        self.fds: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _call(self) -> float:
        body = json.dumps({"model": "mock", "messages": [{"role": "user", "content": "probe"}]}).encode()
        started = time.monotonic()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(10)
                sock.connect(str(self.path))
                sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (self.token.encode(), len(body), body))
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
            return time.monotonic() - started if data.startswith(b"HTTP/1.1 200") else 99.0
        except OSError:
            return 99.0

    def _run(self) -> None:
        while not self._stop.is_set():
            self.latencies.append(self._call())
            self.rss.append(_rss())
            self.fds.append(len(os.listdir("/proc/self/fd")))
            self._stop.wait(0.1)


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def test_one_agents_flood_costs_the_other_trials_nothing(mechanism: sandbox.Mechanism, smoke_task: Task,
                                                         tmp_path: Path) -> None:
    local = start_local_gateway()
    try:
        runtime = LocalRuntime(mechanism=mechanism, base_dir=tmp_path, gateway=local.gateway)
        warm = run_campaign(_campaign(smoke_task, 0, 1, False), tmp_path / "runs", runtime)  # imports, scorer
        assert [r.phase for r in warm.records] == ["Succeeded"], warm.records
        unauthorized = REGISTRY.get_sample_value("anchorage_gateway_refusals_total", {"reason": "unauthorized"}) or 0
        probe_socket = local.gateway.open_trial_socket("probe")
        token = local.gateway.issue_token("probe")
        rss, fds = _rss(), len(os.listdir("/proc/self/fd"))
        with Probe(probe_socket, token) as probe:
            outcome = run_campaign(_campaign(smoke_task, SECONDS, 3, True), tmp_path / "runs", runtime)
    finally:
        local.stop()
    records = {r.entry: r.to_json() for r in outcome.records}
    attacker = records.pop("attacker")
    said = (outcome.directory / attacker["name"] / "agent" / "stdout.log").read_text()
    for record in records.values():
        out = (outcome.directory / record["name"] / "agent" / "stdout.log").read_text()
        assert (record["phase"], record["reason"]) == ("Succeeded", "completed"), (record["message"], out, said)
        honest = next(line.split() for line in out.splitlines() if line.startswith("honest"))
        assert int(honest[1]) >= 20 and honest[2] == "0" and float(honest[3]) < 1.0, out
    assert len(probe.latencies) >= 50 and max(probe.latencies) < 1.0, sorted(probe.latencies)[-5:]
    assert max(probe.rss) - rss < 100 * 2**20, (rss, max(probe.rss))
    assert max(probe.fds) - fds < 600, (fds, max(probe.fds))
    flood = next(line.split() for line in said.splitlines() if line.startswith("flood"))
    assert int(flood[1]) >= 20000, said  # the attack ran whole
    bodies = next(line for line in said.splitlines() if line.startswith("bodies"))
    assert bodies.count("HTTP/1.1 401") + bodies.count("Error") == 16 and "HTTP/1.1 200" not in bodies, bodies
    now = REGISTRY.get_sample_value("anchorage_gateway_refusals_total", {"reason": "unauthorized"}) or 0
    assert now - unauthorized >= 16
