"""Retries within budget, per-trial token isolation, unbuffered streaming, limits, unix socket."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from anchorage.gateway.estimates import estimate
from anchorage.gateway.tokens import mint_token

CHAT = "/v1/chat/completions"


def chat(prompt: str = "hello", *, stream: bool = False, model: str = "mock-model") -> dict[str, Any]:
    return {"model": model, "stream": stream, "messages": [{"role": "user", "content": prompt}]}


async def post(url: str, token: str | None, body: dict[str, Any], *, header: str = "Authorization",
               ) -> tuple[int, dict[str, str], Any]:
    headers = {} if token is None else {header: f"Bearer {token}" if header == "Authorization" else token}
    async with aiohttp.ClientSession() as session, session.post(url + CHAT, json=body, headers=headers) as r:
        raw = await r.read()
        try:
            return r.status, dict(r.headers), json.loads(raw)
        except ValueError:
            return r.status, dict(r.headers), raw


# ----- retries ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("hint", ["retry_after", "reset_seconds"])
async def test_429_storm_within_budget_is_retried(gateway_factory: Any, upstream_factory: Any, hint: str) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream, retry={"max_attempts": 5})
    upstream.mock.fail(429, times=3, **{hint: 0.02})
    upstream.mock.fail(503, times=1)
    token = gateway.issue_token("trial-a")
    status, headers, body = await post(gateway.url, token, chat())
    assert status == 200, body
    assert headers["x-anchorage-attempts"] == "5"
    assert upstream.mock.pending_failures() == 0
    usage = gateway.usage("trial-a")
    assert (usage.requests, usage.retries, usage.errors) == (1, 4, 0)
    assert usage.input_tokens > 0


async def test_429_storm_past_attempts_is_a_clear_error(gateway_factory: Any, upstream_factory: Any) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream, retry={"max_attempts": 3})
    upstream.mock.fail(429, times=10, retry_after=0.01)
    status, headers, body = await post(gateway.url, gateway.issue_token("trial-a"), chat())
    assert status == 502
    error = body["error"]
    assert error["type"] == "upstream_retries_exhausted"
    assert error["attempts"] == 3 and error["last_status"] == 429
    assert "429, 429, 429" in error["message"] and "attempts used up" in error["message"]
    assert headers["x-anchorage-gateway-error"] == "upstream_retries_exhausted"
    assert upstream.mock.pending_failures() == 7  # exactly three attempts reached the upstream
    usage = gateway.usage("trial-a")
    assert (usage.requests, usage.retries, usage.errors) == (1, 2, 1)


async def test_cooldown_longer_than_budget_gives_up_without_waiting(gateway_factory: Any,
                                                                    upstream_factory: Any) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream, retry={"max_attempts": 5, "max_total_seconds": 5})
    upstream.mock.fail(429, times=2, reset_seconds=3600)
    status, _, body = await post(gateway.url, gateway.issue_token("trial-a"), chat())
    assert status == 502
    assert body["error"]["attempts"] == 1
    assert "would pass the 5 s budget" in body["error"]["message"]
    assert upstream.mock.pending_failures() == 1


async def test_client_errors_are_not_retried(gateway_factory: Any, upstream_factory: Any) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream)
    upstream.mock.fail(400, times=2)
    status, headers, _body = await post(gateway.url, gateway.issue_token("trial-a"), chat())
    assert status == 400 and headers["x-anchorage-attempts"] == "1"
    assert upstream.mock.pending_failures() == 1
    assert gateway.usage("trial-a").errors == 1


# ----- tokens ----------------------------------------------------------------------------------------


async def test_a_trials_token_is_billed_to_that_trial_only(gateway_factory: Any, upstream_factory: Any,
                                                          provider_key: str) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream)
    token_a, token_b = gateway.issue_token("trial-a"), gateway.issue_token("trial-b")
    assert token_a != token_b
    assert (await post(gateway.url, token_a, chat("from a")))[0] == 200
    assert (await post(gateway.url, token_a, chat("from a again")))[0] == 200
    assert (await post(gateway.url, token_b, chat("from b")))[0] == 200
    assert gateway.usage("trial-a").requests == 2
    assert gateway.usage("trial-b").requests == 1
    # The upstream saw the provider key, never a trial token.
    seen = list(upstream.mock.seen)
    assert {s.authorization for s in seen} == {f"Bearer {provider_key}"}


async def test_a_token_cannot_be_rewritten_for_another_trial(gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory())
    token_a = gateway.issue_token("trial-a")
    gateway.issue_token("trial-b")
    payload_b = mint_token(b"not-the-secret", "trial-b").split(".")[0]
    forged = payload_b + "." + token_a.split(".")[1]  # trial-b's name with trial-a's signature
    for token in (forged, mint_token(b"not-the-secret", "trial-b"), "sk-whatever", token_a + "x"):
        status, _, body = await post(gateway.url, token, chat())
        assert status == 401, token
        assert body["error"]["type"] == "invalid_api_key"
    status, _, _ = await post(gateway.url, None, chat())
    assert status == 401
    assert gateway.usage("trial-b").requests == 0 and gateway.usage("trial-a").requests == 0


async def test_revoked_token_is_refused(gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory())
    token = gateway.issue_token("trial-a")
    assert (await post(gateway.url, token, chat()))[0] == 200
    gateway.revoke("trial-a")
    assert (await post(gateway.url, token, chat()))[0] == 401
    assert gateway.usage("trial-a").requests == 1


async def test_anthropic_clients_authenticate_with_x_api_key(gateway_factory: Any, upstream_factory: Any,
                                                            provider_key: str) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream)
    token = gateway.issue_token("trial-a")
    async with aiohttp.ClientSession() as session, session.post(
        gateway.url + "/v1/messages", headers={"x-api-key": token, "anthropic-version": "2023-06-01"},
        json={"model": "mock-model", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    ) as response:
        assert response.status == 200
    assert upstream.mock.seen[-1].api_key == provider_key
    assert gateway.usage("trial-a").requests == 1


# ----- limits ----------------------------------------------------------------------------------------


async def test_rate_limit_per_trial(gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory())
    token = gateway.issue_token("trial-a", rate_per_min=2)
    other = gateway.issue_token("trial-b")
    assert [(await post(gateway.url, token, chat()))[0] for _ in range(2)] == [200, 200]
    status, headers, body = await post(gateway.url, token, chat())
    assert status == 429 and body["error"]["type"] == "rate_limited"
    assert "2 requests per minute" in body["error"]["message"] and int(headers["Retry-After"]) >= 1
    assert (await post(gateway.url, other, chat()))[0] == 200  # other trials are not affected


async def test_budget_per_trial(gateway_factory: Any, upstream_factory: Any) -> None:
    """A budget of one request's worst case admits that request; the next one (nothing in flight) is refused
    for good, with the figures and OpenAI's insufficient_quota code (clients stop retrying)."""
    gateway = gateway_factory(upstream_factory())
    body = {**chat("x" * 400), "max_tokens": 50}
    worst = estimate(body, len(json.dumps(body)), "chat", "mock-model", ceiling=32768, bytes_per_token=1.0,
                     snapshot=gateway.snapshot)
    token = gateway.issue_token("trial-a", budget_usd=worst.usd * 1.01)
    assert (await post(gateway.url, token, body))[0] == 200
    status, headers, answer = await post(gateway.url, token, body)
    error = answer["error"]
    assert status == 429 and error["type"] == "budget_exceeded" and error["code"] == "insufficient_quota"
    assert "Retry-After" not in headers and error["in_flight"] == 0 and error["reserved_usd"] == 0
    assert error["spent_usd"] == pytest.approx(gateway.usage("trial-a").cost_usd, abs=1e-9)
    assert error["budget_usd"] == pytest.approx(worst.usd * 1.01) and error["request_reserve_usd"] > 0
    assert "budget" in error["message"]
    assert gateway.usage("trial-a").requests == 1


# ----- streaming -------------------------------------------------------------------------------------


async def test_stream_is_passed_through_unbuffered(gateway_factory: Any, upstream_factory: Any) -> None:
    """The upstream holds its stream after the first chunk until the client got that chunk."""
    upstream = upstream_factory()
    gateway = gateway_factory(upstream)
    token = gateway.issue_token("trial-a")
    body = chat("[[hold:first-chunk]] tell me a story", stream=True)
    async with aiohttp.ClientSession() as session, session.post(
        gateway.url + CHAT, json=body, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        first = await asyncio.wait_for(response.content.readuntil(b"\n\n"), timeout=10)
        assert b'"role": "assistant"' in first
        assert gateway.usage("trial-a").requests == 0  # the upstream has not finished
        upstream.mock.release("first-chunk")
        rest = await asyncio.wait_for(response.content.read(), timeout=10)
    assert rest.endswith(b"data: [DONE]\n\n")
    assert gateway.usage("trial-a").requests == 1


@pytest.mark.parametrize("options", [None, {"include_usage": False}, {"include_usage": True}],
                         ids=["left-out", "opted-out", "asked"])
async def test_usage_is_asked_for_whatever_the_client_said(gateway_factory: Any, upstream_factory: Any,
                                                           options: dict[str, Any] | None) -> None:
    """The upstream always gets include_usage: true; the usage chunk reaches only a client that asked for it."""
    upstream = upstream_factory()
    gateway = gateway_factory(upstream)
    body = {**chat(stream=True), **({"stream_options": options} if options is not None else {})}
    status, _, raw = await post(gateway.url, gateway.issue_token("trial-a"), body)
    assert status == 200 and upstream.mock.seen[-1].body["stream_options"] == {"include_usage": True}
    events = [json.loads(line[6:]) for line in raw.decode().splitlines()
              if line.startswith("data: {")]
    usage_chunks = [e for e in events if e.get("usage") is not None]
    asked = options is not None and options["include_usage"]
    assert len(usage_chunks) == (1 if asked else 0) and raw.endswith(b"data: [DONE]\n\n")
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])  # the reply is all there
    usage = gateway.usage("trial-a")
    assert usage.requests == 1 and usage.output_tokens > 0 and usage.unmetered_requests == 0


# ----- routes ----------------------------------------------------------------------------------------


async def test_unknown_model_and_bad_body(gateway_factory: Any, upstream_factory: Any, prices_file: Path,
                                          ) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream)
    gateway.config.upstreams[0].models = ["mock-*"]
    token = gateway.issue_token("trial-a")
    status, _, body = await post(gateway.url, token, chat(model="gpt-unknown"))
    assert status == 404 and "gpt-unknown" in body["error"]["message"]
    async with aiohttp.ClientSession() as session, session.post(
        gateway.url + CHAT, data=b"not json", headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert response.status == 400
    async with aiohttp.ClientSession() as session, session.get(
        gateway.url + "/v1/models", headers={"Authorization": f"Bearer {token}"}
    ) as response:
        ids = [m["id"] for m in (await response.json())["data"]]
    assert "mock-model" in ids


async def test_unix_socket_listener(gateway_factory: Any, upstream_factory: Any, tmp_path: Path) -> None:
    socket_path = tmp_path / "gw.sock"
    gateway = gateway_factory(upstream_factory(), host=None, unix_socket=str(socket_path))
    assert gateway.url is None and gateway.unix_socket == socket_path
    token = gateway.issue_token("trial-a")
    connector = aiohttp.UnixConnector(path=str(socket_path))
    async with aiohttp.ClientSession(connector=connector) as session, session.post(
        "http://gateway" + CHAT, json=chat(), headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert response.status == 200
    assert gateway.usage("trial-a").requests == 1


async def test_metrics_route_counts_requests(gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory(), admin_port=0)
    assert (await post(gateway.url, gateway.issue_token("trial-a"), chat()))[0] == 200
    async with aiohttp.ClientSession() as session, session.get(gateway.admin_url + "/metrics") as response:
        text = await response.text()
    assert 'anchorage_gateway_requests_total{code="200",endpoint="chat",model="mock-model"}' in text
    assert "trial-a" not in text


async def test_no_prompt_or_key_in_logs_by_default(gateway_factory: Any, upstream_factory: Any,
                                                   provider_key: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="anchorage")
    upstream = upstream_factory()
    gateway = gateway_factory(upstream)
    upstream.mock.fail(429, times=1, retry_after=0.01)
    token = gateway.issue_token("trial-a")
    assert (await post(gateway.url, token, chat("SECRET-PROMPT-7f3a", stream=True)))[0] == 200
    assert (await post(gateway.url, token, chat("SECRET-PROMPT-7f3a")))[0] == 200
    assert "trial-a" in caplog.text  # the gateway did log (the retry, each request at DEBUG)
    for secret in ("SECRET-PROMPT-7f3a", provider_key, token):
        assert secret not in caplog.text


async def test_upstream_dropping_mid_stream_is_recorded_as_an_error(gateway_factory: Any,
                                                                    upstream_factory: Any) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream)
    upstream.mock.cut_streams(1)
    token = gateway.issue_token("trial-a")
    async with aiohttp.ClientSession() as session, session.post(
        gateway.url + CHAT, json=chat("story", stream=True), headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await asyncio.wait_for(response.content.read(), timeout=10)
    usage = gateway.usage("trial-a")
    assert (usage.requests, usage.errors, usage.input_tokens) == (1, 1, 0)
    assert (await post(gateway.url, token, chat("again", stream=True)))[0] == 200  # the next one is fine
