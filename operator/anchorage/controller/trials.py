"""Trial handlers: launch the Job of each attempt; when it ends, score it through a ScoringRun (or retry).

Registered by importing ``anchorage.controller``. Thin: Kubernetes evidence in (the Job's end, its pod's container
statuses and the upload sidecar's marker — :mod:`anchorage.controller.evidence` —, the ScoringRun's end), the
lifecycle core (:mod:`anchorage.trials`: ``plan_agent``, ``classify``, ``should_retry``, ``with_score``,
``TrialRecord``) in the middle, typed status out (:class:`anchorage.runtime.kubestatus.TrialStatus`). A Trial runs
once; only an infrastructure failure is retried, and only ``spec.retries`` times (each attempt is a new Job
``<trial>-a<N>``). Names are deterministic, so a restarted operator that re-handles a Trial finds its Job instead
of making a second one.

The Trial owns its status — no other object's handler writes it. Two status writes per trial:
``Running`` (attempt, Job name) before its Job is created, and the final one, when its ScoringRun has
ended (:func:`run_ended`). In between, the attempt's record (the agent's outcome, the evidence, the
cost) waits in the trial's own folder in the store (``attempt.json``), not in the cluster. Trials are
driven by watch events (``kopf.on.event``): kopf then keeps no diff-base or progress annotation on
them (one write less per object); what kopf's create/resume handlers did — retry a failed launch,
repair after a restart — is done by :func:`repair`, called for listed objects at startup, by the
campaign's sweep and by the lone trials' :class:`Watchdog` (no kopf timer: see there).
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import functools
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from anchorage import agents, metrics
from anchorage import trials as trials_core
from anchorage.campaigns.names import child_name, scoring_run_name
from anchorage.controller import enforcement, finalizers, gatewaying, kube, kueue, podevidence, policies
from anchorage.controller.addressing import GatewayAddressError, gateway_address
from anchorage.controller.evidence import attempt_end
from anchorage.controller.settings import config, store
from anchorage.errors import AnchorageError
from anchorage.manifests import API_GROUP, API_VERSION, TrialSpec
from anchorage.runtime import kubejobs
from anchorage.runtime.kubeconditions import carry, lifecycle, state_of
from anchorage.runtime.kubestatus import Condition, TrialStatus, Usage, now_rfc3339
from anchorage.tasks import Task, load_task, resolve_task
from anchorage.trials import AgentPlan, AttemptEnd, Phase, Reason, TrialRecord, classify, plan_agent, should_retry
from anchorage.trials.admission import admit
from anchorage.trials.agents import OPERATOR
from anchorage.trials.agents.plans import replayed_message
from anchorage.trials.costing import protocol_cost, trial_cost
from anchorage.trials.pipeline import PROTOCOL_SUMMARY, protocol_steps, summary
from anchorage.trials.records import (
    TRANSCRIPT,
    AgentInfo,
    AttemptInfo,
    LimitsInfo,
    PromptInfo,
    ReplayInfo,
    SandboxInfo,
    TranscriptInfo,
    entry_name,
    now,
)

TERMINAL = tuple(str(p) for p in trials_core.TERMINAL)
#: The attempt's record at the agent's end, in the trial's folder, until its scores come.
ATTEMPT_RECORD = "attempt.json"
#: The sandbox mechanism a cluster trial's record names.
MECHANISM = "kubernetes-pod"


def job_name(trial: str, attempt: int) -> str:
    """The Job of attempt ``attempt`` of ``trial`` (a DNS label: ≤ 63 characters)."""
    return child_name(trial, f"a{attempt}")


def condition(type_: str, status: str, reason: str, message: str = "", generation: int | None = None) -> dict[str, Any]:
    """A metav1.Condition as a dict."""
    return Condition(type=type_, status=status, reason=reason, message=message,
                     observed_generation=generation, last_transition_time=now_rfc3339()
                     ).model_dump(by_alias=True, exclude_none=True)


@functools.lru_cache(maxsize=256)
def _task_cached(task_name: str) -> tuple[Task, dict[str, float]]:
    task = load_task(resolve_task(task_name))
    env = task.config.environment
    defaults = {"cpus": float(env.cpus), "memory_mb": float(env.memory_mb), "storage_mb": float(env.storage_mb),
                "gpus": float(env.gpus), "agent_timeout_sec": float(task.config.agent.timeout_sec)}
    return task, defaults


def _task_inputs(spec: TrialSpec) -> tuple[AgentPlan, dict[str, float]]:
    """The agent's plan (the lifecycle core's, as the local engine's) and the task.toml limits (tasks are
    loaded once per task by this process)."""
    task, defaults = _task_cached(spec.task)
    return plan_agent(spec.agent, task, spec.seed), defaults


@functools.lru_cache(maxsize=64)
def _spec(raw: str) -> TrialSpec:
    return TrialSpec.model_validate_json(raw)


def trial_spec(trial: Mapping[str, Any]) -> TrialSpec:
    """The Trial's spec as the model (validated once per distinct spec: a campaign's trials share few)."""
    return _spec(json.dumps(trial["spec"], sort_keys=True))


def _launch(body: Mapping[str, Any], spec: TrialSpec, attempt: int) -> None:
    """Record the attempt as Running, then create its Job (the Job's events then find it Running).

    A crash between the two is repaired by :func:`repair`, which re-creates a missing Job.
    """
    if finalizers.leaving(body):
        return  # deleted meanwhile: its finalizer's handler stops what runs (trial_event)
    meta = body["metadata"]
    campaign = kubejobs.named(meta, kubejobs.LABEL_CAMPAIGN)
    admit(spec.agent, spec.verification, OPERATOR)
    gatewaying.check(spec)  # a model-calling trial needs a token: refuse before anything is written
    body = finalizers.hold_trial(body)  # before its first Job: a deletion then stops it (a lone trial: one write)
    meta = body["metadata"]
    plan, defaults = _task_inputs(spec)
    cfg = config()
    ns = cfg.trials_namespace or meta["namespace"]
    if attempt == 0:  # a trial starts only where its NetworkPolicies are confirmed enforced (else it waits, saying why)
        enforcement.admit(body, ns, cfg)
    job = kubejobs.trial_job(dict(body), spec, plan=plan, task_defaults=defaults, config=cfg,
                             job_name=job_name(meta["name"], attempt), campaign=campaign,
                             gateway_address=_gateway_alias(cfg, plan))
    queue = kubejobs.trial_queue(spec, cfg)
    if queue:  # refused before anything is written when Kueue or the LocalQueue is missing
        kueue.require(queue, job["metadata"]["namespace"])
    if (body.get("status") or {}).get("jobName") != job["metadata"]["name"]:
        prefix = kubejobs.trial_prefix(meta["namespace"], meta["name"], campaign)
        # queued: no pod and no agent time until Kueue admits the Job (controller.queueing then writes Running)
        when = {"queue": queue, "queued_time": now_rfc3339(), "start_time": None} if queue else \
            {"start_time": now_rfc3339()}
        phase, why = (Phase.QUEUED, f"waiting for admission by Kueue LocalQueue {queue}") if queue else \
            (Phase.RUNNING, "the agent is running")
        running = TrialStatus(
            phase=phase, attempt=attempt, job_name=job["metadata"]["name"], **when,
            record_uri=f"{cfg.store_uri.rstrip('/')}/{prefix}", observed_generation=meta.get("generation"),
            conditions=typed([condition("Ready", "False", str(phase), why, meta.get("generation")),
                              *lifecycle("working", str(phase), why, meta.get("generation"))]))
        if not kube.patch_status("trials", meta["namespace"], meta["name"], running.patch(),
                                 resource_version=meta.get("resourceVersion")):
            raise kopf.TemporaryError(f"trial {meta['name']} changed (or is gone) since it was read; not launched",
                                      delay=1)
        if campaign is None:  # a campaign's trials are announced by their campaign (one write less each)
            kube.post_event(dict(body), "Normal", "Queued" if queue else "Started",
                            f"attempt {attempt} {'queued in ' + queue if queue else 'running'} as Job "
                            f"{job['metadata']['name']}")
    policies.ensure(job["metadata"]["namespace"], cfg)
    gatewaying.create_job(job, body, spec)  # the Job, then a model-calling agent's token Secret


def _gateway_alias(cfg: kubejobs.OperatorConfig, plan: AgentPlan) -> str | None:
    """The gateway's address for a trial pod's ``hostAliases`` (its agent has no DNS): required by a model-calling
    agent (no address: the platform's failure before anything runs), given to any other agent when there is one."""
    if plan.replay is not None:
        return None
    try:
        return gateway_address(cfg)
    except GatewayAddressError:
        if plan.needs_gateway:
            raise
        return None


def launch(trial: Mapping[str, Any]) -> None:
    """Start a new trial's first attempt; a trial that cannot start ends InfrastructureFailed."""
    meta, status = trial["metadata"], trial.get("status") or {}
    try:
        _launch(trial, trial_spec(trial), int(status.get("attempt") or 0))
    except (ValidationError, AnchorageError) as exc:
        generation = meta.get("generation")
        reason = Reason.GATEWAY_ERROR if isinstance(exc, GatewayAddressError) else Reason.SANDBOX_ERROR
        failed = TrialStatus(phase=Phase.INFRASTRUCTURE_FAILED, reason=reason, message=str(exc),
                             observed_generation=generation,
                             conditions=typed([condition("Ready", "False", "InvalidInput", str(exc)[:1000], generation),
                                               *lifecycle("failed", "InvalidInput", str(exc)[:1000], generation)]))
        kube.patch_status("trials", meta["namespace"], meta["name"], failed.patch())
        kube.post_event(dict(trial), "Warning", "InvalidInput", str(exc))
        metrics.operator_trial_finished(trial, Phase.INFRASTRUCTURE_FAILED, reason)
        raise kopf.PermanentError(f"cannot launch: {exc}") from exc


def repair(trial: Mapping[str, Any]) -> dict[str, Any] | None:
    """Bring an unfinished trial forward from wherever a crash or a lost event left it.

    Not started yet (or its first write failed): launch it. Running: see :func:`check_running`.
    Returns the trial's ScoringRun when the trial waits for it (the caller may check that one).
    """
    phase = (trial.get("status") or {}).get("phase")
    if not phase or phase == enforcement.WAITING:
        launch(trial)
        return None
    if phase == Phase.QUEUED and CHECK_QUEUED:
        CHECK_QUEUED[0](trial)
        return None
    return check_running(trial)


class Once:
    """Keys this process has acted on (the newest ``size``): events repeat, acting twice costs writes."""

    def __init__(self, size: int = 4096) -> None:
        self._seen: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def first(self, key: str) -> bool:
        """True the first time ``key`` is seen (then it counts as seen)."""
        with self._lock:
            if key in self._seen:
                return False
            self._seen[key] = None
            if len(self._seen) > self._size:
                self._seen.popitem(last=False)
            return True

    def forget(self, key: str) -> None:
        """Act on ``key`` again next time (the action failed)."""
        with self._lock:
            self._seen.pop(key, None)


class Latest:
    """The latest watched body of each unfinished object of a kind (the newest ``size``), for the handlers
    that would otherwise GET it: a body the watch delivered is used when it passes the caller's check
    (:meth:`current`), else the object is read from the API. Objects leave when they end, so a campaign
    holds about ``parallelism`` of them (never its 10,000s of finished ones)."""

    def __init__(self, read: Callable[[str, str], dict[str, Any] | None], size: int = 2048) -> None:
        self._read, self._size = read, size
        self._bodies: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def note(self, body: Mapping[str, Any], ended: bool) -> None:
        """An event's body (in kopf's loop): keep it while the object is unfinished, forget it when it ended."""
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        with self._lock:
            if ended:
                self._bodies.pop(key, None)
                return
            self._bodies.pop(key, None)  # re-inserted last: the oldest entry goes first when full
            self._bodies[key] = dict(body)
            if len(self._bodies) > self._size:
                del self._bodies[next(iter(self._bodies))]

    def values(self) -> list[dict[str, Any]]:
        """The held bodies (a copy of the list: the watch changes it meanwhile)."""
        with self._lock:
            return list(self._bodies.values())

    def peek(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The watched body of an unfinished object, if it is held (never read from the API)."""
        with self._lock:
            return self._bodies.get((namespace, name))

    def current(self, namespace: str, name: str, usable: Callable[[Mapping[str, Any]], bool]) -> dict[str, Any] | None:
        """The watched body when ``usable`` accepts it, else the object as ``read`` (the API) has it (None: gone)."""
        with self._lock:
            body = self._bodies.get((namespace, name))
        if body is not None and usable(body):
            return body
        return self._read(namespace, name)


class Watchdog:
    """Every ``interval`` s, check the lone unfinished objects of a kind that had no event for that long.

    The safety net for a launch whose writes failed or a Job event that was lost, which a kopf timer on
    Trials and ScoringRuns used to be — without the timer's cost: kopf keeps the latest body of every
    object of a kind that has a timer (two bodies per campaign trial, most of the operator's memory at
    10,000 trials). Campaign children are swept by their campaign instead (``campaigns.sweep``). Runs
    in kopf's event loop (events report to :meth:`seen`), the checks in the handlers' worker threads;
    ``check(namespace, name)`` says whether the object is still unfinished.
    """

    def __init__(self, what: str, check: Callable[[str, str], bool], interval: float = 10.0) -> None:
        self.what, self.interval, self._check = what, interval, check
        self._due: dict[tuple[str, str], float] = {}
        self._task: asyncio.Task[None] | None = None

    def seen(self, namespace: str, name: str, unfinished: bool) -> None:
        """An event of the object came: check it ``interval`` s from now if it is unfinished, else forget it."""
        if not unfinished:
            self._due.pop((namespace, name), None)
            return
        loop = asyncio.get_running_loop()
        self._due[(namespace, name)] = loop.time() + self.interval
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())

    def note(self, type_: str | None, body: Mapping[str, Any], phase: str | None, final: tuple[str, ...]) -> bool:
        """Whether an event's object has ended (deleted, being deleted, or in a ``final`` phase); lone objects
        (no campaign label: their campaign's sweep covers the others) are passed on to :meth:`seen`."""
        meta = body["metadata"]
        ended = type_ == "DELETED" or bool(meta.get("deletionTimestamp")) or phase in final
        if kubejobs.LABEL_CAMPAIGN not in (meta.get("labels") or {}):
            self.seen(meta["namespace"], meta["name"], unfinished=not ended)
        return ended

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._due:
            await asyncio.sleep(self.interval / 2)
            for key in [k for k, due in self._due.items() if due <= loop.time()]:
                self._due[key] = loop.time() + self.interval
                try:
                    unfinished = await kube.in_thread(self._check, *key)
                except enforcement.Waiting:
                    continue  # said once, in the trial's status and an Event
                except (kopf.PermanentError, kopf.TemporaryError, AnchorageError, ValidationError) as exc:
                    logging.getLogger(__name__).warning(f"checking {self.what} {key[0]}/{key[1]}: {exc}")
                    continue
                if not unfinished:
                    self._due.pop(key, None)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


def _check_lone(namespace: str, name: str) -> bool:
    trial = kube.get_custom("trials", namespace, name)
    if trial is None or (trial.get("status") or {}).get("phase") in TERMINAL:
        return False
    repair(trial)
    return True


#: Lone (campaign-less) trials, checked when their events stop coming; campaign trials are swept.
WATCHDOG = Watchdog("trial", _check_lone)


@kopf.on.cleanup()
async def stop_watchdog(**_: Any) -> None:
    """Stop the lone trials' watchdog with the operator."""
    WATCHDOG.stop()


#: Trials this process launched and trial Jobs whose end it handled.
_LAUNCHED, _ENDED, _PROTOCOLS_ENDED = Once(), Once(), Once()
#: Unfinished Trials as last watched (the Job's end and the scores' publication read them from here).
TRIALS = Latest(lambda namespace, name: kube.get_custom("trials", namespace, name))
#: ``scoring.start_created`` (registered by that module, which imports this one): a run just created by
#: :func:`finish` gets its verifier in the same worker call; the run's own event then finds it started.
START_VERIFIER: list[Callable[[dict[str, Any]], None]] = []
#: ``queueing.check_queued`` (registered by that module, which imports this one): a Queued trial's repair (its Job
#: admitted or gone without the Workload's event seen).
CHECK_QUEUED: list[Callable[[Mapping[str, Any]], None]] = []
#: Unfinished ScoringRuns as last watched (``scoring.on_run_event`` notes them; the verifier Job's end and the repair
#: path read them).
RUNS = Latest(lambda namespace, name: kube.get_custom("scoringruns", namespace, name))


@kopf.on.event(API_GROUP, API_VERSION, "trials")
async def trial_event(type: str | None, body: kopf.Body, status: kopf.Status, **_: Any) -> None:
    """A new Trial: launch it. At startup (``type`` None: the initial listing) also repair Running ones."""
    meta = body["metadata"]
    ended = WATCHDOG.note(type, body, status.get("phase"), TERMINAL)
    TRIALS.note(body, ended)
    if finalizers.finalizing(body):
        await finalizers.finalize(deleted, body)
        return
    if ended:
        return
    uid = meta["uid"]
    if type is None:
        if not status.get("phase"):
            _LAUNCHED.first(uid)
        await kube.in_thread(repair, dict(body))
    elif not status.get("phase") and _LAUNCHED.first(uid):
        try:
            await kube.in_thread(launch, dict(body))
        except kopf.TemporaryError:
            _LAUNCHED.forget(uid)  # the next event or the sweep tries again
            raise


def _finished(job: Mapping[str, Any]) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return "Complete" if cond["type"] == "Complete" else str(cond.get("reason") or "Failed")
    return None


def _read_json(key: str) -> dict[str, Any] | None:
    try:
        data = json.loads(store().get_bytes(key))
    except (OSError, KeyError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _prefix(status: Mapping[str, Any]) -> str:
    """The trial's folder key in the store (its ``recordUri`` under the store root)."""
    return str(status.get("recordUri", "")).removeprefix(config().store_uri.rstrip("/")).strip("/")


def _read_upload(record_uri: str) -> dict[str, Any] | None:
    return _read_json(_prefix({"recordUri": record_uri}) + "/upload.json")


def typed(conditions: list[dict[str, Any]]) -> list[Condition]:
    """Conditions (dicts, as :func:`condition` and ``kubeconditions`` make them) as the status model's."""
    return [Condition.model_validate(c) for c in conditions]


def ready_condition(phase: str, reason: str | None, generation: int | None = None) -> dict[str, Any]:
    """The Trial's ``Ready`` condition for its outcome."""
    return condition("Ready", "True" if phase == "Succeeded" else "False", phase, f"trial ended: {reason}", generation)


def _attempt_record(trial: Mapping[str, Any], spec: TrialSpec, end: AttemptEnd) -> TrialRecord:
    """The trial's record at the agent's end: evidence classified by the core, cost, what was in force."""
    meta, status = trial["metadata"], trial.get("status") or {}
    task, defaults = _task_cached(spec.task)
    plan = plan_agent(spec.agent, task, spec.seed)
    replay = None
    if plan.replay is not None and end.exit_code == 0:  # fetch-task copied it; the agent container ran `true`
        end = AttemptEnd(replayed=replayed_message(plan))
        replay = ReplayInfo(source=plan.replay.source, label=plan.label)
    outcome = classify(end)
    resources = kubejobs.resources_in_force(spec, defaults)
    record = TrialRecord(
        name=meta["name"], campaign=kubejobs.named(meta, kubejobs.LABEL_CAMPAIGN), entry=entry_name(spec),
        task=task.slug, seed=spec.seed, attempt=int(status.get("attempt") or 0) + 1, driver="operator",
        agent=AgentInfo(kind=spec.agent.kind, model=spec.agent.model, reasoning_effort=spec.agent.reasoning_effort,
                        label=plan.label),
        started_at=status.get("startTime"), exit_code=end.exit_code,
        prompt=PromptInfo(sha256=hashlib.sha256(task.instruction.encode()).hexdigest(), delivered=plan.delivers_prompt),
        sandbox=SandboxInfo(mechanism=MECHANISM, enforced={
            k: f"limit {v}, request {requested[k]}" for k, v in resources.items()
            for requested in [kubejobs.requests_in_force(resources, config())]},
                            limits=LimitsInfo(timeout_sec=kubejobs.deadline(spec, defaults), cpus=spec.limits.cpus or
                                              defaults.get("cpus"), memory_mb=spec.limits.memory_mb or
                                              _int(defaults.get("memory_mb")), storage_mb=spec.limits.storage_mb or
                                              _int(defaults.get("storage_mb")))))
    record.end(outcome.phase, outcome.reason, outcome.message)
    record.replay = replay
    started = _parse_time(status.get("startTime"))
    if started is not None:
        record.durations.agent_sec = round(time.time() - started, 3)
    _cost(trial, spec, record)
    return record


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _parse_time(text: str | None) -> float | None:
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None


def _cost(trial: Mapping[str, Any], spec: TrialSpec, record: TrialRecord) -> None:
    """The trial's cost: a model-calling trial's token is revoked and its usage read at the gateway
    (``gatewaying.settle``: unknown, with the reason, when it cannot be read or priced); others cost 0, and so does a
    trial that never launched (no token was minted)."""
    if not kubejobs.uses_gateway(spec.agent) or not (trial.get("status") or {}).get("phase"):
        cost = trial_cost(None, calls_models=False)
        record.cost_usd, record.cost_source, record.cost_unknown_reason = cost.usd, cost.source, cost.unknown_reason
        return
    fields = gatewaying.settle(trial, spec, config())
    recorded = gatewaying.record_fields(fields)
    record.usage = recorded.get("usage")
    record.cost_usd, record.cost_source = fields.get("costUSD"), recorded.get("cost_source")
    record.cost_unknown_reason = fields.get("costUnknownReason")


def _transcript(trial: Mapping[str, Any], spec: TrialSpec, prefix: str, record: TrialRecord) -> None:
    """``transcripts: true``: the gateway's transcript of the trial (all its attempts) as ``transcript.jsonl``
    beside ``trial.json`` in the store; a gateway that cannot be read is recorded, never fatal."""
    if not (spec.transcripts and kubejobs.uses_gateway(spec.agent)):
        return
    try:
        data = gatewaying.read_transcript(trial, config())
    except gatewaying.GatewayUnreachable as exc:
        record.transcript = TranscriptInfo(error=f"the gateway's transcript could not be read: {exc}")
        return
    store().put_bytes(f"{prefix}/{TRANSCRIPT}", data)
    lines = [json.loads(line) for line in data.splitlines() if line.strip()]
    record.transcript = TranscriptInfo(path=TRANSCRIPT, records=len(lines), bytes=len(data),
                                       truncated=any(isinstance(x, dict) and x.get("truncated") is True for x in lines))


def finish(trial: dict[str, Any], job: Mapping[str, Any], result: str) -> None:
    """The attempt's Job ended: read how (:func:`attempt_end`), then :func:`conclude`."""
    if finalizers.leaving(trial):
        return
    status = trial.get("status") or {}
    spec = trial_spec(trial)
    _, defaults = _task_cached(spec.task)
    cli = spec.agent.kind if agents.pin(spec.agent.kind) is not None else None
    prefix = _prefix(status)
    # The operator's own verdict (controller.pods: a platform failure, the agent past its time) decides when one was
    # recorded; else a Complete Job's pod succeeded, i.e. every container of it exited 0 (the kubelet's report, the
    # Job controller's condition): its statuses would say nothing more (evidence.attempt_end), so no pods are read.
    verdict = podevidence.recorded(store(), prefix, status.get("jobName") or "")
    pods = kube.job_pods(job["metadata"]["namespace"], job["metadata"]["name"]) \
        if job.get("metadata") and result != "Complete" and verdict is None else []
    end = verdict.attempt_end(kubejobs.deadline(spec, defaults)) if verdict is not None else \
        attempt_end(result, _read_upload(status.get("recordUri", "")), kubejobs.deadline(spec, defaults), cli,
                    pods=pods, plan=_task_inputs(spec)[0])
    conclude(trial, end)


def conclude(trial: dict[str, Any], end: AttemptEnd) -> None:
    """The attempt ended as ``end`` says (its Job's end, the operator's verdict, or Kueue's preemption): retry an
    infrastructure failure, end the trial, or create its ScoringRun. Nothing when the trial is being deleted (its
    finalizer stops it)."""
    if finalizers.leaving(trial):
        return
    meta, status = trial["metadata"], trial.get("status") or {}
    spec = trial_spec(trial)
    prefix = _prefix(status)
    record = _attempt_record(trial, spec, end)
    if should_retry(record.outcome(), record.attempt, spec.retries):
        store().put_bytes(f"{prefix}/attempts/{record.attempt}.json", json.dumps(record.to_json()).encode())
        kube.post_event(trial, "Warning", "Retrying", f"attempt {record.attempt - 1} ended {record.reason}: "
                        f"{record.message or 'an infrastructure failure'}; retrying as attempt {record.attempt}")
        _launch({**trial, "status": {}}, spec, record.attempt)
        return
    record.previous_attempts = _previous_attempts(prefix, record.attempt)
    _transcript(trial, spec, prefix, record)
    if record.phase is Phase.INFRASTRUCTURE_FAILED:
        complete(trial, record)
        return
    store().put_bytes(f"{prefix}/{ATTEMPT_RECORD}", json.dumps(record.to_json()).encode())
    store().put_bytes(f"{prefix}/agent/prompt.txt", _task_cached(spec.task)[0].instruction.encode())
    run = kubejobs.child_scoring_run(trial, scoring_run_name(meta["name"]),
                                     spec.verification.model_dump(by_alias=True, exclude_none=True, mode="json"),
                                     spec.scoring.model_dump(by_alias=True, mode="json"))
    created = kube.create_custom_answer("scoringruns", run)
    if created is not None and START_VERIFIER:  # its verifier right away, in this worker call (one call less)
        START_VERIFIER[0](created)


def end_attempt(job: Mapping[str, Any], verdict: podevidence.Verdict) -> None:
    """The operator decided how an attempt ended (:mod:`anchorage.controller.pods`: a platform failure, or the agent
    past its time): the verdict is recorded in the trial's folder, the Job deleted (its pod with it), then the trial
    finished by the verdict (:func:`finish`: retried, ended, or scored). A crash in between is finished from the
    record (:func:`check_running`)."""
    meta = job["metadata"]
    annotations = meta.get("annotations") or {}
    ns = annotations.get("anchorage.dev/trial-namespace", meta["namespace"])
    trial = TRIALS.current(ns, kubejobs.named(meta, kubejobs.LABEL_TRIAL) or "", functools.partial(_runs_job, meta["name"]))
    if trial is None or not _runs_job(meta["name"], trial):
        kube.delete_job(meta["namespace"], meta["name"])  # an attempt its trial no longer runs: only stopped
        return
    podevidence.record(store(), _prefix(trial.get("status") or {}), verdict)
    kube.delete_job(meta["namespace"], meta["name"])
    if _ENDED.first(str(meta.get("uid"))):
        try:
            finish(dict(trial), {}, "Verdict")
        except kopf.TemporaryError:
            _ENDED.forget(str(meta.get("uid")))
            raise


def _previous_attempts(prefix: str, attempt: int) -> list[AttemptInfo]:
    earlier = [_read_json(f"{prefix}/attempts/{n}.json") for n in range(1, attempt)]
    return [AttemptInfo(attempt=r["attempt"], reason=r.get("reason"), message=r.get("message") or "")
            for r in earlier if r is not None]


def run_ended(run: Mapping[str, Any], *, repairing: bool = False) -> None:
    """The trial's ScoringRun ended: put its scores into the attempt's record and move on (:func:`proceed`;
    ``repairing``: called by :func:`check_running`, the Jobs' events may have been missed)."""
    meta = run["metadata"]
    trial_ref = (run.get("spec") or {}).get("trialRef")
    trial = TRIALS.current(meta["namespace"], str(trial_ref), lambda t: (t.get("status") or {}).get("phase") == "Running")
    if trial is None or (trial.get("status") or {}).get("phase") != "Running":
        return
    prefix = _prefix(trial.get("status") or {})
    data = _read_json(f"{prefix}/{ATTEMPT_RECORD}")
    if data is None:  # the record of the agent's end is gone from the store: the platform lost it
        spec = trial_spec(trial)
        record = _attempt_record(trial, spec, AttemptEnd(storage_failure=f"{prefix}/{ATTEMPT_RECORD} is missing"))
    else:
        record = TrialRecord.model_validate(data)
        _apply_scores(trial, record, run, prefix)
    proceed(trial, record, repairing=repairing)


def proceed(trial: Mapping[str, Any], record: TrialRecord, *, repairing: bool = False) -> None:
    """After scoring: the pipeline's next protocol step (``trials.pipeline``: panel, then CBU — each its own
    Job with its own gateway token), or, when none is left, the trial's end.

    ``repairing`` (a restart, the sweep, the lone trials' watchdog): a step's Job may have ended, or ended and
    been deleted, without its event being seen — :func:`_step_state` looks before anything is launched, so a
    step is finished from what its pod left and never launched twice."""
    if finalizers.leaving(trial):
        return
    spec = trial_spec(trial)
    prefix = _prefix(trial.get("status") or {})
    for step in protocol_steps(spec.verification):
        if record.phase is Phase.INFRASTRUCTURE_FAILED:
            break
        if getattr(record, step.name, None) is not None:
            continue  # done before a restart
        state, lost = _step_state(trial, step.name, prefix) if repairing else ("new", None)
        if state == "running":
            return  # its end comes back here (on_protocol_job, or the next sweep)
        outcome = _read_json(f"{prefix}/verifier/{step.name}/outcome.json")
        if outcome is None and lost is not None:
            outcome = {"block": {"outcome": None}, "failure": lost}
        if outcome is not None:  # its pod ran to its end: the step's token is revoked, its usage read
            _apply_protocol(record, step.name, outcome, prefix, gatewaying.settle_step(trial, step.name, config()))
            continue
        store().put_bytes(f"{prefix}/{ATTEMPT_RECORD}", json.dumps(record.to_json()).encode())
        problem = _launch_protocol(trial, spec, step.name, record)
        if problem is None:
            return  # the protocol Job's end comes back here (on_protocol_job)
        _apply_protocol(record, step.name, {"block": {"outcome": None}, "failure": problem}, prefix,
                        protocol_cost([]))  # no pod, no token: nothing was called
    complete(trial, record, run=scoring_run_name(trial["metadata"]["name"]), scored=record.score is not None)


def _step_state(trial: Mapping[str, Any], step: str, prefix: str) -> tuple[str, str | None]:
    """Where a protocol step's Job is, from the cluster and the store: ``("running", None)``; ``("ended", why)``
    — it ended (or ended and was deleted: its upload sidecar's marker is in the store) and ``why`` is the failure
    when it left no outcome; ``("new", None)`` — never created, or deleted before its pod ran to its end (no
    marker): create it (same name, so at most one Job of the step exists)."""
    meta = trial["metadata"]
    job = kube.get_job(config().trials_namespace or meta["namespace"], kubejobs.protocol_job_name(meta["name"], step))
    if job is not None:
        result = _finished(job)
        if result is None:
            return "running", None
        return "ended", f"the verification.{step} pod ended ({result}) without its outcome"
    if _read_json(f"{prefix}/verifier/{step}/upload.json") is not None:
        return "ended", f"the verification.{step} pod ended without its outcome (its Job is gone)"
    return "new", None


def _launch_protocol(trial: Mapping[str, Any], spec: TrialSpec, step: str, record: TrialRecord) -> str | None:
    meta = trial["metadata"]
    campaign = (meta.get("labels") or {}).get(kubejobs.LABEL_CAMPAIGN)
    settings = getattr(spec.verification, step).model_dump(mode="json", by_alias=True)
    artifact = (record.artifact.path if record.artifact else None) or ""
    job = kubejobs.protocol_job(dict(trial), step=step, task=spec.task, settings=settings,
                                artifact=artifact.removeprefix("artifacts/") or None, config=config(), campaign=campaign)
    policies.ensure(job["metadata"]["namespace"], config())
    return gatewaying.create_protocol_job(job, trial, spec, step)


def _apply_protocol(record: TrialRecord, step: str, outcome: Mapping[str, Any], prefix: str,
                    cost: Mapping[str, Any]) -> None:
    """A protocol step's outcome and its ``cost`` (:func:`gatewaying.settle_step`: the gateway's usage of the step's
    account) into the record (its summary), its block into ``score.json``; a failed step (no gateway, every call
    failing) is the platform's."""
    block = {**(outcome.get("block") or {}), **cost}
    setattr(record, step, summary(step, block))
    setattr(record.durations, f"{step}_sec", block.get("duration_sec"))
    score = _read_json(f"{prefix}/score.json")
    if score is not None:
        store().put_bytes(f"{prefix}/score.json", json.dumps({**score, step: block}, indent=1, default=str).encode())
    if outcome.get("failure"):
        record.end(Phase.INFRASTRUCTURE_FAILED, Reason.GATEWAY_ERROR, str(outcome["failure"]))


def protocol_ended(job: dict[str, Any], result: str) -> None:
    """A trial's protocol Job ended: its outcome into the record, then the next step or the trial's end."""
    labels, annotations = job["metadata"].get("labels") or {}, job["metadata"].get("annotations") or {}
    ns = annotations.get("anchorage.dev/trial-namespace", job["metadata"]["namespace"])
    trial = TRIALS.current(ns, labels[kubejobs.LABEL_TRIAL], lambda t: (t.get("status") or {}).get("phase") == "Running")
    if trial is None or (trial.get("status") or {}).get("phase") != "Running":
        return
    prefix = _prefix(trial.get("status") or {})
    data = _read_json(f"{prefix}/{ATTEMPT_RECORD}")
    if data is None:
        return
    record = TrialRecord.model_validate(data)
    step = labels.get(kubejobs.LABEL_STEP, "")
    if step in PROTOCOL_SUMMARY and getattr(record, step) is None and \
            _read_json(f"{prefix}/verifier/{step}/outcome.json") is None:
        _apply_protocol(record, step, {"block": {"outcome": None},
                                       "failure": f"the verification.{step} pod ended ({result}) without its outcome"},
                        prefix, gatewaying.settle_step(trial, step, config()))
    proceed(trial, record)


def _apply_scores(trial: Mapping[str, Any], record: TrialRecord, run: Mapping[str, Any], prefix: str) -> None:
    """The verifier's record (``score.json``) into the trial's record, its gates and obligations counted (the
    scorer reports, the driver counts); a verifier that failed is the platform's."""
    status = run.get("status") or {}
    score = _read_json(f"{prefix}/score.json") if status.get("phase") == "Succeeded" else None
    if score is None:
        record.end(Phase.INFRASTRUCTURE_FAILED, Reason.SANDBOX_ERROR,
                   f"the verifier did not score the artifact: {status.get('message') or 'no score record'}")
        return
    record.apply_score(score, kubejobs.artifact_in_trial(score.get("artifact")), f"{kubejobs.SCRATCH_IN}/0")
    metrics.operator_score_checked(trial, score)


def complete(trial: Mapping[str, Any], record: TrialRecord, *, run: str | None = None, scored: bool = False) -> None:
    """Write the finished trial: ``trial.json``, the store's completion marker, then the Trial's final status."""
    meta = trial["metadata"]
    prefix = _prefix(trial.get("status") or {})
    record.finished_at = now()
    records = store()
    records.put_bytes(f"{prefix}/trial.json", json.dumps(record.to_json(), indent=1).encode())
    records.mark_complete(prefix)  # written after every other object of the trial (design notes: run folder)
    generation = meta.get("generation")
    conditions = [ready_condition(record.phase, record.reason, generation)]
    if run is not None:
        conditions.append(condition("Scored", "True" if scored else "False", "Scored" if scored else "VerifierFailed",
                                    f"O-Eval {record.score.o_eval if record.score else None}", generation))
    conditions += lifecycle(state_of(record.phase, trial=True), str(record.phase), f"trial ended: {record.reason}",
                            generation)
    conditions = carry((trial.get("status") or {}).get("conditions"), conditions)
    score = record.score
    final = TrialStatus(
        phase=record.phase, reason=record.reason, message=record.message or None, exit_code=record.exit_code,
        completion_time=now_rfc3339(), scoring_run=run, raw=score.raw if score else None,
        o_eval=score.o_eval if score else None, bo_eval=score.bo_eval if score else None,
        gradable=score.gradable if score else None, cost_usd=record.cost_usd,
        usage=Usage.model_validate({k: (record.usage or {}).get(v, 0) for k, v in gatewaying.USAGE_FIELDS.items()})
        if record.usage else None, cost_unknown_reason=record.cost_unknown_reason, observed_generation=generation,
        conditions=typed(conditions))
    if not kube.patch_status("trials", meta["namespace"], meta["name"], final.patch(),
                             resource_version=meta.get("resourceVersion")):
        raise kopf.TemporaryError(f"trial {meta['name']} changed (or is gone) since it was read; its end is "
                                  "written again from the newer version", delay=1)
    _announce_end(trial, record)
    metrics.operator_trial_finished(trial, record.phase, str(record.reason))
    if score is not None:
        metrics.operator_trial_scored(trial, score.o_eval, score.bo_eval, record.scoring_profile)


def deleted(trial: dict[str, Any]) -> None:
    """The Trial is being deleted (its finalizer, :mod:`~anchorage.controller.finalizers`): stop its Jobs and their
    pods, record it Cancelled when it had not ended (:func:`cancel`), then let it go."""
    jobs = finalizers.trial_jobs(trial)
    running = finalizers.stop(finalizers.jobs_namespace(trial), jobs)
    if (trial.get("status") or {}).get("phase") not in TERMINAL:
        cancel(trial, running)
    finalizers.release("trials", trial)


def cancel(trial: Mapping[str, Any], running: int) -> None:
    """A Trial deleted before its end: ``Cancelled`` — never ``Failed``, never scored, never run again by its
    campaign. Its record (``trial.json``: the agent's end and scores if it got that far, its spend — the gateway token
    revoked and read), its status, the metric and, for a lone trial, a Normal Event."""
    meta, status = trial["metadata"], trial.get("status") or {}
    campaign = kubejobs.named(meta, kubejobs.LABEL_CAMPAIGN)
    message = f"deleted before its end: {running} running Job(s) and their pods stopped; no score"
    prefix = _prefix(status) or kubejobs.trial_prefix(meta["namespace"], meta["name"], campaign)
    try:
        data = _read_json(f"{prefix}/{ATTEMPT_RECORD}") if status.get("phase") else None
        record = TrialRecord.model_validate(data) if data is not None else \
            _attempt_record(trial, trial_spec(trial), AttemptEnd())
        record.end(Phase.CANCELLED, Reason.CANCELLED, message)
        record.finished_at = now()
        store().put_bytes(f"{prefix}/trial.json", json.dumps(record.to_json(), indent=1).encode())
        store().mark_complete(prefix)
    except (ValidationError, AnchorageError) as exc:  # a spec that could never run: there is nothing to record
        log.warning(f"trial {meta['name']} cancelled without a record: {exc}")
    generation = meta.get("generation")
    cancelled = TrialStatus(
        phase=Phase.CANCELLED, reason=Reason.CANCELLED, message=message, completion_time=now_rfc3339(),
        observed_generation=generation, conditions=typed(carry(status.get("conditions"), [
            condition("Ready", "False", "Cancelled", message, generation),
            *lifecycle("cancelled", "Cancelled", message, generation)])))
    if status.get("phase") == Phase.QUEUED:  # cancelled in the queue: its position and Kueue's word are gone
        cancelled.queue_position, cancelled.queue_message = None, None
    kube.patch_status("trials", meta["namespace"], meta["name"], cancelled.patch())
    metrics.operator_trial_finished(trial, Phase.CANCELLED, Reason.CANCELLED)
    if campaign is None:  # a campaign's trials are its own to announce (it is usually the one deleted)
        kube.post_event(dict(trial), "Normal", "Cancelled", message)


def _announce_end(trial: Mapping[str, Any], record: TrialRecord) -> None:
    """The trial's end as an Event: a Warning for every failure; a Normal one for a lone trial's success (a
    campaign announces its trials' progress itself, which keeps a campaign trial's writes at seven)."""
    score = record.score
    if record.phase is Phase.SUCCEEDED:
        if kubejobs.named(trial["metadata"], kubejobs.LABEL_CAMPAIGN) is None:
            kube.post_event(dict(trial), "Normal", "Succeeded", f"scored: O-Eval {score.o_eval if score else None}, "
                            f"BO-Eval {score.bo_eval if score else None}")
        return
    kube.post_event(dict(trial), "Warning", str(record.phase), f"{record.reason}: {record.message or ''}".strip(": "))


def _has_ended(value: Any, **_: Any) -> bool:
    """Whether a Job's ``status.conditions`` (``value``) hold its end: ``Complete`` or ``Failed`` true."""
    return isinstance(value, list) and any(
        isinstance(cond, dict) and cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True"
        for cond in value)


#: Only events of ended Jobs matter: ``status.conditions`` holding ``Complete`` or ``Failed`` (what
#: :func:`_finished` reads). The operator's own Job watch (:mod:`anchorage.controller.watching`) checks it before
#: calling the Job handlers below; ``bench/kopf_floor.py`` gives kopf the same filter (its no-op Job handlers).
ENDED_JOBS: dict[str, Any] = {"field": "status.conditions", "value": _has_ended}
log = logging.getLogger(__name__)


async def on_trial_job(type_: str, body: Mapping[str, Any]) -> None:
    """A trial Job's watch event (``anchorage.controller.watching``): when it has ended, finish its Trial (once).
    Not for the initial listing: an unfinished Trial's own listing event repairs it from its Job (one GET per
    *unfinished* trial, never one per finished Job)."""
    result = first_end(type_, body, _ENDED)
    if result is not None:
        await kube.in_thread(_job_ended, dict(body), result, log)


async def on_protocol_job(type_: str, body: Mapping[str, Any]) -> None:
    """A trial's panel/CBU Job's watch event: when it has ended, move its trial on (once). Not for the initial
    listing: an unfinished Trial's own listing event repairs it, its steps' Jobs included (:func:`check_running` →
    :func:`proceed`), so a step that ended while the operator was down is finished once."""
    result = first_end(type_, body, _PROTOCOLS_ENDED)
    if result is None:
        return
    try:
        await kube.in_thread(protocol_ended, dict(body), result)
    except kopf.TemporaryError as exc:
        _PROTOCOLS_ENDED.forget(str(body["metadata"].get("uid")))
        log.warning(f"moving on after {body['metadata']['name']} failed; the sweep retries: {exc}")


def first_end(type_: str | None, body: Mapping[str, Any], once: Once) -> str | None:
    """How a Job ended (:func:`_finished`) the first time this process sees its end (``once``); else None."""
    result = _finished(body) if type_ != "DELETED" else None
    return result if result is not None and once.first(str(body["metadata"].get("uid"))) else None


def _job_ended(job: dict[str, Any], result: str, logger: logging.Logger) -> None:
    annotations = job["metadata"].get("annotations") or {}
    ns = annotations.get("anchorage.dev/trial-namespace", job["metadata"]["namespace"])
    trial = TRIALS.current(ns, kubejobs.named(job["metadata"], kubejobs.LABEL_TRIAL) or "",
                           functools.partial(_runs_job, job["metadata"]["name"]))
    if trial is None or not _runs_job(job["metadata"]["name"], trial):
        return
    try:
        finish(trial, job, result)
    except kopf.TemporaryError as exc:
        _ENDED.forget(str(job["metadata"].get("uid")))
        logger.warning(f"finishing trial {trial['metadata']['name']} failed; the next event or the sweep retries: {exc}")


def _runs_job(job: str, trial: Mapping[str, Any]) -> bool:
    """Whether the trial is Running (or Queued for) the attempt of Job ``job``."""
    status = trial.get("status") or {}
    return status.get("phase") in ("Running", "Queued") and status.get("jobName") == job


def check_running(trial: Mapping[str, Any]) -> dict[str, Any] | None:
    """Finish a Running trial whose Job ended (or vanished) without us seeing the event.

    Returns the trial's ScoringRun when it exists already: the agent's end was handled, the trial
    waits for its scores.
    """
    status = trial.get("status") or {}
    if status.get("phase") != "Running":
        return None
    ns = config().trials_namespace or trial["metadata"]["namespace"]
    job = kube.get_job(ns, status.get("jobName") or "")
    verdict = podevidence.recorded(store(), _prefix(status), status.get("jobName") or "")
    if verdict is not None and (job is None or _finished(job) is None):
        # the operator ended this attempt (controller.pods) and was stopped before it finished the trial
        if job is not None:
            kube.delete_job(ns, job["metadata"]["name"])
        finish(dict(trial), job or {}, "Verdict")
        return None
    if job is None and _read_upload(status.get("recordUri", "")) is None:
        # Never created (a crash between recording Running and creating it) or deleted before it ran
        # to its end: create it (same deterministic name, so at most one Job per attempt exists).
        _launch(trial, trial_spec(trial), int(status.get("attempt") or 0))
        return None
    result = "JobLost" if job is None else _finished(job)
    if result is None:
        return None
    # The watched run while it is unfinished (what the caller then checks), else the API's answer.
    run = RUNS.current(trial["metadata"]["namespace"], scoring_run_name(trial["metadata"]["name"]), lambda _: True)
    if run is None:
        finish(dict(trial), job or {}, result)
    elif (run.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        run_ended(run, repairing=True)  # past scoring: finish what ended unseen, or wait for what still runs
        return None
    return run
