"""What real agent CLIs need from the gateway: refused tokens never reach the upstream, WebSocket upgrades get a
426 (codex falls back to HTTP at once), query strings are kept, count_tokens is answered and never billed, and
a client closing its connection after the last event is normal (no error logged)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import REGISTRY

from anchorage.gateway import BackgroundServer


def websocket_refusals() -> float:
    """WebSocket upgrades the gateways of this process refused so far."""
    return REGISTRY.get_sample_value("anchorage_gateway_refusals_total", {"reason": "websocket"}) or 0.0


CHAT = {"model": "mock-model", "messages": [{"role": "user", "content": "hi"}]}


async def status_of(url: str, token: str, path: str, data: dict[str, Any]) -> int:
    async with aiohttp.ClientSession() as session, session.post(
            url + path, json=data, headers={"Authorization": f"Bearer {token}", "x-api-key": token}) as response:
        await response.read()
        return response.status


@pytest.mark.parametrize("how", ["expired", "revoked", "forged"])
async def test_a_refused_token_gets_401_and_never_reaches_the_upstream(gateway_factory: Any, upstream_factory: Any,
                                                                      how: str) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream)
    if how == "expired":
        token = gateway.issue_token("trial-a", expires_at=time.time() - 1)
    else:
        token = gateway.issue_token("trial-a", expires_at=time.time() + 3600)
        if how == "revoked":
            assert await status_of(gateway.url, token, "/v1/chat/completions", CHAT) == 200
            gateway.revoke("trial-a")
        else:
            token = token[:-2] + ("AA" if token[-2:] != "AA" else "BB")
    seen = len(upstream.mock.seen)
    for path, data in [("/v1/chat/completions", CHAT), ("/v1/chat/completions", {**CHAT, "stream": True}),
                       ("/v1/responses", {"model": "mock-model", "input": "hi"}),
                       ("/v1/messages", {**CHAT, "max_tokens": 10}),
                       ("/v1/messages/count_tokens", CHAT)]:
        assert await status_of(gateway.url, token, path, data) == 401, path
    async with aiohttp.ClientSession() as session, session.post(
            gateway.url + "/v1/chat/completions", json=CHAT, headers={"Authorization": f"Bearer {token}"}) as response:
        message = (await response.json())["error"]["message"]
    assert {"expired": "expired at", "revoked": "revoked", "forged": "not signed"}[how] in message
    assert len(upstream.mock.seen) == seen  # nothing reached the upstream
    assert gateway.usage("trial-a").requests == (1 if how == "revoked" else 0)


async def test_a_websocket_upgrade_of_responses_gets_426_at_once(gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory())
    token = gateway.issue_token("trial-a")
    started = time.monotonic()
    before = websocket_refusals()
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(gateway.url.replace("http", "ws") + "/v1/responses",
                                     headers={"Authorization": f"Bearer {token}"})
        assert refused.value.status == 426
        with pytest.raises(aiohttp.WSServerHandshakeError) as anonymous:
            await session.ws_connect(gateway.url.replace("http", "ws") + "/v1/responses")
        assert anonymous.value.status == 401
    assert websocket_refusals() == before + 1  # the anonymous one is "unauthorized"
    assert time.monotonic() - started < 5
    assert await status_of(gateway.url, token, "/v1/responses", {"model": "mock-model", "input": "hi"}) == 200


async def test_query_strings_are_kept(gateway_factory: Any, upstream_factory: Any) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream)
    token = gateway.issue_token("trial-a")
    assert await status_of(gateway.url, token, "/v1/messages?beta=true", {**CHAT, "max_tokens": 10}) == 200
    assert upstream.mock.seen[-1].path == "/v1/messages" and upstream.mock.seen[-1].query == "beta=true"
    assert await status_of(gateway.url, token, "/v1/chat/completions?api-version=2024-10&x=%20y", CHAT) == 200
    assert upstream.mock.seen[-1].query == "api-version=2024-10&x=%20y"


async def test_count_tokens_is_forwarded_or_estimated_and_never_billed(gateway_factory: Any,
                                                                      upstream_factory: Any) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream)
    token = gateway.issue_token("trial-a")
    prompt = "count the tokens of this prompt " * 4
    data = {"model": "mock-model", "messages": [{"role": "user", "content": prompt}]}
    async with aiohttp.ClientSession() as session:
        async with session.post(gateway.url + "/v1/messages/count_tokens", json=data,
                                headers={"x-api-key": token}) as response:
            assert response.status == 200 and "x-anchorage-estimated" not in response.headers
            assert (await response.json())["input_tokens"] == -(-len(prompt) // 4)  # the mock's count
        # an upstream without the route: the gateway estimates, and says so
        bare = web.Application()
        server = BackgroundServer(bare, name="no-count-tokens").start()
        try:
            assert server.url is not None
            gateway.config.upstreams[1].base_url = server.url
            async with session.post(gateway.url + "/v1/messages/count_tokens", json=data,
                                    headers={"x-api-key": token}) as response:
                assert response.status == 200 and response.headers["x-anchorage-estimated"] == "1"
                assert (await response.json())["input_tokens"] > 0
        finally:
            server.stop()
    assert gateway.usage("trial-a").requests == 0  # counting is not a completion


def read_until_done_then_reset(port: int, token: str) -> bytes:
    """A raw HTTP/1.1 client that reads a streamed answer up to its last event and then resets the connection."""
    payload = json.dumps({**CHAT, "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Authorization: Bearer " + token.encode() + b"\r\nContent-Length: " +
                     str(len(payload)).encode() + b"\r\n\r\n" + payload)
        received = b""
        while b"data: [DONE]" not in received:
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close
    return received


async def test_a_connection_reset_after_the_last_event_is_normal(gateway_factory: Any, upstream_factory: Any,
                                                                caplog: pytest.LogCaptureFixture,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from anchorage.gateway.server import GatewayApp

    original = GatewayApp._durable

    async def slow_durable(self: GatewayApp) -> None:  # the ledger's journal takes a moment: the client is gone
        await original(self)
        await asyncio.sleep(0.3)

    monkeypatch.setattr(GatewayApp, "_durable", slow_durable)
    caplog.set_level(logging.DEBUG)
    gateway = gateway_factory(upstream_factory())
    token = gateway.issue_token("trial-a")
    port = int(gateway.url.rsplit(":", 1)[1])
    for _ in range(3):
        await asyncio.to_thread(read_until_done_then_reset, port, token)
    await asyncio.sleep(0.6)
    assert gateway.usage("trial-a").requests == 3 and gateway.usage("trial-a").unmetered_requests == 0
    problems = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not problems, [f"{r.name}: {r.getMessage()}" for r in problems]
    assert not any(r.exc_info for r in caplog.records)


def test_a_token_issued_for_a_trial_expires_with_its_timeout_plus_the_margin(
        gateway_factory: Any, upstream_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from anchorage.gateway.tokens import EXPIRY_MARGIN_SECONDS, verify_token

    monkeypatch.setenv("GW_SECRET_FOR_EXPIRY", "expiry-secret")
    gateway = gateway_factory(upstream_factory(), token_secret_env="GW_SECRET_FOR_EXPIRY")
    token = gateway.issue_token("trial-a", timeout_sec=600)
    claims = verify_token(b"expiry-secret", token)
    assert claims is not None and claims.expires_at is not None
    assert abs(claims.expires_at - (time.time() + 600 + EXPIRY_MARGIN_SECONDS)) < 5


async def test_a_providers_cookie_does_not_follow_one_trial_into_another(gateway_factory: Any) -> None:
    """The gateway's one upstream session keeps no cookies: what a provider sets for one trial's request
    (load-balancer affinity, bot checks) never rides along on another trial's."""
    cookies: list[str | None] = []

    async def chat(request: web.Request) -> web.Response:
        cookies.append(request.headers.get("Cookie"))
        response = web.json_response({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
        response.set_cookie("affinity", f"trial-{len(cookies)}")
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    server = BackgroundServer(app, name="cookie-setter").start()
    try:
        assert server.url is not None

        class Upstream:  # by name: aiohttp's default jar keeps no cookies of bare IP addresses
            url = server.url.replace("127.0.0.1", "localhost")

        gateway = gateway_factory(Upstream())
        for trial in ("trial-a", "trial-b"):
            assert await status_of(gateway.url, gateway.issue_token(trial), "/v1/chat/completions", CHAT) == 200
    finally:
        server.stop()
    assert cookies == [None, None]
