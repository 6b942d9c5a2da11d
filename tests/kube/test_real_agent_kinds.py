"""Every agent kind the examples use, as a campaign on the real cluster, ranked as the local engine ranks it.

``examples/`` use ``oracle``, ``codex``, ``opencode``, ``claude-code``, ``replay`` and ``mock``. One campaign of the
first five on the smoke task runs through a release of the chart (its operator and its gateway pods) on the real
nodes, in the agent image, whose pinned CLIs the pods find on their PATH; the model-calling ones reach the release's
gateway, which sends every model to the scripted mock model on this machine (labelled mock: it plays the task's
reproduction as tool calls the real CLIs run), each trial with its own token (the operator mints it into a Secret the
kubelet reads). The same manifest then runs on the local engine with the same scripted model: both leaderboards must
agree entry by entry. ``mock`` is the local engine's built-in agent: the operator refuses it, saying what to use
instead. An agent image without the CLI is the platform's failure naming the fix, and no model call is made.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from anchorage import agentclis
from anchorage.gateway.scripted import start_scripted
from anchorage.gateway.scripts import ScriptBook
from anchorage.manifests import VerificationCampaign
from anchorage.runtime.local.engine import resolve_tasks, run_campaign
from anchorage.runtime.local.gatewaystart import start_local_gateway
from anchorage.runtime.local.trials import LocalRuntime
from kube_cluster import RealCluster, Release

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "examples" / "scripted"

pytestmark = [pytest.mark.cluster, pytest.mark.sandbox, pytest.mark.timeout(3600),
              pytest.mark.slow]  # five agent kinds' trials on the real nodes and again on the local engine


API_OF = {"codex": "responses", "claude-code": "anthropic", "opencode": "chat"}


def _campaign(name: str, replay: str) -> dict[str, Any]:
    return {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": name},
            # one CPU each (half of it reserved): the five trials fit the two real nodes at once (at the task's two
            # CPUs the fifth waited past the tests' unschedulable limit and ended InfrastructureFailed)
            "spec": {"tasks": ["smoke-inventory"], "seeds": 1, "parallelism": 5,
                     "limits": {"agentTimeoutSec": 900, "cpus": 1},
                     "entries": [{"name": "oracle", "agent": {"kind": "oracle"}},
                                 {"name": "codex", "agent": {"kind": "codex", "model": "gpt-5.5"}},
                                 {"name": "claude-code", "agent": {"kind": "claude-code", "model": "claude-sonnet-4"}},
                                 {"name": "opencode", "agent": {"kind": "opencode", "model": "deepseek-flash"}},
                                 {"name": "replay", "agent": {"kind": "replay", "artifact": str(replay)}}]}}


@pytest.fixture(scope="module")
def kinds(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Release, Any, ScriptBook]]:
    """A release (namespace ``kinds``) whose gateway sends every model to the scripted mock model on this machine,
    with the token and admin secrets the operator and the gateway share."""
    doc = _campaign("kinds-all", "replayed/smoke-inventory_result.json")
    book = ScriptBook({task.slug: task.root for task in resolve_tasks(VerificationCampaign.model_validate(doc).spec)},
                      SCRIPTS)
    scripted = start_scripted(book, host=real_cluster.local.network.slot.host_ip)  # where the gateway's pod reaches it
    secret, admin = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    real_cluster.kubectl("create", "namespace", "kinds", check=False)
    real_cluster.kubectl("create", "secret", "generic", "gateway-secrets", "-n", "kinds",
                         f"--from-literal=token-secret={secret}", f"--from-literal=admin-token={admin}")
    upstreams = [{"name": u["name"], "baseUrl": u["base_url"], "api": u["api"], "models": u["models"]}
                 for u in scripted.upstreams()]
    release = real_cluster.releases.get("kinds") or real_cluster.install("kinds", "kinds", "kinds-trials", values={
        "gateway": {"mock": False, "upstreams": upstreams,
                    "tokenSecret": {"name": "gateway-secrets", "key": "token-secret"},
                    "adminTokenSecret": {"name": "gateway-secrets", "key": "admin-token"}}})
    real_cluster.wait_available("kinds")
    try:
        yield release, scripted, book
    finally:
        scripted.stop()


def test_every_agent_kind_of_the_examples_ranks_as_on_the_local_engine(
        real_cluster: RealCluster, kinds: tuple[Release, Any, ScriptBook], tmp_path: Path, mechanism: Any) -> None:
    missing = [name for name in agentclis.pins() if not agentclis.state(name).installed]
    assert not missing, f"agent CLIs not installed: {missing} (make agents / anchorage agents install all)"
    release, scripted, book = kinds
    key = "replayed/smoke-inventory_result.json"  # an ungradable artifact both drivers read: a store key, a file here
    boto3.client("s3", **_client(real_cluster)).put_object(Bucket=real_cluster.s3.bucket, Key=key, Body=b"{}")
    doc = _campaign("kinds-all", key)
    real_cluster.kubectl("apply", "-n", release.namespace, "-f", "-", stdin=yaml.safe_dump(doc))
    real_cluster.wait_for(lambda: real_cluster.status("vc", release.namespace, "kinds-all").get("phase") == "Succeeded",
                          1800, "the campaign of every agent kind", release.name)
    status = real_cluster.status("vc", release.namespace, "kinds-all")
    with_mock = {**doc, "metadata": {"name": "with-mock"},
                 "spec": {**doc["spec"], "entries": [{"name": "m", "agent": {"kind": "mock"}}]}}
    real_cluster.kubectl("apply", "-n", release.namespace, "-f", "-", stdin=yaml.safe_dump(with_mock))
    real_cluster.wait_for(lambda: real_cluster.status("vc", release.namespace, "with-mock").get("phase") == "Failed",
                          120, "the operator to refuse the mock agent", release.name)
    refused = real_cluster.status("vc", release.namespace, "with-mock")
    trials = real_cluster.get("trials", "-n", release.namespace, "-l", "anchorage.dev/campaign=kinds-all")["items"]
    assert status["progress"] == "5/5" and status["infrastructureFailed"] == 0, \
        [(t["spec"]["entry"], t["status"].get("reason"), t["status"].get("message")) for t in trials]
    phases = {t["spec"]["entry"]: (t["status"]["phase"], t["status"].get("oEval")) for t in trials}
    for entry in ("oracle", "codex", "claude-code", "opencode"):
        assert phases[entry] == ("Succeeded", 1.0), phases
    replies = scripted.model.recorded()
    for trial in trials:  # each CLI's calls reached the scripted model through the gateway pod, metered and priced
        entry, trial_status = trial["spec"]["entry"], trial["status"]
        if entry in API_OF:
            mine = [r for r in replies if r.api == API_OF[entry] and r.slug == "smoke-inventory"]
            assert [r.kind for r in mine if r.kind in ("final", "off-script")] == ["final"], entry
            assert trial_status["usage"]["requests"] == len(mine) and trial_status["costUSD"] > 0, trial_status
    local_doc = _campaign("kinds-all", str(real_cluster.store / "replayed"))
    local_gateway = start_local_gateway(scripts=book)
    try:
        local = run_campaign(VerificationCampaign.model_validate(local_doc), tmp_path / "local-runs",
                             LocalRuntime(mechanism=mechanism, base_dir=REPO, gateway=local_gateway.gateway))
    finally:
        local_gateway.stop()
    mine = {row["entry"]: row for row in status["leaderboard"]}
    assert [r["entry"] for r in status["leaderboard"]] == [r.entry for r in local.board.rows]
    why = {t["spec"]["entry"]: {k: t["status"].get(k) for k in ("phase", "reason", "message", "oEval", "boEval")}
           for t in trials}  # what each trial ended as on the cluster, for a disagreement's message
    for row in local.board.rows:
        assert math.isclose(mine[row.entry].get("oEval", math.nan), row.o_eval_mean, abs_tol=1e-9), (row, mine, why)
        assert math.isclose(mine[row.entry].get("boEval", math.nan), row.bo_eval_mean, abs_tol=1e-9), (row, mine, why)
    assert "use kind 'command'" in refused["message"] and refused["conditions"][0]["reason"] == "InvalidSpec"


def test_an_agent_image_without_the_cli_is_the_platforms_failure_naming_the_fix(
        real_cluster: RealCluster, kinds: tuple[Release, Any, ScriptBook]) -> None:
    """The operator image as the agent image (no CLI in it): the check-agent init container fails the pod before the
    agent starts; the trial is InfrastructureFailed (never the model's failure) with the build fix in its message."""
    release, scripted, _ = kinds
    before = len(scripted.model.recorded())
    trial = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": "no-cli"},
             "spec": {"task": "smoke-inventory", "agent": {"kind": "codex", "model": "gpt-5.5",
                                                            "image": real_cluster.images["operator"]}}}
    real_cluster.kubectl("apply", "-n", release.namespace, "-f", "-", stdin=yaml.safe_dump(trial))

    def status() -> dict[str, Any]:
        return dict(real_cluster.get("trial", "no-cli", "-n", release.namespace).get("status") or {})

    real_cluster.wait_for(lambda: status().get("phase") not in (None, "Pending", "Running"), 600,
                          "the trial without its CLI", release.name)
    ended = status()
    assert ended["phase"] == "InfrastructureFailed", ended
    assert "check-agent" in ended["message"] and "AGENT_CLIS including codex" in ended["message"], ended
    assert len(scripted.model.recorded()) == before  # the agent never started: no model request


def _client(real: RealCluster) -> dict[str, str]:
    env = real.s3_env()
    return {"endpoint_url": env["AWS_ENDPOINT_URL"], "aws_access_key_id": env["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"], "region_name": env["AWS_DEFAULT_REGION"]}
