"""Usage and cost per trial through the gateway are exact, streamed or not, for every API style.

Expected numbers are recomputed here from the mock's documented formulas (tokens = ⌈bytes/4⌉, cached =
⌊input·0.25⌋, reasoning from the effort) and the test snapshot's round prices, independently of the
gateway's parsing code.
"""

from __future__ import annotations

import json
import math
from typing import Any

import aiohttp
import pytest

from anchorage.gateway.mock import MOCK_HEADER, MODEL_SUFFIX

PROMPT = "Solve the dragon dance problem. Return JSON. " * 7
EFFORT_TOKENS = {"low": 64, "high": 1024}


def tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4)


def expected_cost(input_tokens: int, cached: int, billed_output: int) -> float:
    # test snapshot: mock-model input 1.0, cached 0.5, output 4.0 USD per 1M tokens
    return ((input_tokens - cached) * 1.0 + cached * 0.5 + billed_output * 4.0) / 1e6


def request_body(endpoint: str, *, stream: bool, effort: str) -> dict[str, Any]:
    if endpoint == "chat":
        return {"model": "mock-model", "stream": stream, "reasoning_effort": effort,
                "messages": [{"role": "user", "content": PROMPT}]}
    if endpoint == "responses":
        return {"model": "mock-model", "stream": stream, "reasoning": {"effort": effort}, "input": PROMPT}
    return {"model": "mock-model", "stream": stream, "max_tokens": 512, "reasoning_effort": effort,
            "messages": [{"role": "user", "content": PROMPT}]}


PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def reply_text(endpoint: str, stream: bool, raw: bytes) -> str:
    """The assistant text the client received (reassembled from the stream when streamed)."""
    if not stream:
        body = json.loads(raw)
        if endpoint == "chat":
            return str(body["choices"][0]["message"]["content"])
        if endpoint == "responses":
            return str(body["output"][0]["content"][0]["text"])
        return str(body["content"][0]["text"])
    text = ""
    for line in raw.decode().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        if endpoint == "chat" and event["choices"]:
            text += event["choices"][0]["delta"].get("content", "")
        elif event.get("type") in ("response.output_text.delta",):
            text += event["delta"]
        elif event.get("type") == "content_block_delta":
            text += event["delta"]["text"]
    return text


async def post(gateway_url: str, path: str, token: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as session, session.post(
        gateway_url + path, json=body, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        return response.status, dict(response.headers), await response.read()


@pytest.mark.parametrize("endpoint", ["chat", "responses", "messages"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("separately", [False, True], ids=["reasoning-in-output", "reasoning-outside"])
async def test_usage_and_cost_are_exact(gateway_factory: Any, upstream_factory: Any, endpoint: str,
                                        stream: bool, separately: bool) -> None:
    upstream = upstream_factory(reasoning_billed_separately=separately)
    gateway = gateway_factory(upstream, reasoning_in_output=not separately)
    token = gateway.issue_token("trial-a")
    status, headers, raw = await post(gateway.url, PATHS[endpoint], token,
                                      request_body(endpoint, stream=stream, effort="low"))
    assert status == 200, raw
    assert headers[MOCK_HEADER] == "1"
    assert MODEL_SUFFIX in raw.decode()
    text = reply_text(endpoint, stream, raw)
    assert text

    input_tokens = tokens(PROMPT)
    cached = int(input_tokens * 0.25)
    reasoning = EFFORT_TOKENS["low"]
    # Whatever the provider's counter convention, the billed output is reply + reasoning.
    billed_output = tokens(text) + reasoning
    usage = gateway.usage("trial-a")
    assert usage.requests == 1 and usage.errors == 0 and usage.retries == 0
    assert usage.input_tokens == input_tokens
    assert usage.cached_input_tokens == cached
    # Anthropic counts thinking inside output_tokens and reports no separate reasoning counter.
    assert usage.reasoning_tokens == (0 if endpoint == "messages" else reasoning)
    assert usage.billed_output_tokens == billed_output
    assert usage.cost_usd == pytest.approx(expected_cost(input_tokens, cached, billed_output), rel=1e-12)
    assert usage.unpriced_models == []
    json.dumps(usage.to_dict())  # the ledger goes into the trial record as JSON


async def test_usage_accumulates_per_trial_and_per_model(gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory())
    token = gateway.issue_token("trial-a")
    for stream in (False, True, False):
        body = request_body("chat", stream=stream, effort="high")
        assert (await post(gateway.url, PATHS["chat"], token, body))[0] == 200
    body = {**request_body("chat", stream=False, effort="low"), "model": "mock-alias"}
    assert (await post(gateway.url, PATHS["chat"], token, body))[0] == 200
    usage = gateway.usage("trial-a")
    assert usage.requests == 4
    assert set(usage.by_model) == {"mock-model", "mock-alias"}
    assert usage.by_model["mock-model"].requests == 3
    assert usage.reasoning_tokens == 3 * 1024 + 64
    assert usage.cost_usd == pytest.approx(sum(m.cost_usd for m in usage.by_model.values()), rel=1e-12)
    assert gateway.usage("never-seen").requests == 0


async def test_unpriced_model_is_flagged_not_free(gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory())
    token = gateway.issue_token("trial-a")
    body = {**request_body("chat", stream=False, effort="low"), "model": "brand-new-model"}
    assert (await post(gateway.url, PATHS["chat"], token, body))[0] == 200
    usage = gateway.usage("trial-a")
    assert usage.unpriced_models == ["brand-new-model"]
    assert usage.input_tokens == tokens(PROMPT)
    assert usage.to_dict()["unpriced_models"] == ["brand-new-model"]
    assert usage.to_dict()["billed_output_tokens"] == usage.billed_output_tokens > 0
