"""Transcripts: kept only when the token asks and the config allows, redacted (keys and tokens), size-capped,
the same locally (``Gateway.transcript``) and through the admin API."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import aiohttp
import pytest

PROVIDER_KEY = "sk-provider-secret-0123"  # the conftest's provider key


async def post(url: str, token: str, path: str, data: dict[str, Any]) -> bytes:
    async with aiohttp.ClientSession() as session, session.post(
            url + path, json=data, headers={"Authorization": f"Bearer {token}"}) as response:
        assert response.status == 200
        return await response.read()


async def test_a_trial_that_asks_gets_its_bodies_redacted(gateway_factory: Any, upstream_factory: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GW_ADMIN", "the-admin-secret-token")
    gateway = gateway_factory(upstream_factory(), admin_port=0, admin_token_env="GW_ADMIN")
    token = gateway.issue_token("trial-a", transcript=True)
    other = gateway.issue_token("trial-b")  # did not ask
    leaky = (f"my token is {token}, the provider key {PROVIDER_KEY}, the admin one the-admin-secret-token, "
             "and a stranger's sk-abcdefghijklmnopqrstu")
    whole = await post(gateway.url, token, "/v1/chat/completions",
                       {"model": "mock-model", "messages": [{"role": "user", "content": leaky}]})
    streamed = await post(gateway.url, token, "/v1/responses", {"model": "mock-model", "stream": True,
                                                               "input": "tell me more"})
    await post(gateway.url, other, "/v1/chat/completions",
               {"model": "mock-model", "messages": [{"role": "user", "content": "not kept"}]})
    records = gateway.transcript("trial-a")
    assert [(r["endpoint"], r["stream"], r["status"]) for r in records] == [("chat", False, 200),
                                                                             ("responses", True, 200)]
    text = json.dumps(records)
    for secret in (token, PROVIDER_KEY, "the-admin-secret-token", "sk-abcdefghijklmnopqrstu"):
        assert secret not in text
    assert records[0]["request"]["messages"][0]["content"].count("[redacted]") == 4
    assert records[0]["response"] == json.loads(whole)  # (the reply holds no secret)
    assert records[1]["response_sse"] == streamed.decode()
    assert records[0]["usage"]["input_tokens"] > 0 and records[0]["unmetered"] is None
    assert gateway.transcript("trial-b") == []
    # the operator reads the same through the admin API (JSON lines)
    request = urllib.request.Request(gateway.admin_url + "/admin/v1/transcripts/trial-a",
                                     headers={"Authorization": "Bearer the-admin-secret-token"})
    with urllib.request.urlopen(request, timeout=10) as response:
        lines = [json.loads(line) for line in response.read().decode().splitlines()]
    assert lines == records


async def test_transcripts_are_capped(gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory(), transcripts={"max_bytes_per_trial": 4096, "max_body_bytes": 512})
    token = gateway.issue_token("trial-a", transcript=True)
    for index in range(12):
        await post(gateway.url, token, "/v1/chat/completions",
                   {"model": "mock-model", "messages": [{"role": "user", "content": f"{index} " + "x" * 900}]})
    records = gateway.transcript("trial-a")
    assert records[0]["request"]["truncated"] is True and records[0]["request"]["bytes"] > 900
    assert len(records[0]["request"]["head"]) <= 512
    assert records[-1]["truncated"] is True and records[-1]["dropped_requests"] == 12 - (len(records) - 1)
    assert sum(len(json.dumps(r)) for r in records[:-1]) <= 4096
    assert gateway.usage("trial-a").requests == 12  # capping the transcript never touches the requests


async def test_the_config_can_forbid_transcripts(gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory(), transcripts={"enabled": False})
    token = gateway.issue_token("trial-a", transcript=True)
    await post(gateway.url, token, "/v1/chat/completions",
               {"model": "mock-model", "messages": [{"role": "user", "content": "hi"}]})
    assert gateway.transcript("trial-a") == []
