"""Prometheus collectors of Anchorage, and a small ``serve(port)`` helper.

Used by the gateway (requests, retries, latency, tokens, cost), the local engine and the operator
(trials, durations, scores, gates, obligations). Conventions (DESIGN.md): names start with
``anchorage_``, base units (seconds, USD), counters end in ``_total``, and labels are bounded —
campaign, entry, task, model, profile, phase, reason, endpoint, status code — never a trial or pod id.
Model names an agent sends are not trusted as labels: callers pass them through
:func:`model_label` (unknown names become ``other``); campaign names go through :func:`campaign_label`
(at most :data:`MAX_CAMPAIGNS` live ones per process; :func:`forget_campaign` removes a deleted
campaign's series and frees its place).

Both drivers count the same things: a trial's end (:func:`trial_finished`), its scorer's gates and
obligations (:func:`score_checked`: the scorer reports, the driver counts) and the mean over the seeds
scored so far of each (campaign, entry, task) under the profile that scored them (:class:`SeedMeans`).

All collectors live in the default registry, so one ``/metrics`` shows them all.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from anchorage.trials.phases import Phase

if TYPE_CHECKING:  # annotations only: the gateway, which reports here too, does not load the scorer
    from anchorage.scoring.records import ScoreRecord

OTHER = "other"
#: Campaign label of a trial run on its own (a lone Trial, not part of a VerificationCampaign).
LONE = "none"

TRIALS = Gauge(
    "anchorage_trials", "Trials currently in each phase.", ["campaign", "entry", "phase"]
)
TRIALS_FINISHED = Counter(
    "anchorage_trials_finished_total", "Trials that reached a terminal phase.",
    ["campaign", "entry", "task", "phase", "reason"],
)
TRIAL_DURATION = Histogram(
    "anchorage_trial_duration_seconds", "Wall time of a trial from start to terminal phase.",
    ["campaign", "entry", "task", "phase"],
    buckets=(10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800),
)
O_EVAL = Gauge("anchorage_o_eval", "O-Eval of an entry on a task: the mean over the seeds scored so far, under the "
               "scoring profile (name@version) that scored them.", ["campaign", "entry", "task", "profile"])
BO_EVAL = Gauge("anchorage_bo_eval", "Robust BO-Eval of an entry on a task: the mean over the seeds scored so far, "
                "under the scoring profile (name@version) that scored them.", ["campaign", "entry", "task", "profile"])
SEEDS_SCORED = Gauge("anchorage_seeds_scored", "Seeds behind anchorage_o_eval / anchorage_bo_eval (the mean's count).",
                     ["campaign", "entry", "task", "profile"])
TOKENS = Counter(
    "anchorage_tokens_total", "Model tokens by kind (input, cached_input, output, reasoning).",
    ["campaign", "entry", "model", "kind"],
)
COST = Counter("anchorage_cost_usd_total", "Model spend in USD from the price snapshot.", ["campaign", "entry", "model"])
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
    "(their trial's cost is unknown).", ["campaign", "entry", "model"],
)
GATEWAY_REFUSALS = Counter(
    "anchorage_gateway_refusals_total", "Connections and requests refused by the gateway: its front door (auth, "
    "another trial's token, head and body deadlines and sizes, connection and in-flight byte caps) and its handlers "
    "(rate, budget, websocket upgrades).", ["reason"]
)
OPERATOR_WATCH_RESTARTS = Counter(
    "anchorage_operator_watch_restarts_total", "The operator's watches of its Jobs and ScoringRuns resumed other than "
    "at their normal end, by collection and cause (error, unexpected, silence, short_end, gone).", ["kind", "cause"])
GATEWAY_CONNECTIONS = Gauge("anchorage_gateway_connections", "Open connections to the gateway's model API.")
GATEWAY_INFLIGHT_BYTES = Gauge("anchorage_gateway_inflight_bytes",
                               "Bytes of request bodies the gateway's model API holds now (read, not yet answered).")

GATES = Counter(
    "anchorage_gates_checked_total", "Invariant gate results of scored trials, by status (passed, failed, missing).",
    ["campaign", "task", "status"],
)
GATE_FAILURES = Counter(
    "anchorage_gate_failures_total", "Invariant gate results that failed, by severity (hard: the task's score is "
    "penalised; warning).", ["campaign", "task", "severity"]
)
OBLIGATIONS = Counter(
    "anchorage_obligations_checked_total", "Proof obligations of scored trials, by outcome (proved, unconfirmed: "
    "proved by the exact checker but not by Lean, failed, missing: no evidence).", ["campaign", "task", "outcome"]
)
# Admission by the cluster's batch queue (Kueue: anchorage.controller.queueing). ``queue`` is a LocalQueue's name
# (an administrator's object: a handful per cluster).
QUEUE_WAIT = Histogram(
    "anchorage_queue_wait_seconds", "Time a trial attempt waited for admission by its Kueue LocalQueue (its Job "
    "suspended, no pod, no agent time), observed at admission; _sum by campaign is a campaign's time queued.",
    ["campaign", "queue"], buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400))
QUEUE_WORKLOADS = Gauge(
    "anchorage_queue_workloads", "The operator's Kueue workloads (trial Jobs) by LocalQueue and state: pending "
    "(waiting for quota) or admitted.", ["queue", "state"])
PREEMPTIONS = Counter(
    "anchorage_preemptions_total", "Trial attempts whose admission Kueue took back (their workload evicted, e.g. "
    "preempted by a higher priority): each ended InfrastructureFailed/preempted and was retried per "
    "retries.infrastructure.", ["campaign", "queue"])
#: The metrics only the Kubernetes operator exports (its own watches; Kueue's admission of its trial Jobs): the local
#: engine never has them, so a dashboard panel of these stays empty on a local run.
OPERATOR_ONLY: frozenset[str] = frozenset(
    name for collector in (OPERATOR_WATCH_RESTARTS, QUEUE_WAIT, QUEUE_WORKLOADS, PREEMPTIONS)
    for name in (collector._name, f"{collector._name}_total", f"{collector._name}_sum", f"{collector._name}_count",
                 f"{collector._name}_bucket"))
#: Every collector labelled by campaign (what :func:`forget_campaign` clears).
CAMPAIGN_COLLECTORS: tuple[Any, ...] = (TRIALS, TRIALS_FINISHED, TRIAL_DURATION, O_EVAL, BO_EVAL, SEEDS_SCORED, TOKENS,
                                        COST, UNMETERED, GATES, GATE_FAILURES, OBLIGATIONS, QUEUE_WAIT, PREEMPTIONS)

_known_models: set[str] = set()
_known_lock = threading.Lock()

#: Campaign label values one process keeps at once; a further campaign is counted as ``other`` until
#: :func:`forget_campaign` frees a place (campaign names come from the cluster's users or a signed gateway
#: token, never from an agent, but a long-lived gateway must not grow a series per campaign forever).
MAX_CAMPAIGNS = 500
_campaigns: set[str] = set()


def allow_models(models: Iterable[str]) -> None:
    """Declare model names that may appear as label values (e.g. the price snapshot's)."""
    with _known_lock:
        _known_models.update(models)


def model_label(model: str | None) -> str:
    """``model`` when declared with :func:`allow_models`, else ``other`` (bounded cardinality)."""
    return model if model is not None and model in _known_models else OTHER


def campaign_label(campaign: str | None) -> str:
    """``campaign`` as a label value: ``none`` for a lone trial, ``other`` past :data:`MAX_CAMPAIGNS` live ones."""
    if not campaign:
        return LONE
    if campaign in _campaigns:
        return campaign
    with _known_lock:
        if len(_campaigns) >= MAX_CAMPAIGNS:
            return OTHER
        _campaigns.add(campaign)
    return campaign


_children: dict[tuple[int, tuple[str, ...]], Any] = {}


def child(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, made once (the gateway counts every request: ``labels`` takes a lock and
    builds its key each time). Label values are bounded (module docstring), so the cache is too."""
    key = (id(metric), labels)
    found = _children.get(key)
    if found is None:
        found = _children[key] = metric.labels(*labels)
    return found


def record_tokens(campaign: str | None, entry: str | None, model: str | None, *, input_tokens: int,
                  cached_input_tokens: int, output_tokens: int, reasoning_tokens: int, cost_usd: float | None) -> None:
    """Count one response's tokens and cost for a campaign, entry and model."""
    labels = (campaign_label(campaign), entry or "unknown", model_label(model))
    for kind, value in (("input", input_tokens), ("cached_input", cached_input_tokens),
                        ("output", output_tokens), ("reasoning", reasoning_tokens)):
        if value:
            child(TOKENS, *labels, kind).inc(value)
    if cost_usd:
        child(COST, *labels).inc(cost_usd)


def unmetered(campaign: str | None, entry: str | None, model: str | None) -> None:
    """Count a model request whose usage the upstream did not report (its trial's cost is unknown)."""
    child(UNMETERED, campaign_label(campaign), entry or "unknown", model_label(model)).inc()


def trial_finished(campaign: str, entry: str, task: str, phase: str, reason: str,
                   duration_seconds: float | None) -> None:
    """Count a trial that reached a terminal phase and observe its duration."""
    campaign = campaign_label(campaign)
    TRIALS_FINISHED.labels(campaign, entry, task, phase, reason).inc()
    if duration_seconds is not None:
        TRIAL_DURATION.labels(campaign, entry, task, phase).observe(duration_seconds)


def set_trial_counts(campaign: str, counts: dict[tuple[str, str], int]) -> None:
    """Set the ``anchorage_trials`` gauge from ``{(entry, phase): count}`` for a campaign."""
    campaign = campaign_label(campaign)
    for (entry, phase), count in counts.items():
        TRIALS.labels(campaign, entry, phase).set(count)


def profile_label(profile: str | None) -> str:
    """The scoring profile's name as a label (``paper@1`` → ``paper``; the default profile when unnamed)."""
    from anchorage.scoring.profiles import DEFAULT_PROFILE  # lazily: the gateway never labels a profile

    return (profile or DEFAULT_PROFILE).split("@", 1)[0]


class SeedMeans:
    """The per-(campaign, entry, task, profile) mean over seeds behind ``anchorage_o_eval`` / ``anchorage_bo_eval``.

    Each trial is counted once (:meth:`add` keyed by the trial's name: a replayed event does not weigh twice);
    unscored trials are never added (unknown is not zero). One instance per driver process.
    """

    def __init__(self) -> None:
        self._scores: dict[tuple[str, str, str, str], dict[str, tuple[float, float | None]]] = {}
        self._lock = threading.Lock()

    def add(self, campaign: str, entry: str, task: str, profile: str | None, trial: str,
            o_eval: float | None, bo_eval: float | None) -> None:
        """Trial ``trial`` scored ``o_eval`` / ``bo_eval``: publish the new means (``o_eval`` None: unscored)."""
        if o_eval is None:
            return
        key = (campaign_label(campaign), entry, task, profile_label(profile))
        with self._lock:
            seeds = self._scores.setdefault(key, {})
            seeds[trial] = (float(o_eval), None if bo_eval is None else float(bo_eval))
            o_values = [o for o, _ in seeds.values()]
            bo_values = [b for _, b in seeds.values() if b is not None]
            O_EVAL.labels(*key).set(sum(o_values) / len(o_values))
            SEEDS_SCORED.labels(*key).set(len(o_values))
            if bo_values:
                BO_EVAL.labels(*key).set(sum(bo_values) / len(bo_values))

    def forget(self, campaign: str) -> None:
        with self._lock:
            for key in [k for k in self._scores if k[0] == campaign]:
                del self._scores[key]


#: The means of this process (the local engine's run command and the operator each feed it).
SEED_MEANS = SeedMeans()


def set_scores(campaign: str, entry: str, task: str, *, o_eval: float | None, bo_eval: float | None,
               profile: str | None = None, seeds: int | None = None) -> None:
    """Publish per-task scores already averaged over seeds (None leaves a gauge unset: unscored)."""
    key = (campaign_label(campaign), entry, task, profile_label(profile))
    if o_eval is not None:
        O_EVAL.labels(*key).set(o_eval)
    if bo_eval is not None:
        BO_EVAL.labels(*key).set(bo_eval)
    if seeds is not None:
        SEEDS_SCORED.labels(*key).set(seeds)


def board_scores(campaign: str, board: Any) -> None:
    """A finished campaign's leaderboard (``anchorage.campaigns.aggregation.Leaderboard``) replaces the running means:
    its per-task cells are the means over every scored seed, with the campaign's Robust BO-Eval (F from its
    baseline entry) — what the report shows. Both drivers call it when they write the board."""
    for task, cells in board.per_task.items():
        for entry, cell in cells.items():
            set_scores(campaign, entry, task, o_eval=cell.o_eval, bo_eval=cell.bo_eval, profile=board.profile,
                       seeds=cell.seeds)


#: Outcome keys of a score record's ``obligations{}`` counted by :func:`score_checked`.
OBLIGATION_OUTCOMES = ("proved", "unconfirmed", "failed", "missing")


def score_checked(campaign: str | None, task: str, score: ScoreRecord) -> None:
    """Count a scorer record's gates (``gates[]``: every result by status, failures by severity) and
    obligations (``obligations{}``: counts by outcome). Called by each driver once per scored trial."""
    campaign = campaign_label(campaign)
    for gate in score.gates:
        GATES.labels(campaign, task, gate.status).inc()
        if gate.status == "failed":
            GATE_FAILURES.labels(campaign, task, gate.severity).inc()
    for outcome in OBLIGATION_OUTCOMES:
        count = score.obligations.get(outcome)
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            OBLIGATIONS.labels(campaign, task, outcome).inc(count)


def gates_checked(campaign: str | None, task: str, severities: Iterable[str]) -> None:
    """Count failed gate results by severity (``hard`` / ``warning``)."""
    for severity in severities:
        GATE_FAILURES.labels(campaign_label(campaign), task, severity).inc()


def obligations_checked(campaign: str | None, task: str, outcome: str, count: int = 1) -> None:
    """Count proof obligations by outcome (``proved``, ``unconfirmed``, ``failed``, ``missing``)."""
    OBLIGATIONS.labels(campaign_label(campaign), task, outcome).inc(count)


def forget_campaign(campaign: str) -> int:
    """Remove every series of ``campaign`` (it was deleted: a running one must not look stalled) and free its
    place among the :data:`MAX_CAMPAIGNS`; returns how many series went."""
    removed = 0
    for collector in CAMPAIGN_COLLECTORS:
        position = collector._labelnames.index("campaign")
        for values in [v for v in list(collector._metrics) if v[position] == campaign]:
            collector.remove(*values)
            removed += 1
    for key in [k for k in _children if campaign in k[1]]:
        del _children[key]
    SEED_MEANS.forget(campaign)
    with _known_lock:
        _campaigns.discard(campaign)
    return removed


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

#: Trial phases the ``anchorage_trials`` gauge reports for every entry (absent ones are set to 0).
PHASES = tuple(str(phase) for phase in Phase)
_CAMPAIGN_LABEL = "anchorage.dev/campaign"  # anchorage.runtime.kube.jobs.LABEL_CAMPAIGN


def trial_labels(trial: Mapping[str, Any]) -> tuple[str, str, str]:
    """(campaign, entry, task) labels of a Trial custom resource — never its name.

    A lone Trial's campaign is ``none`` and its entry, when ``spec.entry`` is unset, its agent kind.
    """
    meta, spec = trial.get("metadata") or {}, trial.get("spec") or {}
    campaign = (meta.get("labels") or {}).get(_CAMPAIGN_LABEL) or LONE
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


def operator_trial_scored(trial: Mapping[str, Any], o_eval: float | None, bo_eval: float | None,
                          profile: str | None = None) -> None:
    """A Trial resource got its scores: the means over the seeds of its (campaign, entry, task) now count it."""
    campaign, entry, task = trial_labels(trial)
    name = str((trial.get("metadata") or {}).get("name") or "")
    SEED_MEANS.add(campaign, entry, task, profile, name, o_eval, bo_eval)


def operator_score_checked(trial: Mapping[str, Any], score: ScoreRecord) -> None:
    """A Trial's scorer record arrived: count its gates and obligations (:func:`score_checked`)."""
    campaign, _, task = trial_labels(trial)
    score_checked(campaign, task, score)


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


def operator_trial_admitted(trial: Mapping[str, Any], queue: str, waited_sec: float) -> None:
    """A queued trial attempt was admitted by its LocalQueue ``queue`` after ``waited_sec`` seconds."""
    campaign, _, _ = trial_labels(trial)
    QUEUE_WAIT.labels(campaign_label(campaign if campaign != LONE else None), queue).observe(max(0.0, waited_sec))


def operator_trial_preempted(trial: Mapping[str, Any], queue: str) -> None:
    """Kueue took a running trial attempt's admission back (:data:`PREEMPTIONS`)."""
    campaign, _, _ = trial_labels(trial)
    PREEMPTIONS.labels(campaign_label(campaign if campaign != LONE else None), queue).inc()


def queue_workloads(counts: Mapping[tuple[str, str], int]) -> None:
    """Set :data:`QUEUE_WORKLOADS` from ``{(queue, state): count}``; a (queue, state) seen before and absent now is 0."""
    for labels in list(QUEUE_WORKLOADS._metrics):
        if labels not in counts:
            QUEUE_WORKLOADS.labels(*labels).set(0)
    for (queue, state), count in counts.items():
        QUEUE_WORKLOADS.labels(queue, state).set(count)
