"""``verification.panel`` / ``.cbu`` in a simulated cluster, and their Jobs across operator restarts.

Simulated protocol pods (``simulated_pods``) write the ``outcome.json`` ``kube.pod protocol`` would, so campaigns and
load tests with panel and CBU run on simulated clusters too. A step's Job that ends while the operator is down — and
is even deleted afterwards, as its TTL does — is finished from what its pod left when the operator comes back:
no step lost, none launched twice.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from anchorage.store import open_store
from simulated_pods import anchorage_pod

from .conftest import Env, cluster_env, count_added

pytestmark = pytest.mark.slow

JUDGED = {"gates": True, "panel": {"model": "mock-verifier"}, "cbu": {"model": "mock-solver", "rollouts": 2}}


def _status(env: Env, plural: str, name: str) -> dict[str, Any]:
    out = env.kubectl("get", plural, name, "-o", "json", check=False)
    return (json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}


def _without_admin_token(env: Env) -> None:
    env.env["ANCHORAGE_GATEWAY_TOKEN_SECRET"] = "token-secret-of-the-test"
    env.env.pop("ANCHORAGE_GATEWAY_ADMIN_TOKEN", None)  # the steps' usage cannot be read: their cost is unknown


def test_a_simulated_campaign_runs_its_panel_and_cbu(sim_env: Env) -> None:
    env = sim_env
    _without_admin_token(env)
    env.start_operator("--gateway-url=http://127.0.0.1:9/v1")
    campaign = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": "judged"},
                "spec": {"tasks": ["smoke-inventory"], "seeds": 2, "parallelism": 4, "verification": JUDGED,
                         "entries": [{"name": "oracle", "agent": {"kind": "oracle"}},
                                     {"name": "free", "agent": {"kind": "command", "command": ["true"]}}]}}
    env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(campaign))
    env.wait_for(lambda: _status(env, "vc", "judged").get("phase") == "Succeeded", 180, "the campaign to finish")
    status = _status(env, "vc", "judged")
    assert status["progress"] == "4/4" and status["infrastructureFailed"] == 0
    records = [json.loads(p.read_text()) for p in sorted(env.store.glob("judged/*/trial.json"))]
    assert len(records) == 4
    for record in records:
        assert record["phase"] == "Succeeded", (record["name"], record["message"])
        assert record["panel"]["outcome"] == "confirmed" and record["cbu"]["utility"] == 1.0
        for step in ("panel", "cbu"):  # the step's cost is unknown (no admin token), never 0
            assert record[step]["cost_usd"] is None and "ANCHORAGE_GATEWAY_ADMIN_TOKEN" in record[step][
                "cost_unknown_reason"]
        score = json.loads((env.store / "judged" / record["name"] / "score.json").read_text())
        assert score["panel"]["simulated"] is True and score["cbu"]["simulated"] is True
    jobs = {j["metadata"]["name"] for j in env.objects("batch", "jobs")}
    assert {f"{r['name']}-{step}" for r in records for step in ("panel", "cbu")} <= jobs


class Held:
    """Simulated pods whose protocol steps wait until the test releases them; ``failing`` steps end without an
    outcome (the upload sidecar's marker only, the protocol container exits 1)."""

    def __init__(self, failing: tuple[str, ...]) -> None:
        self.release = {"panel": threading.Event(), "cbu": threading.Event()}
        self.failing = failing

    def __call__(self, pod: dict[str, Any]) -> dict[str, int]:
        labels = pod["metadata"].get("labels") or {}
        step = labels.get("anchorage.dev/step")
        if labels.get("anchorage.dev/role") != "protocol" or step not in self.release:
            return anchorage_pod(pod)
        assert self.release[step].wait(120), f"the test never released the {step} pod"
        if step not in self.failing:
            return anchorage_pod(pod)
        containers = [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]
        env = {e["name"]: e.get("value", "") for c in containers for e in c.get("env", [])}
        store = open_store(env["ANCHORAGE_STORE"])
        store.put_bytes(f"{env['ANCHORAGE_DEST'].strip('/')}/upload.json", json.dumps({"exit_code": 1}).encode())
        return {c["name"]: 1 if c["name"] == "protocol" else 0 for c in containers}


@pytest.fixture
def held_env(tmp_path: Path) -> Iterator[tuple[Env, Held]]:
    held = Held(failing=("cbu",))
    with cluster_env(tmp_path, simulate=held, interval="0.3") as env:
        try:
            yield env, held
        finally:
            for event in held.release.values():
                event.set()


def _job(env: Env, name: str) -> dict[str, Any] | None:
    return next((j for j in env.objects("batch", "jobs") if j["metadata"]["name"] == name), None)


def _ended(env: Env, name: str) -> bool:
    job = _job(env, name)
    return job is not None and any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                                   for c in (job.get("status") or {}).get("conditions") or [])


def test_steps_that_end_while_the_operator_is_down_are_finished_once(held_env: tuple[Env, Held]) -> None:
    env, held = held_env
    _without_admin_token(env)
    added = count_added(env)
    flags = ("--gateway-url=http://127.0.0.1:9/v1",)
    trial = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": "held"},
             "spec": {"task": "smoke-inventory", "agent": {"kind": "oracle"}, "verification": JUDGED}}
    env.start_operator(*flags)
    env.kubectl("apply", "-f", "-", stdin=json.dumps(trial))
    # the panel's pod ends while the operator is down; its Job stays
    env.wait_for(lambda: _job(env, "held-panel") is not None, 120, "the panel's Job")
    env.stop_operator(kill=True)
    held.release["panel"].set()
    env.wait_for(lambda: _ended(env, "held-panel"), 60, "the panel's Job to end")
    env.start_operator(*flags)
    # the CBU's pod ends without its outcome while the operator is down, and its Job is deleted (as its TTL would)
    env.wait_for(lambda: _job(env, "held-cbu") is not None, 120, "the CBU's Job (after the restart)")
    env.stop_operator(kill=True)
    held.release["cbu"].set()
    env.wait_for(lambda: _ended(env, "held-cbu"), 60, "the CBU's Job to end")
    env.kubectl("delete", "job", "held-cbu")
    env.start_operator(*flags)
    env.wait_for(lambda: _status(env, "tr", "held").get("phase") in ("Succeeded", "Failed", "InfrastructureFailed"),
                 120, "the trial's end")
    status = _status(env, "tr", "held")
    assert status["phase"] == "InfrastructureFailed" and status["reason"] == "gateway_error", status
    assert "verification.cbu pod ended" in status["message"] and "without its outcome" in status["message"]
    record = json.loads((env.store / "_trials" / "default" / "held" / "trial.json").read_text())
    assert record["panel"]["outcome"] == "confirmed", "the step that ended unseen is finished"
    assert record["cbu"]["outcome"] is None and record["phase"] == "InfrastructureFailed"
    jobs = {name: n for (plural, name), n in added.items() if plural == "jobs"}
    assert jobs == {"held-a0": 1, "held-score-verify": 1, "held-panel": 1, "held-cbu": 1}, "none launched twice"
