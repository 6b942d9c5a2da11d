"""Every agent kind the examples use, as a campaign on the real control plane, ranked as the local engine ranks it.

``examples/`` use ``oracle``, ``codex``, ``opencode``, ``claude-code``, ``replay`` and ``mock``. One campaign
of the first five on the smoke task runs through the chart's operator (its ServiceAccount, its arguments) on
the sandbox node, whose containers find the pinned agent CLIs (``anchorage agents install``) where the
agent image has them; the model-calling ones reach a gateway on loopback in front of the scripted mock model
(labelled mock: it plays the task's reproduction as tool calls the real CLIs run), each with its own token
(the operator mints it into a Secret the kubelet-side node agent reads). The same manifest then runs on the
local engine with the same scripted model: both leaderboards must agree entry by entry. ``mock`` is the
local engine's built-in agent: the operator refuses it, saying what to use instead.
"""

from __future__ import annotations

import json
import math
import secrets
from pathlib import Path
from typing import Any

import pytest
import yaml

from anchorage import agents
from anchorage.gateway.config import GatewayConfig
from anchorage.gateway.running import start_gateway
from anchorage.gateway.scripted import start_scripted
from anchorage.gateway.scripts import ScriptBook
from anchorage.manifests import VerificationCampaign
from anchorage.runtime.local.engine import resolve_tasks, run_campaign
from anchorage.runtime.local.gatewaying import start_local_gateway
from anchorage.runtime.local.trials import LocalRuntime
from kube_cluster import RealCluster

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "examples" / "scripted"

pytestmark = [pytest.mark.cluster, pytest.mark.sandbox, pytest.mark.timeout(3600)]


def _campaign(name: str, replay: Path) -> dict[str, Any]:
    return {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": name},
            "spec": {"tasks": ["smoke-inventory"], "seeds": 1, "parallelism": 5, "limits": {"agentTimeoutSec": 900},
                     "entries": [{"name": "oracle", "agent": {"kind": "oracle"}},
                                 {"name": "codex", "agent": {"kind": "codex", "model": "gpt-5.5"}},
                                 {"name": "claude-code", "agent": {"kind": "claude-code", "model": "claude-sonnet-4"}},
                                 {"name": "opencode", "agent": {"kind": "opencode", "model": "deepseek-flash"}},
                                 {"name": "replay", "agent": {"kind": "replay", "artifact": str(replay)}}]}}


def _status(real: RealCluster, namespace: str, name: str) -> dict[str, Any]:
    out = real.kubectl("get", "vc", name, "-n", namespace, "-o", "json", check=False)
    return dict(json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}


def test_every_agent_kind_of_the_examples_ranks_as_on_the_local_engine(
        real_cluster: RealCluster, tmp_path: Path, mechanism: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = [name for name in agents.pins() if not agents.state(name).installed]
    assert not missing, f"agent CLIs not installed: {missing} (make agents / anchorage agents install all)"
    replay = real_cluster.store / "replayed"  # a folder both drivers read: an ungradable artifact
    replay.mkdir(exist_ok=True)
    (replay / "smoke-inventory_result.json").write_text("{}")
    doc = _campaign("kinds-all", replay)
    release = real_cluster.release
    book = ScriptBook({task.slug: task.root for task in resolve_tasks(VerificationCampaign.model_validate(doc).spec)},
                      SCRIPTS)
    secret, admin = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    monkeypatch.setenv("ANCHORAGE_TEST_TOKEN_SECRET", secret)
    monkeypatch.setenv("ANCHORAGE_TEST_ADMIN_TOKEN", admin)
    scripted = start_scripted(book)
    gateway = start_gateway(GatewayConfig.model_validate({
        "host": "127.0.0.1", "port": 0, "admin_port": 0, "upstreams": scripted.upstreams(),
        "token_secret_env": "ANCHORAGE_TEST_TOKEN_SECRET", "admin_token_env": "ANCHORAGE_TEST_ADMIN_TOKEN",
        "ledger_dir": tmp_path / "ledger"}))
    operator = real_cluster.chart_operator(tmp_path, extra=(f"--gateway-url={gateway.url}/v1",
                                                            f"--gateway-admin-url={gateway.admin_url}"),
                                           env={"ANCHORAGE_GATEWAY_TOKEN_SECRET": secret,
                                                "ANCHORAGE_GATEWAY_ADMIN_TOKEN": admin})
    operator.start()
    try:
        real_cluster.kubectl("apply", "-n", release.namespace, "-f", "-", stdin=yaml.safe_dump(doc))
        real_cluster.wait_for(lambda: _status(real_cluster, release.namespace, "kinds-all").get("phase") == "Succeeded",
                              1800, "the campaign of every agent kind", operator)
        status = _status(real_cluster, release.namespace, "kinds-all")
        with_mock = {**doc, "metadata": {"name": "with-mock"},
                     "spec": {**doc["spec"], "entries": [{"name": "m", "agent": {"kind": "mock"}}]}}
        real_cluster.kubectl("apply", "-n", release.namespace, "-f", "-", stdin=yaml.safe_dump(with_mock))
        real_cluster.wait_for(lambda: _status(real_cluster, release.namespace, "with-mock").get("phase") == "Failed",
                              120, "the operator to refuse the mock agent", operator)
        refused = _status(real_cluster, release.namespace, "with-mock")
    finally:
        operator.stop()
        gateway.stop()
        scripted.stop()
    trials = real_cluster.get("trials", "-n", release.namespace, "-l", "anchorage.dev/campaign=kinds-all")["items"]
    assert status["progress"] == "5/5" and status["infrastructureFailed"] == 0, \
        [(t["spec"]["entry"], t["status"].get("reason"), t["status"].get("message")) for t in trials]
    phases = {t["spec"]["entry"]: (t["status"]["phase"], t["status"].get("oEval")) for t in trials}
    for entry in ("oracle", "codex", "claude-code", "opencode"):
        assert phases[entry] == ("Succeeded", 1.0), phases
    local_gateway = start_local_gateway(scripts=book)
    try:
        local = run_campaign(VerificationCampaign.model_validate(doc), tmp_path / "local-runs",
                             LocalRuntime(mechanism=mechanism, base_dir=REPO, gateway=local_gateway.gateway))
    finally:
        local_gateway.stop()
    mine = {row["entry"]: row for row in status["leaderboard"]}
    assert [r["entry"] for r in status["leaderboard"]] == [r.entry for r in local.board.rows]
    for row in local.board.rows:
        assert math.isclose(mine[row.entry].get("oEval", math.nan), row.o_eval_mean, abs_tol=1e-9), (row, mine)
        assert math.isclose(mine[row.entry].get("boEval", math.nan), row.bo_eval_mean, abs_tol=1e-9), (row, mine)
    assert "use kind 'command'" in refused["message"] and refused["conditions"][0]["reason"] == "InvalidSpec"
