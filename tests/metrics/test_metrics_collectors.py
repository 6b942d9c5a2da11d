"""Collector names and labels follow DESIGN.md; serve() exposes them; model and campaign labels stay bounded;
the scorer's gates and obligations are counted from its record."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client import REGISTRY

from anchorage import metrics
from score_records import gate, score_record

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


def test_cost_tokens_and_scores_carry_the_campaign_and_scores_the_profile() -> None:
    for collector in (metrics.TOKENS, metrics.COST, metrics.UNMETERED, metrics.GATE_FAILURES, metrics.OBLIGATIONS):
        assert "campaign" in collector._labelnames, collector
    for collector in (metrics.O_EVAL, metrics.BO_EVAL, metrics.SEEDS_SCORED):
        assert {"campaign", "profile"} <= set(collector._labelnames), collector
    assert set(metrics.CAMPAIGN_COLLECTORS) == {c for c in vars(metrics).values()
                                                if "campaign" in getattr(c, "_labelnames", ())}


def test_unknown_models_become_other() -> None:
    metrics.allow_models(["known-model"])
    assert metrics.model_label("known-model") == "known-model"
    assert metrics.model_label("random-agent-supplied-name-123") == metrics.OTHER
    assert metrics.model_label(None) == metrics.OTHER


def test_campaign_labels_are_bounded_and_forgetting_frees_a_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "MAX_CAMPAIGNS", len(metrics._campaigns) + 1)
    assert metrics.campaign_label("bounded-1") == "bounded-1"
    assert metrics.campaign_label("bounded-2") == metrics.OTHER
    assert metrics.campaign_label(None) == metrics.LONE
    metrics.forget_campaign("bounded-1")
    assert metrics.campaign_label("bounded-2") == "bounded-2"
    metrics.forget_campaign("bounded-2")


def test_score_checked_counts_gates_by_status_failures_by_severity_and_obligations_by_outcome() -> None:
    score = score_record(gates=[gate("a", "passed"), gate("b", "failed"), gate("c", "failed", "warning"),
                                gate("d", "missing", "warning")],
                         obligations={"total": 6, "proved": 3, "unconfirmed": 0, "failed": 2, "missing": 1,
                                      "checker": "python"})
    metrics.score_checked("camp-g", "task-g", score)

    def value(name: str, **labels: str) -> float | None:
        return REGISTRY.get_sample_value(name, {"campaign": "camp-g", "task": "task-g", **labels})

    assert [value("anchorage_gates_checked_total", status=s) for s in ("passed", "failed", "missing")] == [1, 2, 1]
    assert value("anchorage_gate_failures_total", severity="hard") == 1
    assert value("anchorage_gate_failures_total", severity="warning") == 1
    assert [value("anchorage_obligations_checked_total", outcome=o) for o in ("proved", "failed", "missing")] == [3, 2, 1]
    assert value("anchorage_obligations_checked_total", outcome="unconfirmed") is None  # zero counts add no series


def test_helpers_update_collectors_and_serve_exposes_them() -> None:
    metrics.allow_models(["known-model"])  # declared here: the test that declares it may run on another worker
    metrics.trial_finished("camp-m", "entry-m", "task-m", "Succeeded", "completed", 42.0)
    metrics.set_scores("camp-m", "entry-m", "task-m", o_eval=0.75, bo_eval=None, profile="paper@1")
    metrics.record_tokens("camp-m", "entry-m", "known-model", input_tokens=10, cached_input_tokens=0, output_tokens=5,
                          reasoning_tokens=0, cost_usd=0.25)
    metrics.gates_checked("camp-m", "task-m", ["hard", "warning"])
    metrics.obligations_checked("camp-m", "task-m", "proved", 3)
    server = metrics.serve(0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as response:
            text = response.read().decode()
    finally:
        server.stop()
    assert 'anchorage_o_eval{campaign="camp-m",entry="entry-m",profile="paper",task="task-m"} 0.75' in text
    assert 'anchorage_bo_eval{campaign="camp-m"' not in text  # unscored stays unset, not 0
    assert 'anchorage_cost_usd_total{campaign="camp-m",entry="entry-m",model="known-model"} 0.25' in text
    assert 'anchorage_obligations_checked_total{campaign="camp-m",outcome="proved",task="task-m"} 3.0' in text
    assert ('anchorage_trial_duration_seconds_count{campaign="camp-m",entry="entry-m",phase="Succeeded",task="task-m"} 1.0'
            in text)


def test_a_finished_board_replaces_the_running_means() -> None:
    """The board's cells (every seed, the campaign's Robust BO-Eval) win over the means of the trials seen so far."""
    from anchorage.campaigns.aggregation import Cell

    metrics.SEED_MEANS.add("camp-b", "e", "t", "paper@1", "camp-b-e-t-s0", 1.0, 0.2)
    board = type("Board", (), {"per_task": {"t": {"e": Cell(0.5, -0.25, 2)}}, "profile": "paper@1"})()
    metrics.board_scores("camp-b", board)
    labels = {"campaign": "camp-b", "entry": "e", "task": "t", "profile": "paper"}
    assert REGISTRY.get_sample_value("anchorage_o_eval", labels) == 0.5
    assert REGISTRY.get_sample_value("anchorage_bo_eval", labels) == -0.25
    assert REGISTRY.get_sample_value("anchorage_seeds_scored", labels) == 2
    metrics.forget_campaign("camp-b")
