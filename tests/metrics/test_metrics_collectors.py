"""Collector names and labels follow DESIGN.md; serve() exposes them; model labels stay bounded."""

from __future__ import annotations

import urllib.request

from prometheus_client import REGISTRY

from anchorage import metrics

FORBIDDEN_LABELS = {"trial", "trial_id", "pod", "token"}


def test_names_units_and_bounded_labels() -> None:
    ours = [m for m in REGISTRY.collect() if m.name.startswith("anchorage_")]
    assert {m.name for m in ours} >= {"anchorage_trials", "anchorage_trials_finished",
                                      "anchorage_trial_duration_seconds", "anchorage_o_eval", "anchorage_bo_eval",
                                      "anchorage_tokens", "anchorage_cost_usd", "anchorage_gateway_requests",
                                      "anchorage_gateway_retries", "anchorage_gateway_request_duration_seconds",
                                      "anchorage_gate_failures", "anchorage_obligations_checked"}
    for collector in (metrics.TRIALS_FINISHED, metrics.TOKENS, metrics.COST, metrics.GATEWAY_REQUESTS,
                      metrics.GATE_FAILURES, metrics.OBLIGATIONS, metrics.TRIAL_DURATION, metrics.O_EVAL):
        assert not FORBIDDEN_LABELS & set(collector._labelnames)


def test_unknown_models_become_other() -> None:
    metrics.allow_models(["known-model"])
    assert metrics.model_label("known-model") == "known-model"
    assert metrics.model_label("random-agent-supplied-name-123") == metrics.OTHER
    assert metrics.model_label(None) == metrics.OTHER


def test_helpers_update_collectors_and_serve_exposes_them() -> None:
    metrics.trial_finished("camp-m", "entry-m", "task-m", "Succeeded", "completed", 42.0)
    metrics.set_scores("camp-m", "entry-m", "task-m", o_eval=0.75, bo_eval=None)
    metrics.record_tokens("entry-m", "known-model", input_tokens=10, cached_input_tokens=0, output_tokens=5,
                          reasoning_tokens=0, cost_usd=0.25)
    metrics.gates_checked("task-m", ["error", "warning"])
    metrics.obligations_checked("task-m", "proved", 3)
    server = metrics.serve(0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as response:
            text = response.read().decode()
    finally:
        server.stop()
    assert 'anchorage_o_eval{campaign="camp-m",entry="entry-m",profile="paper",task="task-m"} 0.75' in text
    assert 'anchorage_bo_eval{campaign="camp-m"' not in text  # unscored stays unset, not 0
    assert 'anchorage_cost_usd_total{entry="entry-m",model="known-model"} 0.25' in text
    assert 'anchorage_obligations_checked_total{outcome="proved",task="task-m"} 3.0' in text
    assert 'anchorage_trial_duration_seconds_count{entry="entry-m",phase="Succeeded",task="task-m"} 1.0' in text
