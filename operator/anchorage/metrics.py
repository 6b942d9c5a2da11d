"""Prometheus collectors of Anchorage, and a small ``serve(port)`` helper.

Used by the gateway (requests, retries, latency, tokens, cost), the local engine and the operator
(trials, durations, scores, gates, obligations). Conventions (DESIGN.md): names start with
``anchorage_``, base units (seconds, USD), counters end in ``_total``, and labels are bounded —
campaign, entry, task, model, phase, reason, endpoint, status code — never a trial or pod id.
Model names an agent sends are not trusted as labels: callers pass them through
:func:`model_label` (unknown names become ``other``).

All collectors live in the default registry, so one ``/metrics`` shows them all.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from anchorage.trials.phases import Phase

OTHER = "other"

TRIALS = Gauge(
    "anchorage_trials", "Trials currently in each phase.", ["campaign", "entry", "phase"]
)
TRIALS_FINISHED = Counter(
    "anchorage_trials_finished_total", "Trials that reached a terminal phase.",
    ["campaign", "entry", "task", "phase", "reason"],
)
TRIAL_DURATION = Histogram(
    "anchorage_trial_duration_seconds", "Wall time of a trial from start to terminal phase.",
    ["entry", "task", "phase"],
    buckets=(10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800),
)
O_EVAL = Gauge("anchorage_o_eval", "Latest O-Eval score (mean over seeds) under the scoring profile named by "
               "the profile label.", ["campaign", "entry", "task", "profile"])
BO_EVAL = Gauge("anchorage_bo_eval", "Latest BO-Eval score (mean over seeds) under the scoring profile named by "
                "the profile label.", ["campaign", "entry", "task", "profile"])
TOKENS = Counter(
    "anchorage_tokens_total", "Model tokens by kind (input, cached_input, output, reasoning).",
    ["entry", "model", "kind"],
)
COST = Counter("anchorage_cost_usd_total", "Model spend in USD from the price snapshot.", ["entry", "model"])
GATEWAY_REQUESTS = Counter(
    "anchorage_gateway_requests_total", "Requests answered by the gateway, by final status code.",
    ["endpoint", "model", "code"],
)
GATEWAY_RETRIES = Counter(
    "anchorage_gateway_retries_total", "Upstream attempts the gateway retried, by cause.",
    ["model", "cause"],
)
GATEWAY_LATENCY = Histogram(
    "anchorage_gateway_request_duration_seconds",
    "Time from receiving a request to the end of its response (streams: the last byte).",
    ["endpoint", "model"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
UNMETERED = Counter(
    "anchorage_unmetered_requests_total", "Model requests the upstream answered without reporting usage "
    "(their trial's cost is unknown).", ["entry", "model"],
)
GATEWAY_REFUSALS = Counter(
    "anchorage_gateway_refusals_total", "Requests refused by the gateway (auth, rate, budget).", ["reason"]
)
GATE_FAILURES = Counter(
    "anchorage_gate_failures_total", "Invariant gate results that failed.", ["task", "severity"]
)
OBLIGATIONS = Counter(
    "anchorage_obligations_checked_total", "Proof obligations checked, by outcome.", ["task", "outcome"]
)

_known_models: set[str] = set()
_known_lock = threading.Lock()


def allow_models(models: Iterable[str]) -> None:
    """Declare model names that may appear as label values (e.g. the price snapshot's)."""
    with _known_lock:
        _known_models.update(models)


def model_label(model: str | None) -> str:
    """``model`` when declared with :func:`allow_models`, else ``other`` (bounded cardinality)."""
    return model if model is not None and model in _known_models else OTHER


_children: dict[tuple[int, tuple[str, ...]], Any] = {}


def child(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, made once (the gateway counts every request: ``labels`` takes a lock and
    builds its key each time). Label values are bounded (module docstring), so the cache is too."""
    key = (id(metric), labels)
    found = _children.get(key)
    if found is None:
        found = _children[key] = metric.labels(*labels)
    return found


def record_tokens(entry: str | None, model: str | None, *, input_tokens: int, cached_input_tokens: int,
                  output_tokens: int, reasoning_tokens: int, cost_usd: float | None) -> None:
    """Count one response's tokens and cost for an entry and model."""
    labels = (entry or "unknown", model_label(model))
    for kind, value in (("input", input_tokens), ("cached_input", cached_input_tokens),
                        ("output", output_tokens), ("reasoning", reasoning_tokens)):
        if value:
            child(TOKENS, *labels, kind).inc(value)
    if cost_usd:
        child(COST, *labels).inc(cost_usd)


def trial_finished(campaign: str, entry: str, task: str, phase: str, reason: str,
                   duration_seconds: float | None) -> None:
    """Count a trial that reached a terminal phase and observe its duration."""
    TRIALS_FINISHED.labels(campaign, entry, task, phase, reason).inc()
    if duration_seconds is not None:
        TRIAL_DURATION.labels(entry, task, phase).observe(duration_seconds)


def set_trial_counts(campaign: str, counts: dict[tuple[str, str], int]) -> None:
    """Set the ``anchorage_trials`` gauge from ``{(entry, phase): count}`` for a campaign."""
    for (entry, phase), count in counts.items():
        TRIALS.labels(campaign, entry, phase).set(count)


def set_scores(campaign: str, entry: str, task: str, *, o_eval: float | None, bo_eval: float | None,
               profile: str = "paper") -> None:
    """Publish the latest per-task scores of an entry under ``profile`` (None leaves a gauge unset: unscored)."""
    if o_eval is not None:
        O_EVAL.labels(campaign, entry, task, profile).set(o_eval)
    if bo_eval is not None:
        BO_EVAL.labels(campaign, entry, task, profile).set(bo_eval)


def gates_checked(task: str, failures: Iterable[str]) -> None:
    """Count failed gate results by severity (``error`` / ``warning``)."""
    for severity in failures:
        GATE_FAILURES.labels(task, severity).inc()


def obligations_checked(task: str, outcome: str, count: int = 1) -> None:
    """Count proof obligations by outcome (``proved``, ``refuted``, ``error``, ``skipped``)."""
    OBLIGATIONS.labels(task, outcome).inc(count)


class MetricsServer:
    """A running ``/metrics`` endpoint (``port`` is the bound port, also when 0 was asked)."""

    def __init__(self, port: int, addr: str, registry: CollectorRegistry) -> None:
        self._server, self._thread = start_http_server(port, addr=addr, registry=registry)
        self.port = int(self._server.server_address[1])

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def serve(port: int, addr: str = "127.0.0.1", registry: CollectorRegistry = REGISTRY) -> MetricsServer:
    """Serve ``/metrics`` on ``addr:port`` (0 picks a port) from a background thread."""
    return MetricsServer(port, addr, registry)


# --- Operator helpers (called by ``anchorage.controller``; one call per handler) ----------------------

#: Campaign label of a Trial created on its own (not by a VerificationCampaign).
LONE = "none"
#: Trial phases the ``anchorage_trials`` gauge reports for every entry (absent ones are set to 0).
PHASES = tuple(str(phase) for phase in Phase)
_CAMPAIGN_LABEL = "anchorage.dev/campaign"  # anchorage.runtime.kubejobs.LABEL_CAMPAIGN


def trial_labels(trial: Mapping[str, Any]) -> tuple[str, str, str]:
    """(campaign, entry, task) labels of a Trial custom resource — never its name.

    A lone Trial's campaign is ``none`` and its entry, when ``spec.entry`` is unset, its agent kind.
    """
    meta, spec = trial.get("metadata") or {}, trial.get("spec") or {}
    campaign = (meta.get("annotations") or {}).get(_CAMPAIGN_LABEL) or (meta.get("labels") or {}).get(
        _CAMPAIGN_LABEL) or LONE
    entry = spec.get("entry") or (spec.get("agent") or {}).get("kind") or "unknown"
    return str(campaign), str(entry), str(spec.get("task") or "unknown")


def _seconds_since(rfc3339: str | None, now: datetime | None) -> float | None:
    if not rfc3339:
        return None
    try:
        start = datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, ((now or datetime.now(UTC)) - start).total_seconds())


def operator_trial_finished(trial: Mapping[str, Any], phase: str, reason: str, now: datetime | None = None) -> None:
    """A Trial resource reached a terminal phase: count it, with its duration since ``status.startTime``."""
    campaign, entry, task = trial_labels(trial)
    started = (trial.get("status") or {}).get("startTime")
    trial_finished(campaign, entry, task, phase, reason, _seconds_since(started, now))


def operator_trial_scored(trial: Mapping[str, Any], o_eval: float | None, bo_eval: float | None) -> None:
    """A Trial resource got its scores: publish them as the latest of its (campaign, entry, task, profile)."""
    campaign, entry, task = trial_labels(trial)
    profile = str(((trial.get("spec") or {}).get("scoring") or {}).get("profile") or "paper")
    set_scores(campaign, entry, task, o_eval=o_eval, bo_eval=bo_eval, profile=profile)


def campaign_trial_counts(campaign: str, entries: Mapping[str, str], phases: Mapping[str, str | None]) -> None:
    """Set a campaign's ``anchorage_trials`` gauge from ``{trial: entry}`` and ``{trial: phase}``.

    ``entries`` lists the campaign's planned trials; one not created yet, or without a phase yet,
    counts as ``Pending``. Every phase of :data:`PHASES` is set for each entry (0 when none), so a
    trial moving on leaves no stale count behind.
    """
    counts = {(entry, phase): 0 for entry in set(entries.values()) for phase in PHASES}
    for trial, entry in entries.items():
        key = (entry, phases.get(trial) or "Pending")
        counts[key] = counts.get(key, 0) + 1
    set_trial_counts(campaign, counts)
