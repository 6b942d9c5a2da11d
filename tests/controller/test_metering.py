"""The operator's gateway bookkeeping against a real gateway (mock upstream): a trial's usage and cost at its end,
revocation, and cost *unknown* — with the reason — when the gateway cannot tell it (never a silent 0)."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from anchorage.controller import metering
from anchorage.controller.trialstate import task_inputs
from anchorage.errors import InputError
from anchorage.gateway import Gateway, GatewayConfig, start_gateway
from anchorage.gateway.mock import MockConfig, start_mock
from anchorage.gateway.tokens import mint_token
from anchorage.manifests import TrialSpec
from anchorage.runtime.kube.jobs import OperatorConfig
from anchorage.trials import costing

SECRET, ADMIN = "hmac-secret", "admin-token"
PRICES = "version: unit\nmodels:\n  mock-model: {input: 2.0, cached_input: 1.0, output: 8.0}\n"
TRIAL = {"metadata": {"namespace": "evals", "name": "t1", "uid": "0a1b"}}
MODEL = TrialSpec.model_validate({"task": "smoke-inventory", "agent": {"kind": "command", "command": ["x"],
                                                                       "model": "mock-model"}})
ORACLE = TrialSpec.model_validate({"task": "smoke-inventory", "agent": {"kind": "oracle"}})


@pytest.fixture
def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gateway]:
    monkeypatch.setenv("UNIT_GW_SECRET", SECRET)
    monkeypatch.setenv("UNIT_GW_ADMIN", ADMIN)
    monkeypatch.setenv(metering.TOKEN_SECRET_ENV, SECRET)
    monkeypatch.setenv(metering.ADMIN_TOKEN_ENV, ADMIN)
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    with start_mock() as mock, start_gateway(GatewayConfig.model_validate({
            "upstreams": [{"name": "mock", "base_url": mock.url}], "prices": str(prices),
            "token_secret_env": "UNIT_GW_SECRET", "admin_token_env": "UNIT_GW_ADMIN", "admin_port": 0})) as running:
        yield running


def chat(gateway: Gateway, token: str, model: str = "mock-model") -> tuple[int, dict[str, object]]:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "price this"}]}).encode()
    request = urllib.request.Request(f"{gateway.url}/v1/chat/completions", data=body, headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def config(gateway: Gateway) -> OperatorConfig:
    return OperatorConfig(gateway_url=f"{gateway.url}/v1", gateway_admin_url=gateway.admin_url)


def test_settle_reads_exact_usage_and_revokes_the_token(gateway: Gateway) -> None:
    token = mint_token(SECRET.encode(), metering.trial_id(TRIAL))
    status, reply = chat(gateway, token)
    assert status == 200
    usage = reply["usage"]
    assert isinstance(usage, dict)
    fields = metering.settle(TRIAL, config(gateway))
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    expected = ((usage["prompt_tokens"] - cached) * 2.0 + cached * 1.0 + usage["completion_tokens"] * 8.0) / 1e6
    assert fields["costUSD"] == pytest.approx(expected, rel=1e-9) and fields["costUnknownReason"] is None
    assert fields["usage"] == {"requests": 1, "inputTokens": usage["prompt_tokens"], "cachedInputTokens": cached,
                               "outputTokens": usage["completion_tokens"],
                               "billedOutputTokens": usage["completion_tokens"], "reasoningTokens": 0,
                               "unmeteredRequests": 0}
    assert chat(gateway, token)[0] == 401, "the token is revoked at the trial's end"
    other = {"metadata": {**TRIAL["metadata"], "uid": "ffff"}}  # the same name re-created: a fresh ledger
    assert chat(gateway, mint_token(SECRET.encode(), metering.trial_id(other)))[0] == 200
    record = metering.record_fields(fields)
    assert record["cost_usd"] == fields["costUSD"] and record["usage"]["input_tokens"] == usage["prompt_tokens"]


def test_a_protocol_steps_token_is_revoked_and_its_usage_priced_when_its_pod_ends(gateway: Gateway) -> None:
    """A panel/CBU pod's own account: the operator revokes its token at the step's end and records what the gateway
    metered — the same fields as the local engine (``protocol_cost``), the agent's account untouched."""
    agent = mint_token(SECRET.encode(), metering.trial_id(TRIAL))
    step = mint_token(SECRET.encode(), metering.step_account(TRIAL, "panel"))
    replies = [chat(gateway, step)[1]["usage"] for _ in range(2)]
    assert all(isinstance(u, dict) for u in replies)
    cost = metering.settle_step(TRIAL, "panel", config(gateway))
    assert chat(gateway, step)[0] == 401, "the step's token is revoked when its pod ends"
    assert chat(gateway, agent)[0] == 200, "the agent's token is another account"
    inputs = sum(int(u["prompt_tokens"]) for u in replies)  # type: ignore[index]
    outputs = sum(int(u["completion_tokens"]) for u in replies)  # type: ignore[index]
    cached = sum(int(u["prompt_tokens_details"]["cached_tokens"]) for u in replies)  # type: ignore[index]
    assert cost["usage"]["requests"] == 2 and cost["usage"]["input_tokens"] == inputs
    assert cost["usage"]["output_tokens"] == outputs
    assert cost["cost_usd"] == pytest.approx(((inputs - cached) * 2.0 + cached * 1.0 + outputs * 8.0) / 1e6, rel=1e-9)
    assert cost["cost_source"] == costing.GATEWAY_SOURCE and cost["cost_unknown_reason"] is None
    assert metering.settle_step(TRIAL, "cbu", config(gateway)) == costing.protocol_cost([]), "cbu never called"


def test_a_protocol_steps_cost_is_unknown_without_an_admin_token(gateway: Gateway,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(metering.ADMIN_TOKEN_ENV)
    cost = metering.settle_step(TRIAL, "panel", config(gateway))
    assert cost["cost_usd"] is None and cost["usage"] is None
    assert metering.ADMIN_TOKEN_ENV in cost["cost_unknown_reason"] and "verification.panel" in cost["cost_unknown_reason"]


def test_cost_is_unknown_when_the_gateway_cannot_be_reached(gateway: Gateway) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    fields = metering.settle(TRIAL, OperatorConfig(gateway_url=f"http://127.0.0.1:{port}/v1",
                                                   gateway_admin_url=f"http://127.0.0.1:{port}"))
    assert fields["costUSD"] is None and fields["usage"] is None
    assert "could not be read" in fields["costUnknownReason"] and f"127.0.0.1:{port}" in fields["costUnknownReason"]
    record = metering.record_fields({k: v for k, v in fields.items() if v is not None})
    assert record["cost_usd"] is None and "could not be read" in record["cost_unknown_reason"]


def test_cost_is_unknown_for_an_unpriced_model(gateway: Gateway) -> None:
    token = mint_token(SECRET.encode(), metering.trial_id(TRIAL))
    assert chat(gateway, token, model="mystery-model")[0] == 200
    fields = metering.settle(TRIAL, config(gateway))
    assert fields["costUSD"] is None and "mystery-model" in fields["costUnknownReason"]
    assert fields["usage"]["requests"] == 1, "the tokens are still recorded"


def test_cost_is_unknown_when_the_upstream_reported_no_usage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests the upstream answered without usage: the Trial's cost is unknown (not the 0 of ``cost_usd or 0.0``),
    the reason says how many, and usage.unmeteredRequests counts them."""
    monkeypatch.setenv("UNIT_GW_SECRET", SECRET)
    monkeypatch.setenv("UNIT_GW_ADMIN", ADMIN)
    monkeypatch.setenv(metering.ADMIN_TOKEN_ENV, ADMIN)
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    with start_mock(MockConfig(report_usage=False)) as mock, start_gateway(GatewayConfig.model_validate({
            "upstreams": [{"name": "mock", "base_url": mock.url}], "prices": str(prices), "admin_port": 0,
            "token_secret_env": "UNIT_GW_SECRET", "admin_token_env": "UNIT_GW_ADMIN"})) as running:
        token = mint_token(SECRET.encode(), metering.trial_id(TRIAL))
        assert chat(running, token)[0] == 200 and chat(running, token)[0] == 200
        fields = metering.settle(TRIAL, config(running))
    assert fields["costUSD"] is None and "2 request(s)" in fields["costUnknownReason"]
    assert "metered" in fields["costUnknownReason"]
    assert fields["usage"]["unmeteredRequests"] == 2 and fields["usage"]["requests"] == 2
    record = metering.record_fields({k: v for k, v in fields.items() if v is not None})
    assert record["cost_usd"] is None and "metered" in record["cost_unknown_reason"]
    assert record["usage"]["unmetered_requests"] == 2


def test_cost_is_unknown_without_an_admin_token(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(metering.ADMIN_TOKEN_ENV)
    fields = metering.settle(TRIAL, config(gateway))
    assert fields["costUSD"] is None and metering.ADMIN_TOKEN_ENV in fields["costUnknownReason"]


def test_check_refuses_a_model_trial_without_the_token_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(metering.TOKEN_SECRET_ENV, raising=False)
    metering.check(ORACLE, task_inputs(ORACLE)[0])  # no model, no token needed
    with pytest.raises(InputError, match="ANCHORAGE_GATEWAY_TOKEN_SECRET is not set") as info:
        metering.check(MODEL, task_inputs(MODEL)[0])
    assert "gateway.tokenSecret.name" in str(info.value)


def test_operator_flags_become_the_gateway_config() -> None:
    import typer

    from anchorage.commands.operator import operator_config

    cfg = operator_config(store="file:///runs", gateway_selector=["app=gw", "tier=models"],
                          gateway_url="http://gw.ns.svc:9000/v1", gateway_namespace="ns", agent_image="a:1")
    assert cfg.gateway_selector == {"app": "gw", "tier": "models"} and cfg.admin_url() == "http://gw.ns.svc:9090"
    assert (cfg.gateway_namespace, cfg.agent_image, cfg.verifier_image) == ("ns", "a:1", OperatorConfig().verifier_image)
    with pytest.raises(typer.BadParameter, match="not KEY=VALUE"):
        operator_config(store="file:///runs", gateway_selector=["app"])
    with pytest.raises(typer.BadParameter, match="must end in /v1"):
        operator_config(store="file:///runs", gateway_selector=[], gateway_url="http://gw.ns.svc:9000")
