"""The push relay of streamed bodies: nothing held back mid-stream, a slow client gets every byte, usage exact —
also when the client left before the usage frame, or did not ask for it.

A scripted upstream (an aiohttp app, not the mock) streams chat SSE frames whose size and pauses the test
controls; the gateway in front of it is the real one.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from anchorage.gateway import BackgroundServer

USAGE = {"prompt_tokens": 1000, "completion_tokens": 300, "completion_tokens_details": {"reasoning_tokens": 200},
         "prompt_tokens_details": {"cached_tokens": 250}}


def frame(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def content_frame(index: int, size: int) -> bytes:
    return frame({"choices": [{"index": 0, "delta": {"content": f"{index:06d}" + "x" * size}}]})


class ScriptedUpstream:
    """``frames`` content frames of ``size`` bytes; after frame ``hold_after`` it waits for :attr:`release`.
    ``usage``: end with the usage frame (else the stream reports none)."""

    def __init__(self, frames: int, size: int, hold_after: int | None = None, usage: bool = True) -> None:
        self.frames, self.size, self.hold_after, self.usage = frames, size, hold_after, usage
        self.release = threading.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        self.server = BackgroundServer(app, name="scripted-upstream").start()
        assert self.server.url is not None
        self.url: str = self.server.url

    def body(self, *, with_usage: bool = True) -> bytes:
        usage = frame({"choices": [], "usage": USAGE}) if self.usage and with_usage else b""
        return b"".join(content_frame(i, self.size) for i in range(self.frames)) + usage + b"data: [DONE]\n\n"

    async def chat(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for index in range(self.frames):
            await response.write(content_frame(index, self.size))
            if index == self.hold_after:
                while not self.release.is_set():
                    await asyncio.sleep(0.005)
        if self.usage:
            await response.write(frame({"choices": [], "usage": USAGE}))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


@pytest.fixture
def scripted() -> Iterator[Any]:
    made: list[ScriptedUpstream] = []

    def make(**kwargs: Any) -> ScriptedUpstream:
        made.append(ScriptedUpstream(**kwargs))
        return made[-1]

    yield make
    for upstream in made:
        upstream.release.set()
        upstream.server.stop()


BODY = {"model": "mock-model", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "hi"}]}


async def test_a_chunk_in_the_middle_of_a_stream_is_not_held_back(gateway_factory: Any, scripted: Any) -> None:
    upstream = scripted(frames=6, size=10, hold_after=3)
    gateway = gateway_factory(upstream)
    token = gateway.issue_token("trial-a")
    async with aiohttp.ClientSession() as session, session.post(
        gateway.url + "/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        received = b""
        while b"000003" not in received:  # frame 3 is relayed although the upstream now waits
            received += await asyncio.wait_for(response.content.readany(), timeout=10)
        assert b"000004" not in received
        upstream.release.set()
        received += await asyncio.wait_for(response.content.read(), timeout=10)
    assert received == upstream.body()
    usage = gateway.usage("trial-a")
    assert (usage.requests, usage.errors, usage.input_tokens, usage.cached_input_tokens) == (1, 0, 1000, 250)
    assert (usage.output_tokens, usage.reasoning_tokens) == (300, 200)


async def test_a_client_reading_slower_than_the_upstream_gets_every_byte(gateway_factory: Any, scripted: Any) -> None:
    upstream = scripted(frames=160, size=128 * 1024)  # 20 MB: more than socket buffers and the relay hold
    gateway = gateway_factory(upstream)
    token = gateway.issue_token("trial-a")
    async with aiohttp.ClientSession(read_bufsize=2**14) as session, session.post(
        gateway.url + "/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        received = await response.content.readexactly(100)
        await asyncio.sleep(0.3)  # not reading: the gateway's socket buffer to us fills, the relay pauses
        received += await asyncio.wait_for(response.content.read(), timeout=30)
    assert received == upstream.body()
    usage = gateway.usage("trial-a")
    assert (usage.requests, usage.errors, usage.input_tokens, usage.reasoning_tokens) == (1, 0, 1000, 200)


async def test_an_http10_client_gets_the_stream_unframed(gateway_factory: Any, scripted: Any) -> None:
    upstream = scripted(frames=30, size=100)
    gateway = gateway_factory(upstream)
    token = gateway.issue_token("trial-a")
    async with aiohttp.ClientSession(version=aiohttp.HttpVersion10) as session, session.post(
        gateway.url + "/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert "chunked" not in response.headers.get("Transfer-Encoding", "")
        received = await asyncio.wait_for(response.content.read(), timeout=10)
    assert received == upstream.body()
    assert gateway.usage("trial-a").input_tokens == 1000


async def leave_after_frame_3(gateway: Any, token: str, upstream: ScriptedUpstream, body: dict[str, Any]) -> None:
    """Read until frame 3, close the connection (the upstream holds after it), let the upstream go on, wait for
    the gateway to settle the request."""
    session = aiohttp.ClientSession()
    response = await session.post(gateway.url + "/v1/chat/completions", json=body,
                                  headers={"Authorization": f"Bearer {token}"})
    received = b""
    while b"000003" not in received:
        received += await asyncio.wait_for(response.content.readany(), timeout=10)
    response.close()  # the client goes away while the upstream still has frames to send
    await session.close()
    upstream.release.set()
    for _ in range(400):  # the relay notices at the upstream's next frame
        if gateway.usage("trial-a").requests:
            break
        await asyncio.sleep(0.025)


@pytest.mark.parametrize("asked", [True, False], ids=["usage-asked", "usage-not-asked"])
async def test_a_client_leaving_mid_stream_is_billed_what_the_upstream_reported(gateway_factory: Any, scripted: Any,
                                                                                asked: bool) -> None:
    upstream = scripted(frames=8, size=10, hold_after=3)
    gateway = gateway_factory(upstream)
    token = gateway.issue_token("trial-a")
    await leave_after_frame_3(gateway, token, upstream, BODY if asked else {**BODY, "stream_options": None})
    usage = gateway.usage("trial-a")
    # the gateway read on after the client left, until the usage frame: billed exactly, not an error
    assert (usage.requests, usage.errors, usage.unmetered_requests) == (1, 0, 0)
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (1000, 250, 300)
    assert usage.known_cost_usd is not None and usage.known_cost_usd > 0
    # the gateway still serves the next stream from the same upstream
    async with aiohttp.ClientSession() as again, again.post(
        gateway.url + "/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert await asyncio.wait_for(response.content.read(), timeout=10) == upstream.body()


async def test_a_client_that_did_not_ask_for_usage_gets_the_stream_without_it_and_is_billed(
        gateway_factory: Any, scripted: Any) -> None:
    upstream = scripted(frames=5, size=10)
    gateway = gateway_factory(upstream)
    token = gateway.issue_token("trial-a")
    for options in (None, {"include_usage": False}):
        async with aiohttp.ClientSession() as session, session.post(
            gateway.url + "/v1/chat/completions", json={**BODY, "stream_options": options},
            headers={"Authorization": f"Bearer {token}"}
        ) as response:
            received = await asyncio.wait_for(response.content.read(), timeout=10)
        assert received == upstream.body(with_usage=False)
    usage = gateway.usage("trial-a")
    assert (usage.requests, usage.unmetered_requests, usage.input_tokens, usage.output_tokens) == (2, 0, 2000, 600)


async def test_a_stream_without_usage_is_unmetered_and_the_trial_cost_unknown(gateway_factory: Any,
                                                                             scripted: Any) -> None:
    upstream = scripted(frames=5, size=10, usage=False)
    gateway = gateway_factory(upstream, admin_port=0)
    token = gateway.issue_token("trial-a", entry="entry-u", campaign="camp-u")
    async with aiohttp.ClientSession() as session, session.post(
        gateway.url + "/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert await asyncio.wait_for(response.content.read(), timeout=10) == upstream.body()
    usage = gateway.usage("trial-a")
    assert (usage.requests, usage.unmetered_requests, usage.input_tokens) == (1, 1, 0)
    assert usage.unmetered_input_tokens > 0 and usage.unmetered_reserved_usd > 0  # what is known, and the reserve
    assert usage.known_cost_usd is None and usage.cost_known is False
    assert usage.cost_unknown_reason is not None and "1 request(s) unmetered" in usage.cost_unknown_reason
    record = usage.to_dict()
    assert record["cost_known"] is False and record["unmetered_requests"] == 1
    async with aiohttp.ClientSession() as session, session.get(gateway.admin_url + "/metrics") as answer:
        text = await answer.text()
    assert 'anchorage_unmetered_requests_total{campaign="camp-u",entry="entry-u",model="mock-model"} 1.0' in text


async def test_a_client_leaving_a_stream_that_never_reports_usage_is_unmetered_after_the_drain(
        gateway_factory: Any, scripted: Any) -> None:
    upstream = scripted(frames=8, size=10, hold_after=3, usage=False)
    gateway = gateway_factory(upstream, disconnect_drain_seconds=5)
    await leave_after_frame_3(gateway, gateway.issue_token("trial-a"), upstream, BODY)
    usage = gateway.usage("trial-a")
    assert (usage.requests, usage.unmetered_requests, usage.errors) == (1, 1, 0)
    assert usage.cost_unknown_reason is not None and "unmetered" in usage.cost_unknown_reason
