"""Queued trials' manifests: a trial Job that names a LocalQueue is created suspended with Kueue's labels, a scoring
Job only with the scoring queue; a priority needs a queue; and the operator's reading of Kueue's API (whether it is
installed, its Workloads)."""

from __future__ import annotations

import dataclasses
from typing import Any

import kubernetes_validate
import pytest
from pydantic import ValidationError

from anchorage.campaigns.planning import plan
from anchorage.controller import kube, kueue
from anchorage.errors import InputError
from anchorage.manifests import CampaignSpec, TrialSpec
from anchorage.runtime.kube import jobs
from anchorage.runtime.kube.jobs import KUEUE_PRIORITY_LABEL, KUEUE_QUEUE_LABEL, OperatorConfig
from anchorage.tasks import load_task, resolve_task
from anchorage.trials import AttemptEnd, Phase, Reason, classify, plan_agent, should_retry
from anchorage.trials.limits import resolve_limits

K8S = "1.30.0"
TRIAL = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial",
         "metadata": {"name": "t1", "namespace": "evals", "uid": "0000-1111"}}
TASK = load_task(resolve_task("smoke-inventory"))
#: The task's limits with an agent time of 30 s (as a task.toml could say).
LIMITS = dataclasses.replace(resolve_limits(TASK), timeout_sec=30)
AGENT = {"kind": "command", "command": ["my-agent"]}


def _job(config: OperatorConfig, **spec: Any) -> dict[str, Any]:
    trial = TrialSpec.model_validate({"task": "smoke-inventory", "agent": AGENT, **spec})
    return jobs.trial_job(TRIAL, trial, plan=plan_agent(trial.agent, TASK, 0), limits=LIMITS,
                          config=config, job_name="t1-a0", campaign=None)


def test_a_queued_trial_job_is_suspended_with_the_queue_and_priority_labels() -> None:
    job = _job(OperatorConfig(), queueName="team-a", workloadPriorityClass="urgent")
    kubernetes_validate.validate(job, K8S, strict=True)
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "team-a"
    assert job["metadata"]["labels"][KUEUE_PRIORITY_LABEL] == "urgent"
    # the queue changes no deadline: the agent's is timed from its container's start, the Job's backstop from the
    # Job's start, which Kubernetes sets when Kueue resumes it (a suspended Job has none)
    assert job["spec"]["activeDeadlineSeconds"] == 30 + jobs.platform_allowance(OperatorConfig())
    assert job["spec"]["activeDeadlineSeconds"] == _job(OperatorConfig())["spec"]["activeDeadlineSeconds"]
    assert job["spec"]["template"]["metadata"]["annotations"][jobs.ANNOTATION_TIMEOUT] == "30"


def test_the_trials_queue_wins_over_the_operators_and_none_means_not_queued() -> None:
    assert _job(OperatorConfig(kueue_queue="all"), queueName="mine")["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "mine"
    assert _job(OperatorConfig(kueue_queue="all"))["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "all"
    plain = _job(OperatorConfig())
    assert "suspend" not in plain["spec"] and KUEUE_QUEUE_LABEL not in plain["metadata"]["labels"]


def test_scoring_jobs_follow_the_scoring_queue_only() -> None:
    run = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "ScoringRun",
           "metadata": {"name": "r1", "namespace": "evals", "uid": "1"}}
    for config, queued in ((OperatorConfig(kueue_queue="all"), False), (OperatorConfig(kueue_scoring_queue="s"), True)):
        verifier = jobs.verifier_job(run, task="smoke-inventory", artifacts=[], out="x", config=config,
                                     baseline=None, gates=True)
        protocol = jobs.protocol_job(TRIAL, step="panel", task="smoke-inventory", settings={}, artifact=None,
                                     config=config, campaign=None)
        for job in (verifier, protocol):
            kubernetes_validate.validate(job, K8S, strict=True)
            assert job["spec"].get("suspend", False) is queued
            assert job["metadata"]["labels"].get(KUEUE_QUEUE_LABEL) == ("s" if queued else None)


def test_a_priority_without_a_queue_is_refused_and_a_campaigns_queue_reaches_its_trials() -> None:
    with pytest.raises(ValidationError, match="workloadPriorityClass needs queueName"):
        TrialSpec.model_validate({"task": "smoke-inventory", "agent": AGENT, "workloadPriorityClass": "urgent"})
    spec = CampaignSpec.model_validate({"tasks": ["smoke-inventory"], "entries": [{"name": "e", "agent": AGENT}],
                                        "seeds": 2, "queueName": "team-b", "workloadPriorityClass": "low"})
    trials = plan("c", spec, ["smoke-inventory"])
    assert {(t.spec.queue_name, t.spec.workload_priority_class) for t in trials} == {("team-b", "low")}


def test_a_preempted_attempt_is_the_platforms_failure_and_retried() -> None:
    outcome = classify(AttemptEnd(preempted="Kueue evicted the attempt's workload (Preempted)"))
    assert (outcome.phase, outcome.reason) == (Phase.INFRASTRUCTURE_FAILED, Reason.PREEMPTED)
    assert should_retry(outcome, 1, 1) and not should_retry(outcome, 2, 1)
    assert not Phase.QUEUED.terminal


def _workload(*conditions: tuple[str, str], owner: str = "Job") -> dict[str, Any]:
    return {"metadata": {"ownerReferences": [{"apiVersion": "batch/v1", "kind": owner, "name": "t1-a0"}]},
            "status": {"conditions": [{"type": t, "status": s, "message": f"{t} says"} for t, s in conditions]}}


@pytest.mark.parametrize(("conditions", "state"), [
    ((), "pending"), ((("QuotaReserved", "False"),), "pending"), ((("QuotaReserved", "True"), ("Admitted", "True")),
                                                                  "admitted"),
    ((("Admitted", "True"), ("Evicted", "True")), "evicted"), ((("Admitted", "False"), ("Evicted", "True")), "evicted"),
    ((("Finished", "True"), ("Admitted", "True")), "finished")])
def test_a_workloads_state(conditions: tuple[tuple[str, str], ...], state: str) -> None:
    assert kueue.state(_workload(*conditions)) == state


def test_a_workloads_job_and_why_it_waits() -> None:
    assert kueue.workload_job(_workload()) == "t1-a0"
    assert kueue.workload_job(_workload(owner="Pod")) is None
    assert kueue.waiting_message(_workload(("QuotaReserved", "False"))) == "QuotaReserved says"
    assert kueue.waiting_message(_workload(("QuotaReserved", "True"))) is None


def test_positions_come_from_the_visibility_apis_pending_list() -> None:
    from anchorage.controller.queueing import positions

    def item(job: str, ns: str, position: int) -> dict[str, Any]:
        return {"metadata": {"name": f"job-{job}-x", "namespace": ns,
                             "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job}]},
                "positionInLocalQueue": position, "positionInClusterQueue": position + 5}

    pending = [item("t1-a0", "trials", 0), item("t2-a1", "trials", 1), item("t3-a0", "elsewhere", 2)]
    assert positions("trials", "q", pending) == {"t1-a0": 0, "t2-a1": 1}


def test_every_trial_phase_queued_included_has_its_lifecycle_state() -> None:
    """Queued is at work (Reconciling, neither Complete nor Failed) by its own entry, not by a default."""
    from anchorage.runtime.kube.conditions import _TRIAL_STATES, lifecycle, state_of

    assert set(_TRIAL_STATES) == {str(p) for p in Phase}
    flags = {c["type"]: c["status"] for c in lifecycle(state_of("Queued", trial=True), "Queued")}
    assert flags == {"Complete": "False", "Failed": "False", "Reconciling": "True", "Stalled": "False"}


def test_kueue_installed_just_after_a_remembered_absence_is_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator remembers "Kueue is not installed" for a while (its Workloads' watch polls), but a refusal fails
    the campaign for good, so it is made on the API server's answer of the moment (CI run ci52: a campaign applied
    seconds after Kueue's install was refused on the answer the previous test's refusal had left)."""
    served: set[str] | None = None
    asked: list[str] = []

    def api_resources(group: str, version: str) -> set[str] | None:
        asked.append(f"{group}/{version}")
        return served

    monkeypatch.setattr(kube, "api_resources", api_resources)
    monkeypatch.setattr(kube, "get_local_queue", lambda namespace, name: {"metadata": {"name": name}})
    kueue.forget()
    try:
        with pytest.raises(InputError, match="Kueue is not installed"):
            kueue.require("team-a", "trials")
        assert not kueue.installed() and len(asked) == 1  # the poll reuses the refusal's answer: not asked again
        served = {"workloads", "localqueues"}  # Kueue installed, well within RECHECK_SEC
        assert not kueue.installed()  # the poll may still say no for a while ...
        kueue.require("team-a", "trials")  # ... a refusal may not
        assert len(asked) == 2 and kueue.installed()
    finally:
        kueue.forget()
