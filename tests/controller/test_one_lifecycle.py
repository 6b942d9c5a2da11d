"""One lifecycle, two drivers: the same Trial or campaign through the local engine and through the operator
(against the cluster fake, pods under bubblewrap) gives the same ``trial.json`` records, scores, gates,
obligations and leaderboard — and what the operator cannot run yet is refused, never ignored."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from anchorage.errors import InputError
from anchorage.gateway import Gateway, GatewayConfig, start_gateway
from anchorage.gateway.mock import MockConfig, start_mock
from anchorage.manifests import Trial, VerificationCampaign
from anchorage.runtime.local import sandbox
from anchorage.runtime.local.engine import run_campaign, run_single_trial
from anchorage.runtime.local.trials import LocalRuntime
from anchorage.trials.records import TIMING_FIELDS

from .conftest import REPO, Env, chat_status

pytestmark = pytest.mark.sandbox

#: Fields that say *which* driver ran the trial (they must differ), besides the timings.
DRIVER_FIELDS = ("driver", "sandbox")
#: A command agent whose argv is full of braces that are not placeholders (shell, Python dict, JSON).
BRACES = ["/bin/sh", "-c", "python3 -c \"import json; json.dump({'x': {'y': 1}}, open('/root/results/{task}_result.json', "
          "'w'))\" && echo '{\"seed\": {seed}}' > /root/results/seed.json && test -n '${HOME}'"]
AGENTS = {"oracle": {"kind": "oracle"}, "braces": {"kind": "command", "command": BRACES}}


def _trial(name: str, agent: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": name},
            "spec": {"task": "smoke-inventory", "agent": agent, "seed": 1,
                     "verification": {"gates": True, "lean": True}}}


def _comparable(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in (*TIMING_FIELDS, *DRIVER_FIELDS)}


def _local_runtime(tmp_path: Path) -> LocalRuntime:
    return LocalRuntime(mechanism=sandbox.detect_mechanism(), base_dir=tmp_path)


def _scored_json(path: Path) -> dict[str, Any]:
    score: dict[str, Any] = json.loads(path.read_text())
    return {k: score[k] for k in ("raw", "o_eval", "bo_eval", "gradable", "gates", "obligations", "metrics",
                                  "hard_gate_failed", "error")}


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_the_same_trial_gives_the_same_record_on_both_drivers(agent: str, kube_env: Env, tmp_path: Path) -> None:
    manifest = _trial(f"same-{agent}", AGENTS[agent])
    local = run_single_trial(Trial.model_validate(manifest), tmp_path / "local", _local_runtime(tmp_path)).to_json()
    kube_env.start_operator()
    kube_env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(manifest))
    folder = kube_env.store / "_trials" / "default" / manifest["metadata"]["name"]
    kube_env.wait_for(lambda: (folder / "trial.json").is_file(), 120, "the operator's trial.json")
    cluster = json.loads((folder / "trial.json").read_text())
    assert set(cluster) == set(local), "one shape: the same keys from both drivers"
    assert (local["driver"], cluster["driver"]) == ("local", "operator")
    assert local["sandbox"]["mechanism"] in ("bwrap", "unshare") and cluster["sandbox"]["mechanism"] == "kubernetes-pod"
    assert _comparable(cluster) == _comparable(local)
    assert local["phase"] == "Succeeded" and local["exit_code"] == 0
    # the per-trial verification results agree too: metrics, gates and Lean obligations of score.json
    assert _scored_json(folder / "score.json") == _scored_json(tmp_path / "local" / manifest["metadata"]["name"] / "score.json")
    status = kube_env.get("tr", manifest["metadata"]["name"])["status"]
    assert (status["phase"], status["reason"], status.get("oEval")) == (local["phase"], local["reason"],
                                                                       local["score"]["o_eval"])
    if agent == "braces":  # every brace that is not a placeholder reached the agent as written
        assert json.loads((folder / "artifacts" / "seed.json").read_text()) == {"seed": 1}
        assert json.loads((tmp_path / "local" / "same-braces" / "artifacts" / "seed.json").read_text()) == {"seed": 1}


def test_a_missing_replay_artifact_ends_the_trial_alike_on_both_drivers(kube_env: Env, tmp_path: Path) -> None:
    """One rule: the entry's problem (Failed, agent_error, the same message), not the platform's — no retry. The
    operator learns it from its own fetch-task container's exit code in the Pod's status."""
    manifest = _trial("no-replay", {"kind": "replay", "artifact": str(tmp_path / "nowhere" / "{task}.json")})
    manifest["spec"]["retries"] = 2
    local = run_single_trial(Trial.model_validate(manifest), tmp_path / "local", _local_runtime(tmp_path)).to_json()
    kube_env.start_operator()
    kube_env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(manifest))
    folder = kube_env.store / "_trials" / "default" / "no-replay"
    kube_env.wait_for(lambda: (folder / "trial.json").is_file(), 120, "the operator's trial.json")
    cluster = json.loads((folder / "trial.json").read_text())
    expected = f"replay artifact {tmp_path}/nowhere/smoke-inventory.json does not exist (check the entry's agent.artifact)"
    assert (local["phase"], local["reason"], local["message"]) == ("Failed", "agent_error", expected)
    assert (cluster["phase"], cluster["reason"], cluster["message"]) == ("Failed", "agent_error", expected)
    assert (local["attempt"], cluster["attempt"]) == (1, 1), "never retried"
    assert _comparable(cluster) == _comparable(local)  # the notes say "artifacts", not each driver's own folder
    assert local["artifact"]["recovery_note"] == "no smoke-inventory_result.json (nor a near-miss name) in artifacts"


def _campaign(name: str, verification: dict[str, Any]) -> dict[str, Any]:
    write_empty = ["/bin/sh", "-c", "echo '{}' > /root/results/{task}_result.json"]
    return {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": name},
            "spec": {"tasks": ["smoke-inventory", "cumcm-2024-a-dragon-dance"], "seeds": 2, "parallelism": 4,
                     "baseline": "empty", "verification": verification,
                     "entries": [{"name": "oracle", "agent": {"kind": "oracle"}},
                                 {"name": "empty", "agent": {"kind": "command", "command": write_empty}}]}}


@pytest.mark.slow
def test_the_same_campaign_gives_the_same_leaderboard_on_both_drivers(kube_env: Env, tmp_path: Path) -> None:
    manifest = _campaign("twin", {"gates": True, "lean": True})
    local = run_campaign(VerificationCampaign.model_validate(manifest), tmp_path / "local", _local_runtime(tmp_path))
    kube_env.start_operator()
    kube_env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(manifest))
    kube_env.wait_for(lambda: (kube_env.store / "twin" / "leaderboard.json").is_file(), 300, "the campaign's leaderboard")
    board = json.loads((kube_env.store / "twin" / "leaderboard.json").read_text())
    assert board["rows"] == json.loads(json.dumps(dataclasses.asdict(local.board)["rows"]))
    assert [r["entry"] for r in board["rows"]] == ["oracle", "empty"] and board["rows"][0]["o_eval_mean"] == 1.0
    for record in (r.to_json() for r in local.records):
        cluster = json.loads((kube_env.store / "twin" / record["name"] / "trial.json").read_text())
        assert _comparable(cluster) == _comparable(record), record["name"]
        assert _scored_json(kube_env.store / "twin" / record["name"] / "score.json") == \
            _scored_json(tmp_path / "local" / "twin" / record["name"] / "score.json")


def test_a_step_the_operator_cannot_run_is_refused_not_ignored(kube_env: Env) -> None:
    manifest = _campaign("needs-discrimination", {"gates": True, "discrimination": True})
    kube_env.start_operator()
    kube_env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(manifest))

    def failed() -> bool:
        out = kube_env.kubectl("get", "vc", manifest["metadata"]["name"], "-o", "json").stdout
        return (json.loads(out).get("status") or {}).get("phase") == "Failed"

    kube_env.wait_for(failed, 60, "the campaign to be refused")
    status = kube_env.get("vc", manifest["metadata"]["name"])["status"]
    assert "spec.verification.discrimination is not supported by the operator driver" in status["conditions"][0]["message"]
    assert not kube_env.objects("anchorage.dev", "trials"), "nothing ran"


PROOF = REPO / "examples" / "proof-panel"
PROTOCOL_KEYS = ("panel", "cbu")
JUDGED_ADMIN = "admin-token-of-the-judged-campaign"
#: What both drivers record of a protocol step's cost (the gateway's metering of the step's accounts).
COST_KEYS = ("cost_usd", "cost_source", "cost_unknown_reason")


def _proof_campaign() -> dict[str, Any]:
    """The proof task: a sound and a flawed solution (replayed) and the oracle, judged by the panel and CBU
    through the gateway and the labelled mock model's scripted replies (examples/proof-panel/mock-replies.yaml)."""
    def replay(kind: str) -> dict[str, Any]:
        return {"kind": "replay", "artifact": str(PROOF / "solutions" / kind)}

    return {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": "judged"},
            "spec": {"tasks": ["proof-smoke"], "parallelism": 3, "entries": [
                {"name": "sound", "agent": replay("sound")}, {"name": "flawed", "agent": replay("flawed")},
                {"name": "oracle", "agent": {"kind": "oracle"}}],
                "verification": {"gates": True, "lean": True, "panel": {"tier": "medium", "model": "mock-verifier"},
                                 "cbu": {"model": "mock-solver", "rollouts": 2}}}}


@pytest.fixture
def proof_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gateway]:
    """A TCP gateway with the operator's token secret, in front of the mock upstream with the demo's replies."""
    monkeypatch.setenv("TEST_GW_TOKEN_SECRET", "secret-of-the-judged-campaign")
    monkeypatch.setenv("TEST_GW_ADMIN_TOKEN", JUDGED_ADMIN)
    with start_mock(MockConfig.load(PROOF / "mock-replies.yaml")) as mock, start_gateway(GatewayConfig.model_validate({
            "upstreams": [{"name": "mock", "base_url": mock.url, "models": ["mock*"]}],
            "token_secret_env": "TEST_GW_TOKEN_SECRET", "admin_token_env": "TEST_GW_ADMIN_TOKEN", "admin_port": 0})) as running:
        yield running


def _judged(record: dict[str, Any]) -> dict[str, Any]:
    return {key: record[key] for key in PROTOCOL_KEYS}


@pytest.mark.slow
def test_panel_and_cbu_give_the_same_results_on_both_drivers(kube_env: Env, tmp_path: Path, proof_gateway: Gateway,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from anchorage.runtime.local.gatewaystart import start_local_gateway

    monkeypatch.setenv("ANCHORAGE_TASKS", str(PROOF / "tasks"))
    manifest = _proof_campaign()
    local_gateway = start_local_gateway(mock_replies=PROOF / "mock-replies.yaml")
    try:
        runtime = LocalRuntime(mechanism=sandbox.detect_mechanism(), base_dir=tmp_path, gateway=local_gateway.gateway)
        local = run_campaign(VerificationCampaign.model_validate(manifest), tmp_path / "local", runtime)
    finally:
        local_gateway.stop()
    written = [r.to_json() for r in local.records]   # as trial.json holds them
    outcomes = {r["entry"]: (r["panel"]["outcome"], r["cbu"]["utility"]) for r in written}
    assert outcomes["sound"] == ("confirmed", 1.0) and outcomes["flawed"] == ("refuted", 0.0), outcomes

    kube_env.env["ANCHORAGE_TASKS"] = str(PROOF / "tasks")
    kube_env.env["ANCHORAGE_GATEWAY_TOKEN_SECRET"] = "secret-of-the-judged-campaign"
    kube_env.env["ANCHORAGE_GATEWAY_ADMIN_TOKEN"] = JUDGED_ADMIN
    kube_env.start_operator(f"--gateway-url={proof_gateway.url}/v1", f"--gateway-admin-url={proof_gateway.admin_url}",
                            "--task-source", str(PROOF / "tasks"))
    kube_env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(manifest))
    folder = kube_env.store / "judged"
    kube_env.wait_for(lambda: (folder / "leaderboard.json").is_file(), 300, "the judged campaign's leaderboard")
    board = json.loads((folder / "leaderboard.json").read_text())
    assert board["rows"] == json.loads(json.dumps(dataclasses.asdict(local.board)["rows"]))
    for record in written:
        cluster = json.loads((folder / record["name"] / "trial.json").read_text())
        assert _judged(cluster) == _judged(record), record["name"]
        assert _comparable(cluster) == _comparable(record), record["name"]
        score = json.loads((folder / record["name"] / "score.json").read_text())
        local_score = json.loads((tmp_path / "local" / "judged" / record["name"] / "score.json").read_text())
        for step in PROTOCOL_KEYS:  # the whole protocol record, but for timings and the token counts
            assert _without(score[step]) == _without(local_score[step]), (record["name"], step, _diff(
                _without(score[step]), _without(local_score[step])))
            # the usage the gateway metered for the step: its one pod's account here, the sum of its per-call
            # accounts locally — the same requests, both priced by the same rule
            assert score[step]["usage"]["requests"] == local_score[step]["usage"]["requests"] == record[step]["calls"]
            assert {k: score[step][k] for k in COST_KEYS} == {k: local_score[step][k] for k in COST_KEYS}
    jobs = {j["metadata"]["name"]: j for j in kube_env.objects("batch", "jobs")}
    stepped = [(r["name"], step) for r in written for step in PROTOCOL_KEYS if r[step]["calls"]]
    assert stepped and {f"{name}-{step}" for name, step in stepped} <= set(jobs)
    for name, step in stepped:  # each step's token was revoked when its pod ended
        secret = kube_env.get("secret", f"{name}-{step}-gateway")
        token = base64.b64decode(secret["data"]["token"]).decode()
        assert chat_status(str(proof_gateway.url), token, "mock-verifier") == 401, (name, step)


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON values differ (for the failure message)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _diff(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {str(a)[:80]!r} != {str(b)[:80]!r}"]




def _without(block: dict[str, Any]) -> dict[str, Any]:
    """A protocol block without timings and the gateway's token counts (compared apart), and without the individual
    ballots: parallel verifiers finish in any order, so *which* ones an early exit counted varies from run to run on
    either driver (their counts, outcomes and launches are compared)."""
    out = copy.deepcopy({k: v for k, v in block.items() if k not in ("duration_sec", "usage")})
    for round_ in (out.get("record") or {}).get("rounds") or []:
        if round_.get("vote"):
            round_["vote"].pop("ballots")
    return out


def test_the_local_engine_refuses_what_it_cannot_run(tmp_path: Path) -> None:
    manifest = _campaign("discriminate", {"discrimination": True})
    with pytest.raises(InputError, match=r"spec\.verification\.discrimination is not supported by the local driver"):
        run_campaign(VerificationCampaign.model_validate(manifest), tmp_path, _local_runtime(tmp_path))
