"""The usage ledger's journal: a real gateway process killed mid-campaign loses no usage and no revocation.

The campaign's requests go to a gateway subprocess (``anchorage gateway --ledger-dir``) that is killed
with SIGKILL half way and restarted on the same directory, and — the reference — to an in-process
gateway without a journal that is never restarted. Usage per trial must be identical.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anchorage.costs import PriceSnapshot
from anchorage.gateway.estimates import estimate
from anchorage.gateway.journal import JOURNAL_FILE
from anchorage.gateway.ledger import Ledger
from anchorage.gateway.tokens import mint_token

SECRET = "shared-with-the-operator"
ADMIN = "admin-token"
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def call(url: str, *, method: str = "GET", token: str | None = None, body: Any = None,
         api_key: bool = False) -> tuple[int, bytes]:
    auth = {"x-api-key": token} if api_key else {"Authorization": f"Bearer {token}"}
    request = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **(auth if token else {})})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def campaign() -> list[tuple[str, str, dict[str, Any]]]:
    """(trial, endpoint, body): two trials, every API style, streamed and whole, reasoning effort varied."""
    steps = []
    for index in range(12):
        trial = ("trial-a", "trial-b")[index % 2]
        endpoint = ("chat", "responses", "messages")[index % 3]
        stream = index % 4 < 2
        effort = ("low", "high")[index % 5 % 2]
        prompt = f"request {index}: model the dragon dance " * (1 + index % 3)
        if endpoint == "responses":
            body: dict[str, Any] = {"model": "mock-model", "stream": stream, "reasoning": {"effort": effort},
                                    "input": prompt}
        else:
            body = {"model": "mock-model", "stream": stream, "reasoning_effort": effort,
                    "messages": [{"role": "user", "content": prompt}], "max_tokens": 256}
        steps.append((trial, endpoint, body))
    return steps


class GatewayProcess:
    """``anchorage gateway`` as a child process; stderr (its log) goes to a file."""

    def __init__(self, command: Path, config: Path, ledger: Path, log: Path, env: dict[str, str]) -> None:
        self.log = log
        self._log_file = log.open("ab")
        self.process = subprocess.Popen([str(command), "gateway", "--config", str(config), "--ledger-dir", str(ledger),
                                         "--admin-port", "0"],
                                        stdout=subprocess.PIPE, stderr=self._log_file, text=True, env=env)
        assert self.process.stdout is not None
        lines = []
        while not any(line.startswith("usage ledger:") for line in lines):
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError(f"the gateway exited at start: {lines}\n{log.read_text()}")
            lines.append(line)
        found = re.search(r"listening on (http://\S+)", lines[0])
        admin = re.search(r"admin API.* on (http://\S+)", lines[1])
        assert found and admin, lines
        self.url, self.admin = found.group(1), admin.group(1)

    def stop(self, sig: int) -> None:
        self.process.send_signal(sig)
        self.process.wait(timeout=15)
        assert self.process.stdout is not None
        self.process.stdout.close()
        self._log_file.close()


@pytest.fixture
def gateway_process(tmp_path: Path, repo_root: Path, upstream_factory: Any, prices_file: Path,
                    provider_key: str) -> Iterator[Any]:
    command = Path(sys.executable).parent / "anchorage"
    if not command.exists():
        pytest.skip(f"the anchorage console script is not installed beside {sys.executable}")
    upstream = upstream_factory()
    config = tmp_path / "gateway.yaml"
    config.write_text(json.dumps({
        "port": 0, "prices": str(prices_file), "token_secret_env": "GW_SECRET", "admin_token_env": "GW_ADMIN",
        "upstreams": [{"name": "mock", "base_url": upstream.url, "api_key_env": "TEST_PROVIDER_KEY"},
                      {"name": "mock-anthropic", "base_url": upstream.url, "api": "anthropic",
                       "api_key_env": "TEST_PROVIDER_KEY"}]}))
    env = {**os.environ, "PYTHONPATH": str(repo_root / "operator"), "GW_SECRET": SECRET, "GW_ADMIN": ADMIN,
           "TEST_PROVIDER_KEY": provider_key}
    started: list[GatewayProcess] = []

    def start() -> GatewayProcess:
        started.append(GatewayProcess(command, config, tmp_path / "ledger", tmp_path / "gateway.log", env))
        return started[-1]

    yield start
    for process in started:
        if process.process.poll() is None:
            process.stop(signal.SIGKILL)


def usage_of(gateway: GatewayProcess, trial: str) -> dict[str, Any]:
    status, raw = call(f"{gateway.admin}/admin/v1/usage/{trial}", token=ADMIN)
    assert status == 200, raw
    return dict(json.loads(raw))


@pytest.mark.slow
def test_usage_and_revocations_survive_a_killed_gateway(gateway_process: Any, gateway_factory: Any,
                                                        upstream_factory: Any, tmp_path: Path,
                                                        prices_file: Path) -> None:
    reference = gateway_factory(upstream_factory())  # in-process, in memory, never restarted
    tokens = {trial: mint_token(SECRET.encode(), trial) for trial in ("trial-a", "trial-b", "trial-c")}
    steps = campaign()

    def send(url: str, step: tuple[str, str, dict[str, Any]], token: str) -> None:
        _trial, endpoint, body = step
        status, raw = call(url + PATHS[endpoint], method="POST", token=token, body=body,
                           api_key=endpoint == "messages")
        assert status == 200, raw

    gateway = gateway_process()
    for step in steps[:7]:
        send(gateway.url, step, tokens[step[0]])
    # trial-c makes one request, then the operator revokes its token
    send(gateway.url, ("trial-c", "chat", steps[0][2]), tokens["trial-c"])
    assert call(f"{gateway.admin}/admin/v1/tokens/trial-c", method="DELETE", token=ADMIN)[0] == 200
    # an admin-issued token carries a budget, which must survive too: one request's worst case, so the
    # request is admitted and what it spent leaves too little for another
    body = steps[0][2]
    worst = estimate(body, len(json.dumps(body)), "chat", "mock-model", ceiling=32768, bytes_per_token=1.0,
                     snapshot=PriceSnapshot.load(prices_file))
    status, raw = call(f"{gateway.admin}/admin/v1/tokens", method="POST", token=ADMIN,
                       body={"trial_id": "trial-d", "budget_usd": worst.usd + 1e-12, "entry": "entry-d"})
    assert status == 200
    send(gateway.url, ("trial-d", "chat", body), json.loads(raw)["token"])
    gateway.stop(signal.SIGKILL)  # no clean shutdown: nothing is flushed at exit

    # a crash in the middle of writing a line leaves it torn
    with (tmp_path / "ledger" / JOURNAL_FILE).open("ab") as journal:
        journal.write(b'{"op":"use","trial":"trial-a","model":"mock-mo')
    gateway = gateway_process()
    assert "ignoring its last line" in gateway.log.read_text()
    assert call(gateway.url + PATHS["chat"], method="POST", token=tokens["trial-c"], body=steps[0][2])[0] == 401
    status, raw = call(gateway.url + PATHS["chat"], method="POST", token=json.loads(raw)["token"], body=steps[0][2])
    assert status == 429 and json.loads(raw)["error"]["type"] == "budget_exceeded"
    for step in steps[7:]:
        send(gateway.url, step, tokens[step[0]])

    for step in steps:
        send(reference.url, step, reference.issue_token(step[0]))
    for trial in ("trial-a", "trial-b"):
        expected = reference.usage(trial).to_dict()
        assert expected["requests"] == 6 and expected["reasoning_tokens"] > 0
        assert usage_of(gateway, trial) == expected
    assert usage_of(gateway, "trial-c")["requests"] == 1
    assert usage_of(gateway, "trial-d")["requests"] == 1  # the refused request is not a request upstream

    # a clean restart compacts the journal to one line per trial, with the same usage
    gateway.stop(signal.SIGTERM)
    gateway = gateway_process()
    records = [json.loads(line) for line in (tmp_path / "ledger" / JOURNAL_FILE).read_text().splitlines()]
    assert sorted(r["trial"] for r in records) == ["trial-a", "trial-b", "trial-c", "trial-d"]
    assert {r["op"] for r in records} == {"account"}
    for trial in ("trial-a", "trial-b"):
        assert usage_of(gateway, trial) == reference.usage(trial).to_dict()
    assert call(gateway.url + PATHS["chat"], method="POST", token=tokens["trial-c"], body=steps[0][2])[0] == 401
    gateway.stop(signal.SIGTERM)


def test_a_damaged_line_before_the_last_refuses_to_start(tmp_path: Path) -> None:
    from anchorage.errors import InfrastructureError
    from anchorage.gateway.journal import Journal

    (tmp_path / JOURNAL_FILE).write_text('{"op": "revoke", "trial": "t1"}\nnot json\n{"op": "revoke", "trial": "t2"}\n')
    with pytest.raises(InfrastructureError, match="line 2 is not a ledger record"):
        Ledger(b"secret", None, journal=Journal(tmp_path))


def test_reissuing_a_revoked_trial_is_journalled_too(tmp_path: Path) -> None:
    from anchorage.gateway.journal import Journal

    ledger = Ledger(b"secret", None, journal=Journal(tmp_path, fsync=False))
    token = ledger.issue("t1", budget_usd=2.0)
    ledger.revoke("t1")
    ledger.issue("t1", budget_usd=3.0, entry="e")
    ledger.close()  # writes what is queued
    again = Ledger(b"secret", None, journal=Journal(tmp_path, fsync=False))
    auth = again.authenticate(token)
    assert auth is not None and auth[0].budget_usd == 3.0 and auth[0].entry == "e"
    again.close()


def test_the_journal_is_compacted_while_running_and_replays_the_same_usage(tmp_path: Path) -> None:
    from anchorage.costs import TokenCounts
    from anchorage.gateway.journal import Journal

    ledger = Ledger(b"secret", None, journal=Journal(tmp_path, fsync=False, compact_at=4000))
    accounts = [ledger.authenticate(ledger.issue(f"trial-{i}")) for i in range(3)]
    for index in range(600):  # ~130 kB of "use" lines
        auth = accounts[index % 3]
        assert auth is not None
        ledger.record(auth[0], f"model-{index % 2}", TokenCounts(input_tokens=index, cached_input_tokens=index // 4,
                                                                 output_tokens=7, reasoning_tokens=index % 5),
                      retries=index % 2, error=index % 7 == 0)
    ledger.revoke("trial-2")
    ledger.close()
    lines = (tmp_path / JOURNAL_FILE).read_text().splitlines()
    assert json.loads(lines[0])["op"] == "account"  # compacted at least once while running
    assert len(lines) < 600 / 3
    again = Ledger(b"secret", None, journal=Journal(tmp_path, fsync=False))
    for i in range(3):
        assert again.usage(f"trial-{i}") == ledger.usage(f"trial-{i}")
    assert again.usage("trial-0").requests == 200
    assert again.authenticate(mint_token(b"secret", "trial-2")) is None
    again.close()
