"""What a campaign's status says, on the cluster fake with simulated pods: an unknown task fails the campaign once
(no Trials, no more passes until its spec changes); lowering seeds counts the new plan; infrastructure failures
make the campaign Degraded and their entries incomplete, an entry with nothing scored has null scores, the Ready
message says how many were scored; Events on phase changes and failures."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from simulated_pods import anchorage_pod

from .conftest import Env, cluster_env


def _campaign(name: str, tasks: list[str], seeds: int, entries: list[str], parallelism: int = 4) -> dict[str, Any]:
    return {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": name},
            "spec": {"tasks": tasks, "seeds": seeds, "parallelism": parallelism,
                     "entries": [{"name": e, "agent": {"kind": "command", "command": ["true"]}} for e in entries]}}


def _status(env: Env, name: str) -> dict[str, Any]:
    out = env.kubectl("get", "vc", name, "-o", "json", check=False).stdout
    return dict(json.loads(out).get("status") or {}) if out else {}


def _events(env: Env, name: str) -> list[dict[str, Any]]:
    listing = json.loads(env.kubectl("get", "events", "-o", "json").stdout)
    return [e for e in listing["items"] if e["involvedObject"]["name"] == name]


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status.get("conditions") or [] if c["type"] == kind)


def test_an_unknown_task_fails_the_campaign_once_and_a_fix_runs_it(sim_env: Env) -> None:
    env = sim_env
    env.start_operator()
    env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(_campaign("typo", ["smoke-inventroy"], 2, ["a"])))
    env.wait_for(lambda: _status(env, "typo").get("phase") == "Failed", 60, "the campaign to fail")
    status = _status(env, "typo")
    assert "smoke-inventroy" in status["message"] and _condition(status, "Ready")["reason"] == "InvalidTasks"
    assert env.objects("anchorage.dev", "trials") == []
    warnings = [e for e in _events(env, "typo") if e["type"] == "Warning"]
    assert [e["reason"] for e in warnings] == ["InvalidTasks"] and "smoke-inventroy" in warnings[0]["message"]
    writes = env.cluster.api.counts["PATCH verificationcampaigns/status"]
    time.sleep(3)  # ten campaign intervals: a failed campaign gets no more passes
    assert env.cluster.api.counts["PATCH verificationcampaigns/status"] == writes
    env.kubectl("patch", "vc", "typo", "--type=merge", "-p", '{"spec": {"tasks": ["smoke-inventory"]}}')
    env.wait_for(lambda: _status(env, "typo").get("phase") == "Succeeded", 120, "the fixed campaign to finish")
    assert _status(env, "typo")["progress"] == "2/2"
    assert {"Started", "Succeeded"} <= {e["reason"] for e in _events(env, "typo") if e["type"] == "Normal"}


def test_lowering_seeds_counts_the_new_plan(sim_env: Env) -> None:
    env = sim_env
    env.start_operator()
    env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(_campaign("lower", ["smoke-inventory"], 6, ["a"], 6)))
    env.wait_for(lambda: _status(env, "lower").get("phase") == "Succeeded", 120, "six seeds")
    env.kubectl("patch", "vc", "lower", "--type=merge", "-p", '{"spec": {"seeds": 2}}')
    env.wait_for(lambda: _status(env, "lower").get("total") == 2, 60, "the lowered plan to be counted")
    status = _status(env, "lower")
    assert status["phase"] == "Succeeded" and status["progress"] == "2/2", status
    assert "4 existing trial(s) are outside the current plan" in status["message"]
    assert len(env.objects("anchorage.dev", "trials")) == 6  # nothing deleted: their records stay


def _broken_entry(pod: dict[str, Any]) -> dict[str, int]:
    """Simulated pods, except that the entry ``broken``'s pods upload nothing (an infrastructure failure)."""
    containers = [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]
    env = {e["name"]: e.get("value", "") for c in containers for e in c.get("env", [])}
    if "-broken-" in env.get("ANCHORAGE_DEST", ""):
        return {c["name"]: 0 for c in containers}
    return anchorage_pod(pod)


@pytest.fixture
def broken_env(tmp_path: Path) -> Iterator[Env]:
    with cluster_env(tmp_path, simulate=_broken_entry, interval="0.3") as env:
        yield env


def test_infrastructure_failures_make_the_campaign_degraded_and_honest(broken_env: Env) -> None:
    env = broken_env
    env.start_operator()
    env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(_campaign("mixed", ["smoke-inventory"], 2, ["good", "broken"])))
    env.wait_for(lambda: _status(env, "mixed").get("phase") == "Succeeded", 120, "the campaign to finish")
    status = _status(env, "mixed")
    assert status["infrastructureFailed"] == 2 and status["scored"] == 2
    assert status["message"].startswith("2 of 4 trials scored; 2 ended InfrastructureFailed")
    assert _condition(status, "Degraded")["status"] == "True" and _condition(status, "Ready")["status"] == "True"
    rows = {r["entry"]: r for r in status["leaderboard"]}
    assert rows["broken"]["infrastructureFailed"] == 2 and rows["broken"]["incomplete"] is True
    assert "oEval" not in rows["broken"] and "boEval" not in rows["broken"], "nothing scored: no score, not 0 or -1"
    assert rows["good"]["incomplete"] is False and rows["good"]["oEval"] == 1.0
    assert status["bestEntry"] == "good"
    assert "Degraded" in {e["reason"] for e in _events(env, "mixed") if e["type"] == "Warning"}
    broken = [t for t in env.objects("anchorage.dev", "trials") if t["spec"]["entry"] == "broken"]
    for trial in broken:
        reasons = {(e["type"], e["reason"]) for e in _events(env, trial["metadata"]["name"])}
        assert ("Warning", "InfrastructureFailed") in reasons
    described = env.kubectl("describe", "vc", "mixed").stdout
    assert "Degraded" in described
