"""Metering you can bill by: budgets that hold under concurrency, no unmetered tokens, unknown is not zero.

Against the mock upstream (its usage formulas: tokens = ⌈bytes/4⌉, cached = ⌊input·0.25⌋) and the test snapshot's
round prices (mock-model: input 1.0, cached 0.5, output 4.0 USD per 1M tokens). Expected figures are recomputed
here from those formulas, not read from the gateway.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import aiohttp
import pytest

from anchorage.gateway.estimates import estimate

PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
LONG_REPLY = "lorem ipsum dolor sit amet " * 200  # 5400 bytes: more than the output caps used here
MARKER = "[[long]]"


def tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4)


def cost(input_tokens: int, cached: int, output: int) -> float:
    return ((input_tokens - cached) * 1.0 + cached * 0.5 + output * 4.0) / 1e6


def body(endpoint: str, prompt: str, *, stream: bool, cap: int | None = None,
         include_usage: bool | None = None) -> dict[str, Any]:
    if endpoint == "responses":
        data: dict[str, Any] = {"model": "mock-model", "stream": stream, "input": prompt}
        if cap is not None:
            data["max_output_tokens"] = cap
    else:
        data = {"model": "mock-model", "stream": stream, "messages": [{"role": "user", "content": prompt}],
                "max_tokens": cap or 1024}
    if include_usage is not None:
        data["stream_options"] = {"include_usage": include_usage}
    return data


async def post(session: aiohttp.ClientSession, url: str, token: str, data: dict[str, Any],
               path: str = PATHS["chat"]) -> tuple[int, bytes]:
    async with session.post(url + path, json=data, headers={"Authorization": f"Bearer {token}",
                                                            "x-api-key": token}) as response:
        return response.status, await response.read()


# ----- budgets under concurrency ---------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("worth", [1, 2, 5])
async def test_fifty_concurrent_requests_never_overspend_the_budget(gateway_factory: Any, upstream_factory: Any,
                                                                   stream: bool, worth: int) -> None:
    """50 requests at once against a budget of 1, 2 or 5 requests' worth (their worst case: the output cap at
    the output price plus the body's bytes as input): what is spent stays within the budget plus one request's
    estimate error (the mock never bills more than the worst case, so that error is 0 here), at least ``worth``
    requests are served, and every other one is refused with the figures."""
    upstream = upstream_factory(reply_delay_seconds=0.05, chunk_delay_seconds=0.002, cached_ratio=0.0,
                                replies=[{"marker": MARKER, "reply": LONG_REPLY}])
    gateway = gateway_factory(upstream)
    data = body("chat", f"{MARKER} model the dragon dance", stream=stream, cap=64, include_usage=stream)
    worst = estimate(data, len(json.dumps(data)), "chat", "mock-model", ceiling=32768, bytes_per_token=1.0,
                     snapshot=gateway.snapshot)
    actual = cost(tokens(f"{MARKER} model the dragon dance"), 0, 64)  # the reply is cut at the cap
    assert actual <= worst.usd  # the worst case is an upper bound: the estimate error is 0
    error = max(actual - worst.usd, 0.0)
    budget = worth * worst.usd
    token = gateway.issue_token("trial-a", budget_usd=budget)
    async with aiohttp.ClientSession() as session:
        results = await asyncio.gather(*(post(session, gateway.url, token, data) for _ in range(50)))
    served = [raw for status, raw in results if status == 200]
    refused = [json.loads(raw)["error"] for status, raw in results if status == 429]
    assert len(served) + len(refused) == 50
    usage = gateway.usage("trial-a")
    assert usage.requests == len(served) >= worth
    assert usage.cost_usd == pytest.approx(len(served) * actual, rel=1e-9)
    assert usage.cost_usd <= budget + error
    assert refused and all(e["type"] == "budget_exceeded" and e["budget_usd"] == pytest.approx(budget)
                           and e["request_reserve_usd"] == pytest.approx(worst.usd) for e in refused)
    assert any(e["in_flight"] > 0 and e["reserved_usd"] > 0 for e in refused)  # refused while others were in flight


async def test_an_unmetered_request_counts_its_reservation_against_the_budget(gateway_factory: Any,
                                                                            upstream_factory: Any) -> None:
    """A trial cannot escape its budget through requests that report no usage: each is charged its worst case."""
    gateway = gateway_factory(upstream_factory(report_usage=False))
    data = body("chat", "hello", stream=False, cap=100)
    worst = estimate(data, len(json.dumps(data)), "chat", "mock-model", ceiling=32768, bytes_per_token=1.0,
                     snapshot=gateway.snapshot)
    token = gateway.issue_token("trial-a", budget_usd=2.5 * worst.usd)
    async with aiohttp.ClientSession() as session:
        statuses = [(await post(session, gateway.url, token, data))[0] for _ in range(4)]
    assert statuses == [200, 200, 429, 429]
    usage = gateway.usage("trial-a")
    assert usage.unmetered_requests == 2 and usage.unmetered_reserved_usd == pytest.approx(2 * worst.usd)


# ----- no unmetered tokens ---------------------------------------------------------------------------------


@pytest.mark.parametrize("include_usage", [False, None], ids=["opted-out", "left-out"])
async def test_a_client_without_usage_in_its_stream_is_billed_exactly(gateway_factory: Any, upstream_factory: Any,
                                                                     include_usage: bool | None) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream)
    token = gateway.issue_token("trial-a")
    prompt = "the smoke screen problem, please " * 5
    async with aiohttp.ClientSession() as session:
        status, raw = await post(session, gateway.url, token, body("chat", prompt, stream=True,
                                                                   include_usage=include_usage))
    assert status == 200
    events = [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]
    assert all(e["choices"] for e in events)  # no usage chunk reached the client
    reply = "".join(e["choices"][0]["delta"].get("content", "") for e in events)
    usage = gateway.usage("trial-a")
    input_tokens = tokens(prompt)
    cached = int(input_tokens * 0.25)
    assert (usage.requests, usage.unmetered_requests) == (1, 0)
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (input_tokens, cached,
                                                                                    tokens(reply))
    assert usage.known_cost_usd == pytest.approx(cost(input_tokens, cached, tokens(reply)), rel=1e-12)


@pytest.mark.parametrize("endpoint", ["chat", "responses", "messages"])
async def test_a_client_leaving_after_the_first_chunk_is_billed_what_the_upstream_reported(
        gateway_factory: Any, upstream_factory: Any, endpoint: str) -> None:
    upstream = upstream_factory(chunk_delay_seconds=0.01, replies=[{"marker": MARKER, "reply": LONG_REPLY[:2000]}])
    gateway = gateway_factory(upstream)
    token = gateway.issue_token("trial-a")
    prompt = f"{MARKER} leave early"
    session = aiohttp.ClientSession()
    response = await session.post(gateway.url + PATHS[endpoint], json=body(endpoint, prompt, stream=True),
                                  headers={"Authorization": f"Bearer {token}", "x-api-key": token})
    assert response.status == 200
    await asyncio.wait_for(response.content.readany(), timeout=10)  # the first chunk
    response.close()  # and gone, with ~80 chunks still to come
    await session.close()
    for _ in range(400):
        if gateway.usage("trial-a").requests:
            break
        await asyncio.sleep(0.025)
    usage = gateway.usage("trial-a")
    input_tokens = tokens(prompt)
    cached = int(input_tokens * 0.25)
    assert (usage.requests, usage.unmetered_requests, usage.errors) == (1, 0, 0)
    assert (usage.input_tokens, usage.cached_input_tokens) == (input_tokens, cached)
    assert usage.billed_output_tokens == tokens(LONG_REPLY[:2000])  # what the upstream reported at its end
    assert usage.known_cost_usd == pytest.approx(cost(input_tokens, cached, tokens(LONG_REPLY[:2000])), rel=1e-12)


@pytest.mark.parametrize("endpoint", ["chat", "responses", "messages"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_an_upstream_that_never_reports_usage_makes_the_trial_cost_unknown(
        gateway_factory: Any, upstream_factory: Any, endpoint: str, stream: bool) -> None:
    gateway = gateway_factory(upstream_factory(report_usage=False))
    token = gateway.issue_token("trial-a")
    async with aiohttp.ClientSession() as session:
        status, _ = await post(session, gateway.url, token, body(endpoint, "hello", stream=stream, include_usage=True),
                               PATHS[endpoint])
    assert status == 200
    usage = gateway.usage("trial-a")
    assert (usage.requests, usage.unmetered_requests, usage.input_tokens, usage.cost_usd) == (1, 1, 0, 0.0)
    assert usage.unmetered_input_tokens > 0  # what is known: the gateway's input estimate
    assert usage.known_cost_usd is None and not usage.cost_known
    record = usage.to_dict()
    assert record["cost_known"] is False and "1 request(s) unmetered" in record["cost_unknown_reason"]


async def test_a_helper_model_without_a_price_is_recorded_as_unpriced(gateway_factory: Any,
                                                                     upstream_factory: Any) -> None:
    """A CLI's own side requests (titles, summaries) on a model the snapshot does not price: the trial's cost
    becomes unknown, naming the model — never a silent 0 for those tokens."""
    gateway = gateway_factory(upstream_factory())
    token = gateway.issue_token("trial-a")
    async with aiohttp.ClientSession() as session:
        assert (await post(session, gateway.url, token, body("chat", "main work", stream=False)))[0] == 200
        helper = {**body("messages", "write a 5-word title", stream=False), "model": "claude-haiku-helper"}
        assert (await post(session, gateway.url, token, helper, PATHS["messages"]))[0] == 200
    usage = gateway.usage("trial-a")
    assert usage.requests == 2 and usage.by_model["claude-haiku-helper"].input_tokens > 0
    assert usage.known_cost_usd is None and "claude-haiku-helper" in (usage.cost_unknown_reason or "")
    assert usage.cost_usd == pytest.approx(usage.by_model["mock-model"].cost_usd)  # the priced part, a lower bound
