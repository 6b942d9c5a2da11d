"""The operator's Kueue metrics, which the dashboards' batch-queue panels query: workloads by queue and state from the
Workloads' events, the wait until admission and the preemptions by campaign."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY

from anchorage import metrics
from anchorage.controller.peering import Peering
from anchorage.controller.queueing import WorkloadEvents


def _workload(name: str, queue: str, *conditions: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "trials", "uid": f"uid-{name}",
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"job-{name}"}]},
            "spec": {"queueName": queue},
            "status": {"conditions": [{"type": c, "status": "True", "lastTransitionTime": "2026-12-04T00:00:00Z"}
                                      for c in conditions]}}


def _workloads(queue: str, state: str) -> float | None:
    return REGISTRY.get_sample_value("anchorage_queue_workloads", {"queue": queue, "state": state})


def test_workloads_are_counted_by_queue_and_state_as_their_events_come() -> None:
    paused = Peering()
    paused.paused = True  # counts only: nothing dispatched to the trials
    events = WorkloadEvents(paused)
    events("ADDED", _workload("w1", "qm-team", "QuotaReserved"))
    events("ADDED", _workload("w2", "qm-team"))
    events("ADDED", _workload("w3", "qm-team"))
    assert (_workloads("qm-team", "pending"), _workloads("qm-team", "admitted")) == (3, None)
    events("MODIFIED", _workload("w1", "qm-team", "QuotaReserved", "Admitted"))
    assert (_workloads("qm-team", "pending"), _workloads("qm-team", "admitted")) == (2, 1)
    events("MODIFIED", _workload("w1", "qm-team", "QuotaReserved", "Admitted", "Finished"))
    events("DELETED", _workload("w2", "qm-team"))
    assert (_workloads("qm-team", "pending"), _workloads("qm-team", "admitted")) == (1, 0)  # gone, not stale
    events("ADDED", {"metadata": {"name": "other", "namespace": "trials"}, "spec": {"queueName": "qm-team"}})
    assert _workloads("qm-team", "pending") == 1  # a Workload of no Job of ours is not counted


def test_the_wait_and_the_preemptions_are_a_campaigns_series() -> None:
    trial = {"metadata": {"labels": {"anchorage.dev/campaign": "qm-campaign"}},
             "spec": {"entry": "e", "task": "smoke-inventory"}}
    metrics.operator_trial_admitted(trial, "qm-queue", 42.0)
    metrics.operator_trial_admitted(trial, "qm-queue", -1.0)  # clocks apart: never a negative wait
    metrics.operator_trial_preempted(trial, "qm-queue")
    labels = {"campaign": "qm-campaign", "queue": "qm-queue"}
    assert REGISTRY.get_sample_value("anchorage_queue_wait_seconds_sum", labels) == 42.0
    assert REGISTRY.get_sample_value("anchorage_queue_wait_seconds_count", labels) == 2
    assert REGISTRY.get_sample_value("anchorage_preemptions_total", labels) == 1
    metrics.forget_campaign("qm-campaign")  # the campaign deleted: its series go with it
    assert REGISTRY.get_sample_value("anchorage_preemptions_total", labels) is None
    assert REGISTRY.get_sample_value("anchorage_queue_wait_seconds_sum", labels) is None


def test_the_dashboards_leave_out_only_what_the_operator_alone_exports() -> None:
    assert {"anchorage_queue_wait_seconds_sum", "anchorage_preemptions_total", "anchorage_queue_workloads",
            "anchorage_operator_watch_restarts_total"} <= metrics.OPERATOR_ONLY
    assert not any(name.startswith(("anchorage_trials", "anchorage_gateway", "anchorage_cost"))
                   for name in metrics.OPERATOR_ONLY)
