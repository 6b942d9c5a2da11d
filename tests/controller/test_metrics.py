"""The operator's Prometheus ``/metrics`` (``anchorage operator --metrics-port``), end to end in the
cluster fake, and the label helpers the controller feeds it through (``anchorage.metrics``)."""

from __future__ import annotations

import re
import urllib.request
from datetime import UTC, datetime

import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from anchorage import metrics
from score_records import gate, score_record

from .conftest import REPO, Env

TRIAL = "smoke-oracle-s0"


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _port(env: Env) -> int | None:
    found = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", env.logs[-1].read_text())
    return int(found.group(1)) if found else None


def _scored(env: Env) -> bool:
    return env.kubectl("get", "tr", TRIAL, "-o", "jsonpath={.status.oEval}", check=False).stdout != ""


@pytest.mark.sandbox
def test_operator_serves_trial_counts_and_scores_without_trial_names(kube_env: Env) -> None:
    kube_env.start_operator("--metrics-port", "0")
    kube_env.wait_for(lambda: _port(kube_env) is not None, 30, "the operator to announce its /metrics port")
    kube_env.kubectl("apply", "-f", str(REPO / "examples" / "trial.yaml"))
    kube_env.wait_for(lambda: _scored(kube_env), 90, "the trial to be scored")
    with urllib.request.urlopen(f"http://127.0.0.1:{_port(kube_env)}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = _samples(text)
    finished = {"campaign": "none", "entry": "oracle", "task": "smoke-inventory", "phase": "Succeeded",
                "reason": "completed"}
    assert samples[("anchorage_trials_finished_total", frozenset(finished.items()))] == 1.0
    score = {"campaign": "none", "entry": "oracle", "task": "smoke-inventory", "profile": "paper"}
    assert samples[("anchorage_o_eval", frozenset(score.items()))] == 1.0
    gates = {"campaign": "none", "task": "smoke-inventory", "status": "passed"}
    assert samples[("anchorage_gates_checked_total", frozenset(gates.items()))] >= 1  # the driver counts the gates
    durations = {"campaign": "none", "entry": "oracle", "task": "smoke-inventory", "phase": "Succeeded"}
    assert samples[("anchorage_trial_duration_seconds_count", frozenset(durations.items()))] == 1.0
    assert TRIAL not in text  # bounded labels: the trial's name is in no series


def test_trial_labels_use_campaign_entry_and_task_never_the_name() -> None:
    child = {"metadata": {"name": "c-flash-smoke-s1", "labels": {"anchorage.dev/campaign": "c"}},
             "spec": {"task": "smoke", "entry": "flash", "agent": {"kind": "codex"}}}
    lone = {"metadata": {"name": "t1"}, "spec": {"task": "smoke", "agent": {"kind": "oracle"}}}
    assert metrics.trial_labels(child) == ("c", "flash", "smoke")
    assert metrics.trial_labels(lone) == ("none", "oracle", "smoke")


def test_finished_trial_duration_is_measured_from_its_start_time() -> None:
    trial = {"metadata": {"labels": {"anchorage.dev/campaign": "dur"}},
             "spec": {"task": "t-dur", "entry": "e"}, "status": {"startTime": "2026-01-01T00:00:00Z"}}
    labels = {"campaign": "dur", "entry": "e", "task": "t-dur", "phase": "Failed"}
    before = REGISTRY.get_sample_value("anchorage_trial_duration_seconds_sum", labels) or 0.0
    metrics.operator_trial_finished(trial, "Failed", "timeout", now=datetime(2026, 1, 1, 0, 2, tzinfo=UTC))
    assert REGISTRY.get_sample_value("anchorage_trial_duration_seconds_sum", labels) == before + 120.0
    assert REGISTRY.get_sample_value("anchorage_trials_finished_total", {
        "campaign": "dur", "entry": "e", "task": "t-dur", "phase": "Failed", "reason": "timeout"}) == 1.0


def test_campaign_counts_cover_planned_trials_and_reset_phases_left() -> None:
    entries = {"a-s0": "a", "a-s1": "a", "b-s0": "b"}
    metrics.campaign_trial_counts("cnt", entries, {"a-s0": "Running", "b-s0": None})

    def count(entry: str, phase: str) -> float | None:
        return REGISTRY.get_sample_value("anchorage_trials", {"campaign": "cnt", "entry": entry, "phase": phase})

    assert (count("a", "Running"), count("a", "Pending"), count("b", "Pending")) == (1.0, 1.0, 1.0)
    metrics.campaign_trial_counts("cnt", entries, {"a-s0": "Succeeded", "a-s1": "Running", "b-s0": "Failed"})
    assert (count("a", "Running"), count("a", "Succeeded"), count("a", "Pending")) == (1.0, 1.0, 0.0)
    assert (count("b", "Pending"), count("b", "Failed")) == (0.0, 1.0)


def test_scores_are_the_mean_over_seeds_and_a_replayed_trial_counts_once() -> None:
    def trial(name: str) -> dict[str, object]:
        return {"metadata": {"name": name, "labels": {"anchorage.dev/campaign": "mean"}},
                "spec": {"task": "t-mean", "entry": "e"}}

    labels = {"campaign": "mean", "entry": "e", "task": "t-mean", "profile": "paper"}
    metrics.operator_trial_scored(trial("s0"), 1.0, 0.5, "paper@1")
    metrics.operator_trial_scored(trial("s1"), 0.0, -1.0, "paper@1")
    metrics.operator_trial_scored(trial("s1"), 0.0, -1.0, "paper@1")  # the same trial's event again
    metrics.operator_trial_scored(trial("s2"), None, None, "paper@1")  # unscored: not a zero
    assert REGISTRY.get_sample_value("anchorage_o_eval", labels) == 0.5
    assert REGISTRY.get_sample_value("anchorage_bo_eval", labels) == -0.25
    assert REGISTRY.get_sample_value("anchorage_seeds_scored", labels) == 2.0


def test_a_deleted_campaign_takes_its_series_along() -> None:
    trial = {"metadata": {"name": "gone-s0", "labels": {"anchorage.dev/campaign": "gone"}},
             "spec": {"task": "t-gone", "entry": "e"}}
    metrics.campaign_trial_counts("gone", {"gone-s0": "e"}, {"gone-s0": "Running"})
    metrics.operator_trial_scored(trial, 1.0, 1.0, "paper@1")
    metrics.operator_score_checked(trial, score_record(gates=[gate("g", "failed")], obligations={"proved": 2, "failed": 1}))
    metrics.record_tokens("gone", "e", None, input_tokens=5, cached_input_tokens=0, output_tokens=1,
                          reasoning_tokens=0, cost_usd=0.5)
    metrics.campaign_trial_counts("kept", {"kept-s0": "e"}, {"kept-s0": "Running"})
    assert metrics.forget_campaign("gone") >= 10
    text = generate_latest(REGISTRY).decode()
    assert 'campaign="gone"' not in text
    assert 'anchorage_trials{campaign="kept",entry="e",phase="Running"} 1.0' in text
    metrics.operator_trial_scored({**trial, "metadata": {**trial["metadata"], "name": "gone-s1"}}, 0.0, 0.0, "paper@1")
    again = {"campaign": "gone", "entry": "e", "task": "t-gone", "profile": "paper"}
    assert REGISTRY.get_sample_value("anchorage_seeds_scored", again) == 1.0  # a new campaign of that name starts afresh
    metrics.forget_campaign("gone")
