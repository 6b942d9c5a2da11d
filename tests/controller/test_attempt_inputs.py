"""One attempt, one plan: the operator plans a trial's agent (and asks its kind whether it calls models) once for
all the events of an attempt — its start, its end and its record — not once per event (``trialstate.task_inputs``).

In process: the API calls are recorded instead of made, the store is a folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anchorage.controller import attempts, enforcement, finalizers, kube, launching, metering, policies, settings, trialstate
from anchorage.controller.caches import Memo
from anchorage.manifests import TrialSpec
from anchorage.trials import AgentPlan
from anchorage.trials.agents import AgentKind

AGENTS = {"no-model": {"kind": "command", "command": ["true"]},
          "model": {"kind": "command", "command": ["true"], "model": "mock-model"}}


@pytest.fixture
def operator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any]]]:
    """The controller with its API calls recorded (the list), its store in ``tmp_path`` and an empty plan cache."""
    monkeypatch.setenv(settings.CONFIG_ENV, json.dumps({"store_uri": f"file://{tmp_path}",
                                                        "gateway_url": "http://127.0.0.1:9/v1"}))
    monkeypatch.setenv(metering.TOKEN_SECRET_ENV, "hmac-secret")
    monkeypatch.delenv(metering.ADMIN_TOKEN_ENV, raising=False)  # the cost is then unknown, without a request
    settings.config.cache_clear()
    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr(trialstate, "_INPUTS", Memo())
    monkeypatch.setattr(enforcement, "admit", lambda *args: None)
    monkeypatch.setattr(policies, "ensure", lambda *args: None)
    monkeypatch.setattr(kube, "patch_status", lambda *args, **kw: calls.append(("patch_status", args[3])) or True)
    monkeypatch.setattr(kube, "post_event", lambda *args: None)
    monkeypatch.setattr(kube, "create_job", lambda job: calls.append(("create_job", job)) or True)
    monkeypatch.setattr(kube, "create_job_uid", lambda job: calls.append(("create_job", job)) or "job-uid")
    monkeypatch.setattr(kube, "create_secret", lambda secret: calls.append(("create_secret", secret)) or True)
    monkeypatch.setattr(kube, "create_custom_answer", lambda plural, body: calls.append((plural, body)) and None)
    yield calls
    settings.config.cache_clear()


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_one_attempt_plans_once(agent: str, operator: list[tuple[str, Any]], tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    plans: list[AgentPlan] = []
    asked: list[str] = []
    plan_agent, needs_gateway = trialstate.plan_agent, AgentKind.needs_gateway

    def counted_plan(*args: Any) -> AgentPlan:
        plans.append(plan_agent(*args))
        return plans[-1]

    def counted_question(kind: AgentKind, spec: Any) -> bool:
        asked.append(kind.name)
        return needs_gateway(kind, spec)

    monkeypatch.setattr(trialstate, "plan_agent", counted_plan)
    monkeypatch.setattr(AgentKind, "needs_gateway", counted_question)
    trial = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial",
             "metadata": {"name": "t1", "namespace": "evals", "uid": "0a1b", "generation": 1, "resourceVersion": "7",
                          "finalizers": [finalizers.FINALIZER]},
             "spec": {"task": "smoke-inventory", "agent": AGENTS[agent], "seed": 3}}
    # each event validates the spec from the body it got: equal specs, distinct objects
    launching.start_attempt(trial, TrialSpec.model_validate(trial["spec"]), 0)
    started = [patch for call, patch in operator if call == "patch_status"]
    assert [call for call, _ in operator if call.startswith("create")] == \
        ["create_job", "create_secret"] if agent == "model" else ["create_job"]
    running = {**trial, "status": started[0]}
    Path(tmp_path, trialstate.store_prefix(running["status"]), "upload.json").parent.mkdir(parents=True)
    Path(tmp_path, trialstate.store_prefix(running["status"]), "upload.json").write_text("{}")
    attempts.finish(running, {"metadata": {"namespace": "evals", "name": started[0]["jobName"]}}, "Complete")
    record = json.loads(Path(tmp_path, trialstate.store_prefix(running["status"]), trialstate.ATTEMPT_RECORD)
                        .read_text())
    assert (record["phase"], record["reason"]) == ("Succeeded", "completed"), record
    assert (record["cost_usd"] is None) == (agent == "model")  # a model-calling trial's cost: the gateway's to say
    assert len(plans) == 1, "the attempt's start, end and record share one plan"
    assert asked == ["command"], "whether the agent calls models: asked once, of its kind"
    trialstate.task_inputs(TrialSpec.model_validate({**trial["spec"], "seed": 4}))
    assert len(plans) == 2, "another spec is planned anew"
