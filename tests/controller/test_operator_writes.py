"""The operator's API writes per trial (issue 4's budget), and the lone objects' watchdog.

Pods are simulated (``FakeKubelet(simulate=True)``): the test is about the operator's requests. The
writes of a campaign trial are exactly: POST Trial (by the campaign), PATCH its status twice (Running,
then the outcome with the scores), POST its Job, POST its ScoringRun, POST the verifier Job, PATCH the
run's status — and kopf leaves no annotation or finalizer on Trials and ScoringRuns. The operator's own finalizer
(``anchorage.dev/stop-jobs``: their Jobs run in another namespace) is in the bodies it creates: no write more.
"""

from __future__ import annotations

import collections
import json

import pytest
import yaml

from anchorage.controller import kube
from anchorage.runtime.kube.conditions import LIFECYCLE_TYPES
from anchorage.runtime.kube.jobs import JOBS_FINALIZER, NAME_LABELS
from anchorage_devcluster.apiserver import Fault

from .conftest import Env

pytestmark = pytest.mark.slow


def _phase(env: Env, plural: str, name: str) -> str | None:
    out = env.kubectl("get", plural, name, "-o", "jsonpath={.status.phase}", check=False).stdout
    return out or None


def test_a_campaign_trial_costs_seven_writes_and_carries_no_kopf_state(sim_env: Env) -> None:
    env = sim_env
    campaign = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": "w"},
                "spec": {"tasks": ["smoke-inventory"], "seeds": 4, "parallelism": 3,
                         "entries": [{"name": n, "agent": {"kind": "command", "command": ["true"]}} for n in "ab"]}}
    env.start_operator()
    env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(campaign))
    env.wait_for(lambda: _phase(env, "vc", "w") == "Succeeded", 120, "the campaign")
    counts = collections.Counter(env.cluster.api.counts)
    total = 8
    per_trial = {"POST trials": 1, "PATCH trials/status": 2, "POST jobs": 2, "POST scoringruns": 1,
                 "PATCH scoringruns/status": 1}
    assert {k: counts[k] for k in per_trial} == {k: n * total for k, n in per_trial.items()}
    assert counts["PATCH trials"] == 0 and counts["PATCH scoringruns"] == 0, "kopf wrote to a Trial or ScoringRun"
    for plural in ("trials", "scoringruns"):
        for obj in env.objects("anchorage.dev", plural):
            meta = obj["metadata"]
            assert meta.get("finalizers") == [JOBS_FINALIZER], f"{plural} {meta['name']}: {meta.get('finalizers')}"
            kopf_keys = [k for k in meta.get("annotations") or {} if k.startswith("anchorage.dev/")
                         and k not in ("anchorage.dev/agent-outcome", *NAME_LABELS)]  # full names beside labels
            assert not kopf_keys, f"{plural} {meta['name']} carries kopf state: {kopf_keys}"
    trials = env.objects("anchorage.dev", "trials")
    # the final write carries the outcome and the scoring result together (whatever the simulated verifier wrote)
    assert {t["status"]["phase"] for t in trials} == {"Succeeded"}
    assert all(t["status"].get("gradable") is not None and t["status"]["reason"] == "completed" for t in trials)
    assert all([c["type"] for c in t["status"]["conditions"]] == ["Ready", "Scored", *LIFECYCLE_TYPES] for t in trials)
    assert all(t["status"]["scoringRun"] == f"{t['metadata']['name']}-score" for t in trials)


def test_a_lone_trial_whose_launch_failed_is_launched_by_the_watchdog(sim_env: Env) -> None:
    env = sim_env
    # As many 500s as the client tries (its one retry layer): the launch fails, no further event comes.
    tries = kube.Client.ATTEMPTS
    env.thread.call(lambda: env.cluster.api.faults.append(Fault(500, "PATCH", "/trials/lone/status", times=tries)))
    trial = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": "lone"},
             "spec": {"task": "smoke-inventory", "agent": {"kind": "command", "command": ["true"]}}}
    env.start_operator()
    env.kubectl("apply", "-f", "-", stdin=json.dumps(trial))
    env.wait_for(lambda: env.thread.call(lambda: env.cluster.api.faults[0].times) == 0, 60, "the failed launch")
    assert _phase(env, "tr", "lone") is None
    env.wait_for(lambda: _phase(env, "tr", "lone") == "Succeeded", 90, "the watchdog to launch the trial")
    assert [j["metadata"]["name"] for j in env.objects("batch", "jobs")].count("lone-a0") == 1
