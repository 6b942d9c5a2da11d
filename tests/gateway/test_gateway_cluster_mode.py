"""Cluster mode: a shared token secret, the admin API on its own listener, the standalone command, unreachable
upstreams."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from anchorage.gateway.tokens import mint_token


def call(url: str, *, method: str = "GET", token: str | None = None, body: Any = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


CHAT = {"model": "mock-model", "messages": [{"role": "user", "content": "hi"}]}


def test_operator_minted_token_and_admin_api(gateway_factory: Any, upstream_factory: Any,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GW_SECRET", "shared-with-the-operator")
    monkeypatch.setenv("GW_ADMIN", "admin-token")
    gateway = gateway_factory(upstream_factory(), token_secret_env="GW_SECRET", admin_token_env="GW_ADMIN",
                              admin_port=0)
    admin = gateway.admin_url
    assert admin is not None and admin != gateway.url
    # The operator mints a token with the shared secret, without asking the gateway.
    minted = mint_token(b"shared-with-the-operator", "ns-trial-1")
    assert call(gateway.url + "/v1/chat/completions", method="POST", token=minted, body=CHAT)[0] == 200
    status, usage = call(admin + "/admin/v1/usage/ns-trial-1", token="admin-token")
    assert status == 200 and usage["requests"] == 1 and usage["input_tokens"] > 0
    # Admin-issued tokens carry limits; the admin API needs its own token.
    assert call(admin + "/admin/v1/tokens", method="POST", token=minted, body={"trial_id": "x"})[0] == 401
    status, issued = call(admin + "/admin/v1/tokens", method="POST", token="admin-token",
                          body={"trial_id": "ns-trial-2", "rate_per_min": 1})
    assert status == 200
    assert call(gateway.url + "/v1/chat/completions", method="POST", token=issued["token"], body=CHAT)[0] == 200
    assert call(gateway.url + "/v1/chat/completions", method="POST", token=issued["token"], body=CHAT)[0] == 429
    assert call(admin + "/admin/v1/tokens/ns-trial-1", method="DELETE", token="admin-token")[0] == 200
    assert call(gateway.url + "/v1/chat/completions", method="POST", token=minted, body=CHAT)[0] == 401


@pytest.mark.parametrize("path", ["/metrics", "/healthz", "/admin/v1/usage/ns-trial-1", "/admin/v1/tokens",
                                  "/nothing/here"])
def test_the_model_listener_serves_only_the_model_api_and_only_with_a_token(
        gateway_factory: Any, upstream_factory: Any, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """What an agent can reach (the model API's listener) answers nothing but model routes, each with a token."""
    monkeypatch.setenv("GW_ADMIN", "admin-token")
    gateway = gateway_factory(upstream_factory(), admin_token_env="GW_ADMIN", admin_port=0)
    token = gateway.issue_token("ns-trial-1")
    assert call(gateway.url + "/v1/chat/completions", method="POST", token=token, body=CHAT)[0] == 200
    for method in ("GET", "POST"):
        status, body = call(gateway.url + path, method=method, body={} if method == "POST" else None)
        assert status == 401 and body["error"]["type"] == "invalid_api_key", (method, body)
        # the admin token is no trial token: it opens nothing on this listener either
        assert call(gateway.url + path, method=method, token="admin-token")[0] == 401
        status, body = call(gateway.url + path, method=method, token=token)
        assert status == 404 and "not a model API route" in body["error"]["message"]
    assert call(gateway.url + "/v1/models")[0] == 401 and call(gateway.url + "/v1/models", token=token)[0] == 200
    # the admin listener has them (metrics and health without the admin token, the admin API with it)
    assert urllib.request.urlopen(gateway.admin_url + "/healthz", timeout=10).status == 200
    assert b"anchorage_gateway_requests_total" in urllib.request.urlopen(gateway.admin_url + "/metrics",
                                                                        timeout=10).read()
    assert call(gateway.admin_url + "/admin/v1/usage/ns-trial-1")[0] == 401
    assert call(gateway.admin_url + "/admin/v1/usage/ns-trial-1", token="admin-token")[1]["requests"] == 1


def test_head_of_the_base_url_is_answered_without_a_body(gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory())
    request = urllib.request.Request(gateway.url + "/", method="HEAD")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200 and response.read() == b""


def test_unreachable_upstream_is_retried_then_reported(gateway_factory: Any, upstream_factory: Any) -> None:
    upstream = upstream_factory()
    upstream.server.stop()  # nothing listens there any more
    gateway = gateway_factory(upstream, retry={"max_attempts": 2})
    status, body = call(gateway.url + "/v1/chat/completions", method="POST",
                        token=gateway.issue_token("trial-a"), body=CHAT)
    assert status == 502 and body["error"]["attempts"] == 2 and body["error"]["last_status"] is None
    assert "UpstreamConnectError" in body["error"]["message"]  # the connection error's type is named
    assert gateway.usage("trial-a").errors == 1


def test_missing_provider_key_is_reported_before_listening(upstream_factory: Any, prices_file: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from anchorage.errors import InputError
    from anchorage.gateway import GatewayConfig, start_gateway

    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    config = GatewayConfig.model_validate({"upstreams": [{"name": "p", "base_url": "http://127.0.0.1:9",
                                                          "api_key_env": "NO_SUCH_KEY_VAR"}],
                                           "prices": str(prices_file)})
    with pytest.raises(InputError, match="NO_SUCH_KEY_VAR"):
        start_gateway(config)


@pytest.mark.slow
def test_standalone_command_with_mock_upstream(tmp_path: Path, repo_root: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("port: 0\nupstreams:\n  - {name: none, base_url: 'http://127.0.0.1:9', models: [never-*]}\n")
    command = Path(sys.executable).parent / "anchorage"
    if not command.exists():
        pytest.skip(f"the anchorage console script is not installed beside {sys.executable}")
    env = {**os.environ, "PYTHONPATH": str(repo_root / "operator")}
    process = subprocess.Popen(
        [str(command), "gateway", "--config", str(config), "--mock", "--admin-port", "0",
         "--issue-token", "demo-trial"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(5)]
        url = re.search(r"listening on (http://\S+)", lines[0])
        admin = re.search(r"admin API.* on (http://\S+)", lines[1])
        token = re.search(r"token demo-trial: (\S+)", lines[3])
        assert url and admin and token, lines
        assert "usage ledger: in memory only" in lines[4]  # no --ledger-dir: a restart would lose usage
        status, body = call(url.group(1) + "/v1/chat/completions", method="POST", token=token.group(1),
                            body={**CHAT, "model": "gpt-5.5"})
        assert status == 200 and body["model"] == "gpt-5.5-mock"
        assert urllib.request.urlopen(admin.group(1) + "/healthz", timeout=10).status == 200
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=15)
        assert process.stdout is not None
        process.stdout.close()
    assert code == 0


def test_config_file_and_base_url_forms(tmp_path: Path) -> None:
    from anchorage.errors import InputError
    from anchorage.gateway import GatewayConfig

    path = tmp_path / "gateway.yaml"
    path.write_text("port: 8080\nupstreams:\n  - {name: openai, base_url: 'https://api.openai.com/v1/', "
                    "api_key_env: OPENAI_API_KEY, models: ['gpt-*']}\n"
                    "  - {name: claude, base_url: 'https://api.anthropic.com', api: anthropic, models: ['claude-*']}\n")
    config = GatewayConfig.load(path)
    assert config.upstreams[0].base_url == "https://api.openai.com"
    assert config.upstream_for("gpt-5.5", "openai") is config.upstreams[0]
    assert config.upstream_for("claude-sonnet-4", "anthropic") is config.upstreams[1]
    assert config.upstream_for("claude-sonnet-4", "openai") is None
    path.write_text("upstreams:\n  - {name: x, base_url: 'api.example.com'}\n")
    with pytest.raises(InputError, match="must start with http"):
        GatewayConfig.load(path)
    path.write_text("host: null\nupstreams:\n  - {name: x, base_url: 'http://a'}\n")
    with pytest.raises(InputError, match="listen somewhere"):
        GatewayConfig.load(path)


def _metric_lines(admin: str, name: str) -> list[str]:
    with urllib.request.urlopen(admin + "/metrics", timeout=10) as response:
        return [line for line in response.read().decode().splitlines() if line.startswith(name + "{")]


def test_a_minted_campaign_labels_cost_and_the_admin_api_forgets_a_deleted_campaign(
        gateway_factory: Any, upstream_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's token names the trial's campaign (signed: the agent cannot move its spend to another);
    deleting the campaign removes its series from the gateway's /metrics, other campaigns' stay."""
    monkeypatch.setenv("GW_SECRET", "shared-with-the-operator")
    monkeypatch.setenv("GW_ADMIN", "admin-token")
    gateway = gateway_factory(upstream_factory(), token_secret_env="GW_SECRET", admin_token_env="GW_ADMIN",
                              admin_port=0)
    admin = gateway.admin_url
    assert admin is not None
    for trial, campaign in (("ns.c1-s0.u1", "camp-del"), ("ns.c2-s0.u2", "camp-kept")):
        minted = mint_token(b"shared-with-the-operator", trial, "entry-x", campaign=campaign)
        assert call(gateway.url + "/v1/chat/completions", method="POST", token=minted, body=CHAT)[0] == 200
    tokens = _metric_lines(admin, "anchorage_tokens_total")
    assert any('campaign="camp-del"' in line and 'entry="entry-x"' in line for line in tokens), tokens
    assert call(admin + "/admin/v1/campaigns/camp-del/metrics", method="DELETE", token="minted")[0] == 401
    status, answer = call(admin + "/admin/v1/campaigns/camp-del/metrics", method="DELETE", token="admin-token")
    assert status == 200 and answer["series_removed"] > 0
    tokens = _metric_lines(admin, "anchorage_tokens_total")
    assert not any('campaign="camp-del"' in line for line in tokens)
    assert any('campaign="camp-kept"' in line for line in tokens)
