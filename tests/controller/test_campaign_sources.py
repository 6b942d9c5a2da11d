"""In the fake: campaigns choosing tasks with taskSelector, and ScoringRuns rescoring a campaign (campaignRef)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from .conftest import Env

pytestmark = pytest.mark.sandbox

API = "anchorage.dev/v1alpha1"
ORACLE = {"name": "o", "agent": {"kind": "oracle"}}


def _apply(env: Env, kind: str, name: str, spec: dict[str, Any]) -> None:
    env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump({"apiVersion": API, "kind": kind, "metadata": {"name": name},
                                                          "spec": spec}))


def _status(env: Env, plural: str, name: str) -> dict[str, Any]:
    result = env.kubectl("get", plural, name, "-o", "json", check=False)
    return (json.loads(result.stdout).get("status") or {}) if result.returncode == 0 else {}


@pytest.mark.slow  # a campaign of two sandboxed trials, then a ScoringRun of its artifacts: 11-43 s as the load goes
def test_a_selected_campaign_runs_and_a_campaign_ref_rescores_its_artifacts(kube_env: Env) -> None:
    kube_env.start_operator()
    _apply(kube_env, "VerificationCampaign", "sel", {"taskSelector": {"names": ["smoke-*"]}, "entries": [ORACLE],
                                                     "seeds": 2, "parallelism": 2})
    kube_env.wait_for(lambda: _status(kube_env, "vc", "sel").get("phase") == "Succeeded", 180, "the campaign")
    campaign = _status(kube_env, "vc", "sel")
    assert campaign["progress"] == "2/2" and campaign["leaderboard"][0]["entry"] == "o"
    tasks = {t["spec"]["task"] for t in kube_env.objects("anchorage.dev", "trials")}
    assert tasks == {"smoke-inventory"}  # what the selector matched

    _apply(kube_env, "ScoringRun", "rescore", {"campaignRef": "sel"})  # one task: spec.task may be left out
    kube_env.wait_for(lambda: _status(kube_env, "sr", "rescore").get("phase") in ("Succeeded", "Failed"), 120,
                      "the rescoring run")
    run = _status(kube_env, "sr", "rescore")
    assert run["phase"] == "Succeeded", run
    assert sorted((s["entry"], s["seed"], s["oEval"]) for s in run["scores"]) == [("o", 0, 1.0), ("o", 1, 1.0)]
    job = next(j for j in kube_env.objects("batch", "jobs") if j["metadata"]["name"] == "rescore-verify")
    fetch = job["spec"]["template"]["spec"]["initContainers"][0]["args"]
    trial_names = sorted(t["metadata"]["name"] for t in kube_env.objects("anchorage.dev", "trials"))
    assert sorted(a.split("=", 1)[1] for a in fetch if "=" in a) == [f"sel/{n}/artifacts" for n in trial_names]
    assert run["recordUri"].endswith("/_scoring/default/rescore")
    assert sorted(p.name for p in (kube_env.store / "_scoring" / "default" / "rescore").iterdir()
                  if p.is_dir()) == ["o-s0", "o-s1"]
    assert run["profile"] == "paper@1" and run["leaderboard"][0]["entry"] == "o"

    # the same artifacts under another profile: a second board, no agent rerun
    trials_before = len(kube_env.objects("anchorage.dev", "trials"))
    _apply(kube_env, "ScoringRun", "rescore-strict", {"campaignRef": "sel", "scoring": {"profile": "strict"}})
    kube_env.wait_for(lambda: _status(kube_env, "sr", "rescore-strict").get("phase") in ("Succeeded", "Failed"), 120,
                      "the strict rescoring run")
    strict = _status(kube_env, "sr", "rescore-strict")
    assert strict["phase"] == "Succeeded" and strict["profile"] == "strict@1", strict
    assert [r["entry"] for r in strict["leaderboard"]] == ["o"] and strict["leaderboard"][0]["oEval"] == 1.0
    board = json.loads((kube_env.store / "_scoring" / "default" / "rescore-strict" / "leaderboard.json").read_text())
    assert board["profile"] == "strict@1"
    assert len(kube_env.objects("anchorage.dev", "trials")) == trials_before
    job = next(j for j in kube_env.objects("batch", "jobs") if j["metadata"]["name"] == "rescore-strict-verify")
    assert "--profile" in job["spec"]["template"]["spec"]["containers"][0]["command"]


@pytest.mark.parametrize(("spec", "fragment"), [
    ({"campaignRef": "two"}, "campaign 'two' has 2 tasks (smoke-inventory, cumcm-2024-a-dragon-dance)"),
    ({"campaignRef": "two", "task": "mcm-2023-c-wordle"}, "task 'mcm-2023-c-wordle' is not one of campaign 'two'"),
    ({"campaignRef": "two", "task": "smoke-inventory"}, "has no uploaded artifacts for task 'smoke-inventory'"),
    ({"campaignRef": "nope"}, "campaignRef 'nope' does not exist"),
], ids=["several-tasks-need-task", "task-not-in-campaign", "nothing-uploaded-yet", "no-such-campaign"])
def test_campaign_ref_runs_that_cannot_be_scored_fail_with_a_clear_message(kube_env: Env, spec: dict[str, Any],
                                                                            fragment: str) -> None:
    _apply(kube_env, "VerificationCampaign", "two", {"tasks": ["smoke-inventory", "cumcm-2024-a-dragon-dance"],
                                                     "entries": [ORACLE], "suspend": True})
    kube_env.start_operator()
    _apply(kube_env, "ScoringRun", "bad", spec)
    kube_env.wait_for(lambda: _status(kube_env, "sr", "bad").get("phase") == "Failed", 60, "the run to fail")
    assert fragment in _status(kube_env, "sr", "bad")["message"]
    assert not [j for j in kube_env.objects("batch", "jobs") if j["metadata"]["name"] == "bad-verify"]


def test_a_task_selector_matching_nothing_fails_the_campaign_with_the_reason(kube_env: Env) -> None:
    kube_env.start_operator()
    _apply(kube_env, "VerificationCampaign", "empty", {"taskSelector": {"names": ["nope-*"]}, "entries": [ORACLE]})
    kube_env.wait_for(lambda: _status(kube_env, "vc", "empty").get("phase") == "Failed", 60, "the campaign to fail")
    conditions = {c["type"]: c for c in _status(kube_env, "vc", "empty")["conditions"]}
    ready = conditions["Ready"]
    assert ready["reason"] == "InvalidTasks" and "taskSelector (nope-*) matches no task" in ready["message"]
    assert conditions["Failed"]["status"] == conditions["Stalled"]["status"] == "True"  # kubectl wait, kstatus
    assert not kube_env.objects("anchorage.dev", "trials")
