"""Deleting what runs: a Trial's and a campaign's Jobs and pods go with them (finalizers across namespaces), a
cancelled trial is ``Cancelled`` — never Failed, never scored, never run again by its campaign — and a Trial,
ScoringRun or campaign in a namespace the operator does not serve gets a NotServed Warning Event.

In the cluster fake with pods under bubblewrap (an agent that sleeps), the Jobs in a trials namespace of their own
(``--trials-namespace``, as the chart runs it: no ownerReference reaches them).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from anchorage.runtime.kube.jobs import JOBS_FINALIZER, LABEL_CAMPAIGN, LABEL_TRIAL

from .conftest import Env

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]  # each test runs the operator and sandboxed pods (~20-40 s)
SLEEP = ["/bin/sh", "-c", "sleep 600"]
TRIALS_NS = "trials"


def _trial(name: str, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": name, "namespace": namespace},
            "spec": {"task": "smoke-inventory", "agent": {"kind": "command", "command": SLEEP}}}


def _names(env: Env, group: str, plural: str, **labels: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in env.objects(group, plural)
                  if all((o["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items()))


def _running(env: Env, name: str) -> bool:
    trial = [t for t in env.objects("anchorage.dev", "trials") if t["metadata"]["name"] == name]
    return bool(trial) and (trial[0].get("status") or {}).get("phase") == "Running" and \
        bool(_names(env, "", "pods", **{"batch.kubernetes.io/job-name": f"{name}-a0"}))


def test_a_deleted_running_trial_stops_its_job_and_pod_and_is_recorded_cancelled(kube_env: Env) -> None:
    env = kube_env
    env.start_operator("--trials-namespace", TRIALS_NS)
    env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(_trial("sleepy")))
    env.wait_for(lambda: _running(env, "sleepy"), 60, "the trial's pod to run")
    trial = env.get("tr", "sleepy")
    assert trial["metadata"]["finalizers"] == [JOBS_FINALIZER]  # added before its first Job (a lone trial)
    job = next(j for j in env.objects("batch", "jobs") if j["metadata"]["name"] == "sleepy-a0")
    assert job["metadata"]["namespace"] == TRIALS_NS and not job["metadata"].get("ownerReferences")

    env.kubectl("delete", "tr", "sleepy", "--wait=false")
    env.wait_for(lambda: not _names(env, "anchorage.dev", "trials") and not _names(env, "batch", "jobs")
                 and not _names(env, "", "pods"), 30, "the trial, its Job and its pod to go")
    record = json.loads((env.store / "_trials" / "default" / "sleepy" / "trial.json").read_text())
    assert (record["phase"], record["reason"]) == ("Cancelled", "cancelled") and record["score"] is None
    assert "1 running Job(s) and their pods stopped" in record["message"]
    events = json.loads(env.kubectl("get", "events", "-o", "json").stdout)["items"]
    assert [e["reason"] for e in events if e["involvedObject"]["name"] == "sleepy"][-1] == "Cancelled"


def test_a_campaigns_cancelled_trials_are_never_run_again_nor_scored(kube_env: Env) -> None:
    env = kube_env
    env.start_operator("--trials-namespace", TRIALS_NS)
    campaign = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": "halt"},
                "spec": {"tasks": ["smoke-inventory"], "seeds": 2, "parallelism": 1,
                         "entries": [{"name": "sleepy", "agent": {"kind": "command", "command": SLEEP}}]}}
    env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(campaign))
    seen: list[str] = []
    for _ in range(2):  # cancel each trial while it runs: the next seed starts, the cancelled one never again
        env.wait_for(lambda done=tuple(seen): any(_running(env, n) for n in _names(env, "anchorage.dev", "trials")
                                                  if n not in done), 120, "the campaign's next trial to run")
        current = [n for n in _names(env, "anchorage.dev", "trials") if n not in seen]
        assert len(current) == 1, current
        seen += current
        gone = current[0]
        env.kubectl("delete", "tr", gone, "--wait=false")
        env.wait_for(lambda gone=gone: gone not in _names(env, "anchorage.dev", "trials")
                     and not _names(env, "batch", "jobs", **{LABEL_TRIAL: gone}), 30, "the trial to go")
    # (the campaign notices on its next sweep; a loaded machine stretches that, the cancellation itself took < 30 s)
    try:
        env.wait_for(lambda: (env.get("vc", "halt").get("status") or {}).get("phase") == "Succeeded", 120,
                     "the campaign")
    except AssertionError as exc:  # the operator's log tail is its timers' lines: the campaign's status says more
        raise AssertionError(f"{exc}\nthe campaign's status: {env.get('vc', 'halt').get('status')}") from None
    status = env.get("vc", "halt")["status"]
    assert (status["finished"], status["scored"], status["cancelled"], status["infrastructureFailed"]) == (2, 0, 2, 0)
    assert "2 cancelled (deleted before their end" in status["message"]
    row = status["leaderboard"][0]
    assert row["entry"] == "sleepy" and row["cancelled"] == 2 and row["incomplete"] is True and "oEval" not in row
    board = json.loads((env.store / "halt" / "leaderboard.json").read_text())
    assert "2 Cancelled" in board["rows"][0]["no_score"] and board["rows"][0]["infrastructure_failed"] == 0
    for name in seen:  # each recorded Cancelled, none created twice
        assert json.loads((env.store / "halt" / name / "trial.json").read_text())["phase"] == "Cancelled"
    assert not _names(env, "anchorage.dev", "trials", **{LABEL_CAMPAIGN: "halt"})
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Complete"] == "True" and conditions["Reconciling"] == "False"


def test_objects_in_namespaces_not_served_get_a_not_served_event(kube_env: Env) -> None:
    env = kube_env
    env.env["ANCHORAGE_UNSERVED_SECONDS"] = "2"
    env.start_operator()  # serves "default" only
    env.kubectl("create", "namespace", "elsewhere", check=False)
    run = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "ScoringRun",
           "metadata": {"name": "lost-run", "namespace": "elsewhere"},
           "spec": {"task": "smoke-inventory", "artifacts": [{"uri": "x/y.json", "entry": "e", "seed": 0}]}}
    for doc in (_trial("lost", "elsewhere"), run, _trial("served")):
        env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(doc))

    def warned() -> dict[str, str]:
        items = json.loads(env.kubectl("get", "events", "-A", "-o", "json").stdout)["items"]
        return {e["involvedObject"]["name"]: e["message"] for e in items if e["reason"] == "NotServed"}

    env.wait_for(lambda: {"lost", "lost-run"} <= set(warned()), 30, "the NotServed events")
    message = warned()["lost"]
    assert "serves only default" in message and "kubectl apply -n default" in message
    assert "add elsewhere to the chart's operator.watchNamespaces" in message
    assert "served" not in warned()  # the served trial ran
    lost = json.loads(env.kubectl("get", "tr", "lost", "-n", "elsewhere", "-o", "json").stdout)
    assert not lost.get("status") and not lost["metadata"].get("finalizers")  # untouched: it is not this operator's
