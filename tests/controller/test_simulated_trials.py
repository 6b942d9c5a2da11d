"""Trials with simulated pods (``FakeKubelet(simulate=True)``): what the load benchmark relies on, and the campaign's
cost total when some trials' costs are unknown.

A simulated verifier pod writes the ``score.json`` records ``kube.pod score`` would (a synthetic perfect score marked
``simulated``), so a simulated trial ends scored and gradable. A model-calling trial whose usage the operator cannot
read (no gateway admin token) has an unknown cost: the campaign's ``costUSD`` is the sum of the known costs only and
``costsUnknown`` (in the status, the compact leaderboard row and ``kubectl get vc``) says how many are missing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from .conftest import Env

pytestmark = pytest.mark.slow

# A model-calling agent (kind command with a model): the operator mints its gateway token; simulated pods call nothing.
MODEL_AGENT = {"kind": "command", "model": "mock-model", "command": ["true"]}


def _status(env: Env, plural: str, name: str) -> dict[str, Any]:
    out = env.kubectl("get", plural, name, "-o", "json", check=False)
    return (json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}


def test_simulated_oracle_trial_ends_scored_and_gradable(sim_env: Env) -> None:
    env = sim_env
    env.start_operator()
    trial = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": "sim-oracle"},
             "spec": {"task": "smoke-inventory", "agent": {"kind": "oracle"}}}
    env.kubectl("apply", "-f", "-", stdin=json.dumps(trial))
    env.wait_for(lambda: _status(env, "tr", "sim-oracle").get("gradable") is not None, 90, "the trial's score")
    status = _status(env, "tr", "sim-oracle")
    assert status["phase"] == "Succeeded" and status["reason"] == "completed"
    assert status["gradable"] is True and status["oEval"] == pytest.approx(1.0) and status["boEval"] == pytest.approx(1.0)
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("Ready", "True"), ("Scored", "True"), ("Complete", "True"), ("Failed", "False"), ("Reconciling", "False"),
        ("Stalled", "False")]
    assert _status(env, "sr", "sim-oracle-score")["phase"] == "Succeeded"
    folder = env.store / "_trials" / "default" / "sim-oracle"
    score = json.loads((folder / "score.json").read_text())
    assert score["simulated"] is True and score["task"] == "smoke-inventory" and score["o_eval"] == 1.0
    assert {"raw_before_gates", "oracle_source", "metrics", "gates", "obligations"} <= set(score), "kube.pod's shape"
    assert json.loads((folder / "verifier-upload.json").read_text())["exit_code"] == 0
    record = json.loads((folder / "trial.json").read_text())
    assert record["score"]["gradable"] is True and record["score"]["o_eval"] == 1.0


def test_campaign_counts_unknown_costs_instead_of_summing_them_as_zero(sim_env: Env) -> None:
    env = sim_env
    env.env["ANCHORAGE_GATEWAY_TOKEN_SECRET"] = "token-secret-of-the-test"
    env.env.pop("ANCHORAGE_GATEWAY_ADMIN_TOKEN", None)  # the operator cannot read usage: costs are unknown
    env.start_operator("--gateway-url=http://127.0.0.1:9/v1")
    campaign = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": "costs"},
                "spec": {"tasks": ["smoke-inventory"], "seeds": 2, "parallelism": 4,
                         "entries": [{"name": "caller", "agent": MODEL_AGENT},
                                     {"name": "free", "agent": {"kind": "command", "command": ["true"]}}]}}
    env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(campaign))
    env.wait_for(lambda: _status(env, "vc", "costs").get("phase") == "Succeeded", 120, "the campaign to finish")
    trials = {t["spec"]["entry"]: t["status"] for t in env.objects("anchorage.dev", "trials")}
    assert "costUSD" not in trials["caller"] and "ANCHORAGE_GATEWAY_ADMIN_TOKEN" in trials["caller"]["costUnknownReason"]
    assert trials["free"]["costUSD"] == 0.0
    status = _status(env, "vc", "costs")
    assert status["costsUnknown"] == 2, "the two model-calling trials' costs are unknown, not 0"
    assert status["costUSD"] == 0.0, "the known part only"
    rows = {r["entry"]: r for r in status["leaderboard"]}
    assert rows["caller"]["costsUnknown"] == 2 and rows["free"]["costsUnknown"] == 0
    table = env.kubectl("get", "vc", "costs").stdout.splitlines()
    assert "UNKNOWN COSTS" in table[0] and table[1].split()[-2] == "2", table
    # the campaign says its cost is incomplete, in its status and on the board it publishes
    assert "cost incomplete: 2 trial cost(s) unknown" in status["message"] and status["unmeteredRequests"] == 0
    board = json.loads((env.store / "costs" / "leaderboard.json").read_text())
    assert (board["costs_unknown"], board["unmetered_requests"]) == (2, 0)
    assert board["cost_note"] == "cost incomplete: 2 trial cost(s) unknown; the costs shown are lower bounds"
