"""Hostile agents against the gateway's non-model endpoints, from inside the sandbox.

The agent's only way out is the gateway's model socket. On it, everything but the model API answers
401 without the trial's token and 404 with it — ``/metrics`` (other entries' tokens, costs and
scores), ``/healthz``, ``/admin/v1/*`` included; another trial's id or a made-up token gets 401. The
gateway's admin listener and the engine's own metrics port live on the host's network, which the
sandbox's private namespace cannot reach. The trial itself stays the honest ``Succeeded``.
"""

from __future__ import annotations

import pytest

from anchorage.runtime.local import sandbox
from anchorage.runtime.local.gatewaystart import LocalGateway
from anchorage.tasks import Task
from hostile.conftest import RunAttack, write_expected

pytestmark = pytest.mark.sandbox


PROBE = """
import json, os, socket, urllib.error, urllib.request
base = os.environ["OPENAI_BASE_URL"].removesuffix("/v1")
mine = os.environ["OPENAI_API_KEY"]
def call(method, path, token=None, body=None):
    headers = {"Authorization": "Bearer " + token} if token else {}
    request = urllib.request.Request(base + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
for token in (None, mine, "admin", "atk-" + "A" * 20 + ".forged"):
    for method, path in (("GET", "/metrics"), ("GET", "/healthz"), ("GET", "/admin/v1/usage/victim"),
                         ("POST", "/admin/v1/tokens"), ("DELETE", "/admin/v1/tokens/victim"),
                         ("GET", "/admin/v1/transcripts/victim"), ("GET", "/v1/../metrics")):
        status, text = call(method, path, token)
        leak = "anchorage_" in text or "HELP" in text or "cost_usd" in text
        print("endpoint", method, path, "mine" if token == mine else ("none" if token is None else "other"),
              status, "LEAK" if leak else "clean")
status, _ = call("POST", "/v1/chat/completions", mine,
                 json.dumps({"model": "mock", "messages": [{"role": "user", "content": "hi"}]}).encode())
print("model-route", status)
for port in PORTS:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3); print("WON host port", port)
    except OSError as exc:
        print("host port unreachable", port, type(exc).__name__)
"""


def test_only_the_model_api_answers_and_only_with_the_trials_token(
        attack: RunAttack, mech: sandbox.Mechanism, smoke_task: Task, local_gateway: LocalGateway) -> None:
    from anchorage import metrics

    host_metrics = metrics.serve(0, addr="127.0.0.1")
    try:
        code = f"PORTS = [{host_metrics.port}]\n" + PROBE + write_expected(smoke_task)
        result = attack(code, mech, gateway=local_gateway.gateway, model="mock")
    finally:
        host_metrics.stop()
    lines = [line.split() for line in result.stdout.splitlines() if line.startswith("endpoint")]
    assert len(lines) == 28, result.stdout + result.stderr
    for _, method, path, who, status, leak in lines:
        assert leak == "clean", (method, path, who)
        assert status == ("404" if who == "mine" else "401"), (method, path, who, status)
    assert result.said("model-route 200")
    assert f"host port unreachable {host_metrics.port}" in result.stdout
    assert "WON" not in result.stdout
    assert result.phase_reason == ("Succeeded", "completed"), result.record
    assert result.record["score"]["o_eval"] == 1.0
