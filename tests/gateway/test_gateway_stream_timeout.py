"""A stream whose upstream stalls is broken off after the upstream's ``timeout_seconds``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from anchorage.gateway import Gateway, GatewayConfig, start_gateway

TIMEOUT = 0.4


@pytest.fixture
def stalling(prices_file: Path, monkeypatch: pytest.MonkeyPatch, provider_key: str,
             upstream_factory: Any) -> Iterator[tuple[Any, Gateway]]:
    monkeypatch.setenv("TEST_PROVIDER_KEY", provider_key)
    upstream = upstream_factory(chunk_delay_seconds=TIMEOUT / 8, stream_chunk_chars=10,
                                replies=[{"marker": "[[long]]", "reply": "0123456789" * 24}])
    gateway = start_gateway(GatewayConfig.model_validate({
        "upstreams": [{"name": "mock", "base_url": upstream.url, "models": ["*"], "api_key_env": "TEST_PROVIDER_KEY",
                       "timeout_seconds": TIMEOUT}],
        "prices": str(prices_file)}))
    yield upstream, gateway
    gateway.stop()


async def read_stream(gateway: Gateway, prompt: str) -> tuple[bytes, bytes | None, float]:
    """(first event, the rest or None when the stream broke, seconds from first event to end/break)."""
    body = {"model": "mock-model", "stream": True, "messages": [{"role": "user", "content": prompt}]}
    headers = {"Authorization": f"Bearer {gateway.issue_token('trial-a')}"}
    async with aiohttp.ClientSession() as session, session.post(
        f"{gateway.url}/v1/chat/completions", json=body, headers=headers) as response:
        first = await asyncio.wait_for(response.content.readuntil(b"\n\n"), timeout=10)
        start = time.monotonic()
        try:
            rest: bytes | None = await asyncio.wait_for(response.content.read(), timeout=10)
        except aiohttp.ClientPayloadError:
            rest = None
        return first, rest, time.monotonic() - start


async def test_a_stalled_stream_is_broken_off_and_counted_as_an_error(stalling: tuple[Any, Gateway]) -> None:
    upstream, gateway = stalling
    first, rest, seconds = await read_stream(gateway, "[[hold:stall]] tell me a story")
    upstream.mock.release("stall")
    assert b'"role": "assistant"' in first
    assert rest is None, "the client must see a broken stream, not a short complete one"
    assert TIMEOUT * 0.9 <= seconds <= TIMEOUT * 1.25 + 2.0
    usage = gateway.usage("trial-a")
    assert usage.requests == 1 and usage.errors == 1


async def test_a_slow_but_steady_stream_is_not_broken_off(stalling: tuple[Any, Gateway]) -> None:
    """Chunks TIMEOUT/8 apart over several TIMEOUTs in total: the stream is idle, never for TIMEOUT."""
    _, gateway = stalling
    _, rest, seconds = await read_stream(gateway, "[[long]] a story of 24 chunks")
    assert rest is not None and rest.endswith(b"data: [DONE]\n\n")
    assert seconds > 1.5 * TIMEOUT  # the whole stream outlived one timeout
    usage = gateway.usage("trial-a")
    assert usage.requests == 1 and usage.errors == 0 and usage.output_tokens > 0


async def test_idle_watch_fires_only_after_the_counter_stood_still_for_the_timeout() -> None:
    """The watch itself (the gateway test above also covers the wait for the answer's head)."""
    from anchorage.gateway.upstream import IdleWatch

    loop = asyncio.get_running_loop()
    received, fired = [0], loop.create_future()
    watch = IdleWatch(loop, lambda: received[0], TIMEOUT, lambda: fired.set_result(time.monotonic()))
    try:
        for _ in range(12):  # 1.5 timeouts of steady data
            received[0] += 10
            await asyncio.sleep(TIMEOUT / 8)
        assert not fired.done()
        start = time.monotonic()
        ended = await asyncio.wait_for(fired, timeout=10)
        assert TIMEOUT * 0.7 <= ended - start <= TIMEOUT * 1.25 + 2.0
    finally:
        watch.cancel()
