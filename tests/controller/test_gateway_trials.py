"""Model-calling trials in the cluster fake: per-trial gateway tokens in Secrets owned by the Jobs, calls through
a real gateway (in front of the labelled mock upstream), revocation, exact tokens and cost in the Trial status,
the ``trial.json`` records and the campaign's aggregation; a clear failure without the token secret; cost
*unknown* (never a silent 0) without the admin token; and the fake kubelet holding a container until the Secret
its environment references exists."""

from __future__ import annotations

import base64
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from anchorage.gateway import Gateway, GatewayConfig, start_gateway
from anchorage.gateway.mock import MockConfig, start_mock
from anchorage.gateway.tokens import TOKEN_PREFIX, trial_of_token

from .conftest import Env, chat_status

pytestmark = pytest.mark.sandbox

TOKEN_SECRET = "shared-hmac-secret-of-the-test"
ADMIN_TOKEN = "admin-token-of-the-test"
PROVIDER_KEY = "sk-provider-key-the-agent-never-sees"
PRICES = "version: test-gw\nmodels:\n  mock-model: {input: 1.0, cached_input: 0.5, output: 4.0}\n"

# The agent: two chat calls through the gateway, one authenticated like the OpenAI SDK (Bearer
# $OPENAI_API_KEY), one like Anthropic's (x-api-key $ANTHROPIC_API_KEY); it keeps the replies as its
# result. No braces: the operator fills {placeholders} in command arguments.
AGENT = r"""
import json, os, urllib.request
base = os.environ["OPENAI_BASE_URL"].rstrip("/")
replies = []
for header, value in (("Authorization", "Bearer " + os.environ["OPENAI_API_KEY"]),
                      ("x-api-key", os.environ["ANTHROPIC_API_KEY"])):
    prompt = "seed " + os.environ["ANCHORAGE_SEED"] + " authenticated by " + header
    body = json.dumps(dict(model="mock-model", messages=[dict(role="user", content=prompt)])).encode()
    request = urllib.request.Request(base + "/chat/completions", data=body)
    request.add_header("Content-Type", "application/json")
    request.add_header(header, value)
    replies.append(json.loads(urllib.request.urlopen(request, timeout=30).read()))
open("/root/results/replies.json", "w").write(json.dumps(replies))
"""
MODEL_AGENT = {"kind": "command", "model": "mock-model", "command": ["python", "-c", AGENT]}


@pytest.fixture
def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gateway]:
    """A gateway with the shared token secret and the admin API, in front of the mock upstream."""
    monkeypatch.setenv("TEST_GW_TOKEN_SECRET", TOKEN_SECRET)
    monkeypatch.setenv("TEST_GW_ADMIN_TOKEN", ADMIN_TOKEN)
    monkeypatch.setenv("TEST_GW_PROVIDER_KEY", PROVIDER_KEY)
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    with start_mock(MockConfig(expected_api_key=PROVIDER_KEY)) as mock, start_gateway(GatewayConfig.model_validate({
            "upstreams": [{"name": "mock", "base_url": mock.url, "models": ["mock-*"],
                           "api_key_env": "TEST_GW_PROVIDER_KEY"}],
            "prices": str(prices), "token_secret_env": "TEST_GW_TOKEN_SECRET", "admin_token_env": "TEST_GW_ADMIN_TOKEN",
            "admin_port": 0})) as running:
        yield running


def _operator(env: Env, gateway: Gateway, *, token_secret: bool = True, admin_token: bool = True) -> None:
    env.env.pop("ANCHORAGE_GATEWAY_TOKEN_SECRET", None)
    env.env.pop("ANCHORAGE_GATEWAY_ADMIN_TOKEN", None)
    if token_secret:
        env.env["ANCHORAGE_GATEWAY_TOKEN_SECRET"] = TOKEN_SECRET
    if admin_token:
        env.env["ANCHORAGE_GATEWAY_ADMIN_TOKEN"] = ADMIN_TOKEN
    env.start_operator(f"--gateway-url={gateway.url}/v1", f"--gateway-admin-url={gateway.admin_url}")


def _expected(replies: list[dict[str, Any]]) -> tuple[dict[str, int], float]:
    """Tokens and cost of the mock's replies at PRICES (the cost formula of docs/design-notes.md, Costs)."""
    inputs = sum(r["usage"]["prompt_tokens"] for r in replies)
    cached = sum(r["usage"]["prompt_tokens_details"]["cached_tokens"] for r in replies)
    output = sum(r["usage"]["completion_tokens"] for r in replies)
    tokens = {"requests": len(replies), "inputTokens": inputs, "cachedInputTokens": cached, "outputTokens": output,
              "billedOutputTokens": output, "reasoningTokens": 0, "unmeteredRequests": 0}
    return tokens, ((inputs - cached) * 1.0 + cached * 0.5 + output * 4.0) / 1e6


def _status(env: Env, plural: str, name: str) -> dict[str, Any]:
    out = env.kubectl("get", plural, name, "-o", "json", check=False)
    return (json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}




def test_campaign_of_model_calling_trials_records_exact_tokens_and_cost(kube_env: Env, gateway: Gateway) -> None:
    _operator(kube_env, gateway)
    campaign = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": "gw"},
                "spec": {"tasks": ["smoke-inventory"], "seeds": 2, "parallelism": 2,
                         "entries": [{"name": "caller", "agent": MODEL_AGENT}]}}
    kube_env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(campaign))
    kube_env.wait_for(lambda: _status(kube_env, "vc", "gw").get("phase") == "Succeeded", 180, "the campaign to finish")
    trials = sorted((t for t in kube_env.objects("anchorage.dev", "trials")), key=lambda t: t["spec"]["seed"])
    assert len(trials) == 2
    secrets = {s["metadata"]["name"]: s for s in kube_env.objects("", "secrets")}
    jobs = {j["metadata"]["name"]: j for j in kube_env.objects("batch", "jobs")}
    costs = []
    for trial in trials:
        name, status = trial["metadata"]["name"], trial["status"]
        folder = kube_env.store / "gw" / name
        replies = json.loads((folder / "artifacts" / "replies.json").read_text())
        tokens, cost = _expected(replies)
        assert all(r["model"] == "mock-model-mock" for r in replies), "answered by the labelled mock"
        assert status["usage"] == tokens and status["costUSD"] == pytest.approx(cost, rel=1e-9, abs=1e-12)
        assert cost > 0 and "costUnknownReason" not in status
        record = json.loads((folder / "trial.json").read_text())
        assert record["cost_usd"] == pytest.approx(cost, rel=1e-9, abs=1e-12)
        assert record["usage"]["input_tokens"] == tokens["inputTokens"]
        assert record["cost_source"] == "gateway metering × price snapshot"
        costs.append(cost)
        # the token: in the Job's Secret (owned by the Job), naming this trial and no other, revoked at the end
        job = jobs[status["jobName"]]
        secret = secrets[f"{status['jobName']}-gateway"]
        assert secret["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
        token = base64.b64decode(secret["data"]["token"]).decode()
        meta = trial["metadata"]
        assert trial_of_token(TOKEN_SECRET.encode(), token) == f"{meta['namespace']}.{name}.{meta['uid']}"
        assert chat_status(str(gateway.url), token) == 401, "revoked when the trial finished"
    # one trial's token cannot be pointed at the other trial: its signature covers the trial id
    first, second = (base64.b64decode(secrets[f"{t['status']['jobName']}-gateway"]["data"]["token"]).decode()
                     for t in trials)
    forged = first.split(".")[0] + "." + second.split(".")[1]
    assert forged.startswith(TOKEN_PREFIX) and trial_of_token(TOKEN_SECRET.encode(), forged) is None
    assert chat_status(str(gateway.url), forged) == 401
    # the token costs one API write per model-calling trial: its Secret's create, nothing else on Secrets
    secret_calls = {k: n for k, n in kube_env.cluster.api.counts.items() if k.split()[1].startswith("secrets")}
    assert secret_calls == {"POST secrets": 2}, secret_calls
    # the token names the trial's entry too, so the gateway's spend metrics carry it (not "unknown")
    with urllib.request.urlopen(f"{gateway.admin_url}/metrics", timeout=10) as response:
        families = {f.name: f for f in text_string_to_metric_families(response.read().decode())}
    spent = {s.labels["entry"]: s.value for s in families["anchorage_cost_usd"].samples if s.name.endswith("_total")}
    assert spent.get("caller") == pytest.approx(sum(costs), rel=1e-9), spent  # (other tests may count "unknown")
    # the campaign sums the real costs; the leaderboard's cost per seed is their mean (one task per seed)
    status = _status(kube_env, "vc", "gw")
    assert status["costUSD"] == pytest.approx(sum(costs), rel=1e-6)
    board = json.loads((kube_env.store / "gw" / "leaderboard.json").read_text())
    assert board["rows"][0]["cost_per_seed_usd"] == pytest.approx(sum(costs) / 2, rel=1e-9)
    # deleting the campaign removes the Secrets with their Jobs (owner references)
    kube_env.kubectl("delete", "vc", "gw")
    kube_env.wait_for(lambda: not kube_env.objects("", "secrets"), 30, "owner GC of the token Secrets")


def test_model_calling_trial_without_token_secret_fails_with_the_fix(kube_env: Env) -> None:
    kube_env.env.pop("ANCHORAGE_GATEWAY_TOKEN_SECRET", None)
    kube_env.start_operator()
    trial = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": "no-secret"},
             "spec": {"task": "smoke-inventory", "agent": MODEL_AGENT}}
    kube_env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(trial))
    kube_env.wait_for(lambda: bool(_status(kube_env, "tr", "no-secret").get("phase")), 60, "the trial to end")
    status = _status(kube_env, "tr", "no-secret")
    assert status["phase"] == "InfrastructureFailed"
    assert "ANCHORAGE_GATEWAY_TOKEN_SECRET is not set" in status["message"]
    assert "gateway.tokenSecret.name" in status["message"]
    assert status["conditions"][0]["reason"] == "InvalidInput"
    assert kube_env.objects("batch", "jobs") == [] and kube_env.objects("", "secrets") == [], "no pod without a token"


def test_cost_is_unknown_without_the_admin_token(kube_env: Env, gateway: Gateway) -> None:
    _operator(kube_env, gateway, admin_token=False)
    trial = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": "no-admin"},
             "spec": {"task": "smoke-inventory", "agent": MODEL_AGENT}}
    kube_env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(trial))
    kube_env.wait_for(lambda: _status(kube_env, "tr", "no-admin").get("gradable") is not None, 120, "the trial's score")
    status = _status(kube_env, "tr", "no-admin")
    folder = kube_env.store / "_trials" / "default" / "no-admin"
    assert len(json.loads((folder / "artifacts" / "replies.json").read_text())) == 2, "the agent's calls went through"
    assert "costUSD" not in status and "usage" not in status
    assert "ANCHORAGE_GATEWAY_ADMIN_TOKEN" in status["costUnknownReason"]
    record = json.loads((folder / "trial.json").read_text())
    assert record["cost_usd"] is None and "ANCHORAGE_GATEWAY_ADMIN_TOKEN" in record["cost_unknown_reason"]


def test_fake_kubelet_holds_a_container_until_its_secret_exists(kube_env: Env) -> None:
    out = kube_env.store / "token.txt"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "waits"},
           "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [{
               "name": "main", "image": "busybox",
               "command": [sys.executable, "-c", f"import os; open({str(out)!r}, 'w').write(os.environ['TOKEN'])"],
               "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "later", "key": "token"}}},
                       {"name": "ABSENT", "valueFrom": {"secretKeyRef": {"name": "none", "key": "x", "optional": True}}}],
           }]}}}}
    kube_env.kubectl("create", "-f", "-", stdin=json.dumps(job))

    def waiting() -> bool:
        pods = kube_env.objects("", "pods")
        states = [s["state"] for p in pods for s in (p.get("status") or {}).get("containerStatuses", [])]
        return any(s.get("waiting", {}).get("reason") == "CreateContainerConfigError" for s in states)

    kube_env.wait_for(waiting, 30, "the pod to wait for its Secret")
    assert not out.exists()
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "later"},
              "data": {"token": base64.b64encode(b"s3cret").decode()}}
    kube_env.kubectl("create", "-f", "-", stdin=json.dumps(secret))
    kube_env.wait_for(lambda: out.exists() and out.read_text() == "s3cret", 30, "the container to run with the Secret")
