"""A trial's end: after its ScoringRun (:func:`run_ended`), the pipeline's protocol steps, each its own Job
(:func:`proceed`, :func:`on_protocol_job`), then ``trial.json``, the store's completion marker and the Trial's final
status (:func:`complete`); or, deleted before its end, ``Cancelled`` (:func:`deleted`, :func:`cancel`).

The Trial owns its status: its final write is made here, the second of its two writes (the first is
:mod:`~anchorage.controller.launching`'s ``Running``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from anchorage import metrics
from anchorage.campaigns.names import scoring_run_name
from anchorage.controller import finalizers, kube, metering, policies
from anchorage.controller.caches import TRIALS, Once
from anchorage.controller.jobends import first_end, job_result
from anchorage.controller.recording import attempt_record
from anchorage.controller.settings import config, store
from anchorage.controller.trialstate import (
    ATTEMPT_RECORD,
    TERMINAL,
    condition,
    read_json,
    ready_condition,
    store_prefix,
    trial_of_job,
    trial_spec,
    typed,
)
from anchorage.errors import AnchorageError
from anchorage.manifests import TrialSpec
from anchorage.runtime.kube import jobs
from anchorage.runtime.kube.conditions import carry, lifecycle, state_of
from anchorage.runtime.kube.status import TrialStatus, Usage, now_rfc3339
from anchorage.scoring.records import ScoreRecord
from anchorage.trials import AttemptEnd, Phase, Reason, TrialRecord
from anchorage.trials.costing import protocol_cost
from anchorage.trials.pipeline import PROTOCOL_SUMMARY, protocol_steps, summary
from anchorage.trials.records import now

log = logging.getLogger(__name__)
#: Protocol Jobs whose end this process handled.
_PROTOCOLS_ENDED = Once()


def run_ended(run: Mapping[str, Any], *, repairing: bool = False) -> None:
    """The trial's ScoringRun ended: put its scores into the attempt's record and move on (:func:`proceed`;
    ``repairing``: called by :func:`check_running`, the Jobs' events may have been missed)."""
    meta = run["metadata"]
    trial_ref = (run.get("spec") or {}).get("trialRef")
    trial = TRIALS.current(meta["namespace"], str(trial_ref), lambda t: (t.get("status") or {}).get("phase") == "Running")
    if trial is None or (trial.get("status") or {}).get("phase") != "Running":
        return
    prefix = store_prefix(trial.get("status") or {})
    data = read_json(f"{prefix}/{ATTEMPT_RECORD}")
    if data is None:  # the record of the agent's end is gone from the store: the platform lost it
        spec = trial_spec(trial)
        record = attempt_record(trial, spec, AttemptEnd(storage_failure=f"{prefix}/{ATTEMPT_RECORD} is missing"))
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
    prefix = store_prefix(trial.get("status") or {})
    for step in protocol_steps(spec.verification):
        if record.phase is Phase.INFRASTRUCTURE_FAILED:
            break
        if getattr(record, step.name, None) is not None:
            continue  # done before a restart
        state, lost = _step_state(trial, step.name, prefix) if repairing else ("new", None)
        if state == "running":
            return  # its end comes back here (on_protocol_job, or the next sweep)
        outcome = read_json(f"{prefix}/verifier/{step.name}/outcome.json")
        if outcome is None and lost is not None:
            outcome = {"block": {"outcome": None}, "failure": lost}
        if outcome is not None:  # its pod ran to its end: the step's token is revoked, its usage read
            _apply_protocol(record, step.name, outcome, prefix, metering.settle_step(trial, step.name, config()))
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
    job = kube.get_job(config().trials_namespace or meta["namespace"], jobs.protocol_job_name(meta["name"], step))
    if job is not None:
        result = job_result(job)
        if result is None:
            return "running", None
        return "ended", f"the verification.{step} pod ended ({result}) without its outcome"
    if read_json(f"{prefix}/verifier/{step}/upload.json") is not None:
        return "ended", f"the verification.{step} pod ended without its outcome (its Job is gone)"
    return "new", None


def _launch_protocol(trial: Mapping[str, Any], spec: TrialSpec, step: str, record: TrialRecord) -> str | None:
    meta = trial["metadata"]
    campaign = (meta.get("labels") or {}).get(jobs.LABEL_CAMPAIGN)
    settings = getattr(spec.verification, step).model_dump(mode="json", by_alias=True)
    artifact = (record.artifact.path if record.artifact else None) or ""
    job = jobs.protocol_job(dict(trial), step=step, task=spec.task, settings=settings,
                            artifact=artifact.removeprefix("artifacts/") or None, config=config(), campaign=campaign)
    policies.ensure(job["metadata"]["namespace"], config())
    return metering.create_protocol_job(job, trial, spec, step)


def _apply_protocol(record: TrialRecord, step: str, outcome: Mapping[str, Any], prefix: str,
                    cost: Mapping[str, Any]) -> None:
    """A protocol step's outcome and its ``cost`` (:func:`metering.settle_step`: the gateway's usage of the step's
    account) into the record (its summary), its block into ``score.json``; a failed step (no gateway, every call
    failing) is the platform's."""
    block = {**(outcome.get("block") or {}), **cost}
    setattr(record, step, summary(step, block))
    setattr(record.durations, f"{step}_sec", block.get("duration_sec"))
    score = read_json(f"{prefix}/score.json")
    if score is not None:
        store().put_bytes(f"{prefix}/score.json", json.dumps({**score, step: block}, indent=1, default=str).encode())
    if outcome.get("failure"):
        record.end(Phase.INFRASTRUCTURE_FAILED, Reason.GATEWAY_ERROR, str(outcome["failure"]))


def protocol_ended(job: dict[str, Any], result: str) -> None:
    """A trial's protocol Job ended: its outcome into the record, then the next step or the trial's end."""
    labels = job["metadata"].get("labels") or {}
    trial = TRIALS.current(*trial_of_job(job), lambda t: (t.get("status") or {}).get("phase") == "Running")
    if trial is None or (trial.get("status") or {}).get("phase") != "Running":
        return
    prefix = store_prefix(trial.get("status") or {})
    data = read_json(f"{prefix}/{ATTEMPT_RECORD}")
    if data is None:
        return
    record = TrialRecord.model_validate(data)
    step = labels.get(jobs.LABEL_STEP, "")
    if step in PROTOCOL_SUMMARY and getattr(record, step) is None and \
            read_json(f"{prefix}/verifier/{step}/outcome.json") is None:
        _apply_protocol(record, step, {"block": {"outcome": None},
                                       "failure": f"the verification.{step} pod ended ({result}) without its outcome"},
                        prefix, metering.settle_step(trial, step, config()))
    proceed(trial, record)


def _apply_scores(trial: Mapping[str, Any], record: TrialRecord, run: Mapping[str, Any], prefix: str) -> None:
    """The verifier's record (``score.json``) into the trial's record, its gates and obligations counted (the
    scorer reports, the driver counts); a verifier that failed is the platform's."""
    status = run.get("status") or {}
    data = read_json(f"{prefix}/score.json") if status.get("phase") == "Succeeded" else None
    if data is None:
        record.end(Phase.INFRASTRUCTURE_FAILED, Reason.SANDBOX_ERROR,
                   f"the verifier did not score the artifact: {status.get('message') or 'no score record'}")
        return
    try:
        score = ScoreRecord.from_dict(data)
    except ValueError as exc:
        record.end(Phase.INFRASTRUCTURE_FAILED, Reason.SANDBOX_ERROR, f"the verifier's {prefix}/score.json: {exc}")
        return
    record.apply_score(score, jobs.artifact_in_trial(score.artifact), f"{jobs.SCRATCH_IN}/0")
    metrics.operator_score_checked(trial, score)


def complete(trial: Mapping[str, Any], record: TrialRecord, *, run: str | None = None, scored: bool = False) -> None:
    """Write the finished trial: ``trial.json``, the store's completion marker, then the Trial's final status."""
    meta = trial["metadata"]
    prefix = store_prefix(trial.get("status") or {})
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
        usage=Usage.model_validate({k: (record.usage or {}).get(v, 0) for k, v in metering.USAGE_FIELDS.items()})
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
    found = finalizers.trial_jobs(trial)
    running = finalizers.stop(finalizers.jobs_namespace(trial), found)
    if (trial.get("status") or {}).get("phase") not in TERMINAL:
        cancel(trial, running)
    finalizers.release("trials", trial)


def cancel(trial: Mapping[str, Any], running: int) -> None:
    """A Trial deleted before its end: ``Cancelled`` — never ``Failed``, never scored, never run again by its
    campaign. Its record (``trial.json``: the agent's end and scores if it got that far, its spend — the gateway token
    revoked and read), its status, the metric and, for a lone trial, a Normal Event."""
    meta, status = trial["metadata"], trial.get("status") or {}
    campaign = jobs.named(meta, jobs.LABEL_CAMPAIGN)
    message = f"deleted before its end: {running} running Job(s) and their pods stopped; no score"
    prefix = store_prefix(status) or jobs.trial_prefix(meta["namespace"], meta["name"], campaign)
    try:
        data = read_json(f"{prefix}/{ATTEMPT_RECORD}") if status.get("phase") else None
        record = TrialRecord.model_validate(data) if data is not None else \
            attempt_record(trial, trial_spec(trial), AttemptEnd())
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
        if jobs.named(trial["metadata"], jobs.LABEL_CAMPAIGN) is None:
            kube.post_event(dict(trial), "Normal", "Succeeded", f"scored: O-Eval {score.o_eval if score else None}, "
                            f"BO-Eval {score.bo_eval if score else None}")
        return
    kube.post_event(dict(trial), "Warning", str(record.phase), f"{record.reason}: {record.message or ''}".strip(": "))


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

