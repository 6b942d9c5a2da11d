"""An attempt's record (:class:`~anchorage.trials.TrialRecord`) from its end's evidence: the lifecycle core's
classification, what was in force (limits, requests, the prompt's hash), its cost read at the gateway, the gateway's
transcript, and the attempts before it.

The local engine assembles the same record from its sandbox's evidence (``runtime/local/trials.py``); both fill
the core's record type, so a board cannot tell the drivers apart.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from typing import Any

from anchorage.controller import metering
from anchorage.controller.podevidence import parse_time
from anchorage.controller.settings import config, store
from anchorage.controller.trialstate import read_json, task_cached, task_inputs
from anchorage.manifests import TrialSpec
from anchorage.runtime.kube import jobs
from anchorage.trials import AgentPlan, AttemptEnd, TrialRecord, classify
from anchorage.trials.agents.plans import replayed_message
from anchorage.trials.costing import trial_cost
from anchorage.trials.records import (
    TRANSCRIPT,
    AgentInfo,
    AttemptInfo,
    LimitsInfo,
    PromptInfo,
    ReplayInfo,
    SandboxInfo,
    entry_name,
    transcript_info,
    transcript_unreadable,
)

#: The sandbox mechanism a cluster trial's record names.
MECHANISM = "kubernetes-pod"


def attempt_record(trial: Mapping[str, Any], spec: TrialSpec, end: AttemptEnd) -> TrialRecord:
    """The trial's record at the agent's end: evidence classified by the core, cost, what was in force."""
    meta, status = trial["metadata"], trial.get("status") or {}
    task = task_cached(spec.task)
    plan, limits = task_inputs(spec)
    replay = None
    if plan.replay is not None and end.exit_code == 0:  # fetch-task copied it; the agent container ran `true`
        end = AttemptEnd(replayed=replayed_message(plan))
        replay = ReplayInfo(source=plan.replay.source, label=plan.label)
    outcome = classify(end)
    resources = jobs.resources_in_force(limits)
    requested = jobs.requests_in_force(resources, config())
    record = TrialRecord(
        name=meta["name"], campaign=jobs.named(meta, jobs.LABEL_CAMPAIGN), entry=entry_name(spec),
        task=task.slug, seed=spec.seed, attempt=int(status.get("attempt") or 0) + 1, driver="operator",
        agent=AgentInfo(kind=spec.agent.kind, model=spec.agent.model, reasoning_effort=spec.agent.reasoning_effort,
                        label=plan.label),
        started_at=status.get("startTime"), exit_code=end.exit_code,
        prompt=PromptInfo(sha256=hashlib.sha256(task.instruction.encode()).hexdigest(), delivered=plan.delivers_prompt),
        sandbox=SandboxInfo(
            mechanism=MECHANISM, enforced={k: f"limit {v}, request {requested[k]}" for k, v in resources.items()},
            limits=LimitsInfo(timeout_sec=limits.deadline_sec, cpus=limits.cpus, memory_mb=limits.memory_mb,
                              storage_mb=limits.storage_mb)))
    record.end(outcome.phase, outcome.reason, outcome.message)
    record.replay = replay
    started = parse_time(status.get("startTime"))
    if started is not None:
        record.durations.agent_sec = round(time.time() - started, 3)
    record_cost(trial, plan, record)
    return record


def record_cost(trial: Mapping[str, Any], plan: AgentPlan, record: TrialRecord) -> None:
    """The trial's cost: a model-calling trial's (``plan``: its agent's) token is revoked and its usage read at the
    gateway (``metering.settle``: unknown, with the reason, when it cannot be read or priced); others cost 0, and so
    does a trial that never launched (no token was minted)."""
    if not plan.needs_gateway or not (trial.get("status") or {}).get("phase"):
        cost = trial_cost(None, calls_models=False)
        record.cost_usd, record.cost_source, record.cost_unknown_reason = cost.usd, cost.source, cost.unknown_reason
        return
    fields = metering.settle(trial, config())
    recorded = metering.record_fields(fields)
    record.usage = recorded.get("usage")
    record.cost_usd, record.cost_source = fields.get("costUSD"), recorded.get("cost_source")
    record.cost_unknown_reason = fields.get("costUnknownReason")


def record_transcript(trial: Mapping[str, Any], spec: TrialSpec, prefix: str, record: TrialRecord) -> None:
    """``transcripts: true``: the gateway's transcript of the trial (all its attempts) as ``transcript.jsonl``
    beside ``trial.json`` in the store; a gateway that cannot be read is recorded, never fatal."""
    if not (spec.transcripts and task_inputs(spec)[0].needs_gateway):
        return
    try:
        data = metering.read_transcript(trial, config())
    except metering.GatewayUnreachable as exc:
        record.transcript = transcript_unreadable(exc)
        return
    store().put_bytes(f"{prefix}/{TRANSCRIPT}", data)
    record.transcript = transcript_info(data)


def previous_attempts(prefix: str, attempt: int) -> list[AttemptInfo]:
    """The attempts before ``attempt`` (each retried infrastructure failure's reason and message)."""
    earlier = [read_json(f"{prefix}/attempts/{n}.json") for n in range(1, attempt)]
    return [AttemptInfo(attempt=r["attempt"], reason=r.get("reason"), message=r.get("message") or "")
            for r in earlier if r is not None]
