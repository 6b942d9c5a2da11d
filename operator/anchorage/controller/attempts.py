"""An attempt's end: how it ended, read from evidence the agent cannot forge (:func:`finish`: the operator's recorded
verdict, the Job's condition, its pod's container statuses, the upload sidecar's marker), then what follows
(:func:`conclude`): an infrastructure failure retried as a new attempt, the trial ended, or its ScoringRun created
and its verifier started.

Reached from the trial Job's watch event (:func:`on_trial_job`), the operator's own verdict on a pod
(:func:`end_attempt`, from :mod:`~anchorage.controller.pods`), Kueue's preemption
(:mod:`~anchorage.controller.queueing`) and the repair path (:func:`anchorage.controller.trials.check_running`).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from anchorage import agentclis
from anchorage.campaigns.names import scoring_run_name
from anchorage.controller import finalizers, kube, podevidence, scoring
from anchorage.controller.caches import TRIALS, Once
from anchorage.controller.evidence import attempt_end
from anchorage.controller.finishing import complete
from anchorage.controller.jobends import first_end
from anchorage.controller.launching import start_attempt
from anchorage.controller.recording import attempt_record, previous_attempts, record_transcript
from anchorage.controller.settings import store
from anchorage.controller.trialstate import (
    ATTEMPT_RECORD,
    read_upload,
    runs_job,
    store_prefix,
    task_cached,
    task_inputs,
    trial_of_job,
    trial_spec,
)
from anchorage.runtime.kube import jobs
from anchorage.trials import AttemptEnd, Phase, should_retry

log = logging.getLogger(__name__)
#: Trial Jobs whose end this process handled.
_ENDED = Once()


def finish(trial: dict[str, Any], job: Mapping[str, Any], result: str) -> None:
    """The attempt's Job ended: read how (:func:`~anchorage.controller.evidence.attempt_end`), then :func:`conclude`."""
    if finalizers.leaving(trial):
        return
    status = trial.get("status") or {}
    spec = trial_spec(trial)
    plan, limits = task_inputs(spec)
    cli = spec.agent.kind if agentclis.pin(spec.agent.kind) is not None else None
    prefix = store_prefix(status)
    # The operator's own verdict (controller.pods: a platform failure, the agent past its time) decides when one was
    # recorded; else a Complete Job's pod succeeded, i.e. every container of it exited 0 (the kubelet's report, the
    # Job controller's condition): its statuses would say nothing more (evidence.attempt_end), so no pods are read.
    verdict = podevidence.recorded(store(), prefix, status.get("jobName") or "")
    pods = kube.job_pods(job["metadata"]["namespace"], job["metadata"]["name"]) \
        if job.get("metadata") and result != "Complete" and verdict is None else []
    end = verdict.attempt_end(limits.deadline_sec) if verdict is not None else \
        attempt_end(result, read_upload(status.get("recordUri", "")), limits.deadline_sec, cli,
                    pods=pods, plan=plan)
    conclude(trial, end)


def conclude(trial: dict[str, Any], end: AttemptEnd) -> None:
    """The attempt ended as ``end`` says (its Job's end, the operator's verdict, or Kueue's preemption): retry an
    infrastructure failure, end the trial, or create its ScoringRun. Nothing when the trial is being deleted (its
    finalizer stops it)."""
    if finalizers.leaving(trial):
        return
    meta, status = trial["metadata"], trial.get("status") or {}
    spec = trial_spec(trial)
    prefix = store_prefix(status)
    record = attempt_record(trial, spec, end)
    if should_retry(record.outcome(), record.attempt, spec.retries):
        store().put_bytes(f"{prefix}/attempts/{record.attempt}.json", json.dumps(record.to_json()).encode())
        kube.post_event(trial, "Warning", "Retrying", f"attempt {record.attempt - 1} ended {record.reason}: "
                        f"{record.message or 'an infrastructure failure'}; retrying as attempt {record.attempt}")
        start_attempt({**trial, "status": {}}, spec, record.attempt)
        return
    record.previous_attempts = previous_attempts(prefix, record.attempt)
    record_transcript(trial, spec, prefix, record)
    if record.phase is Phase.INFRASTRUCTURE_FAILED:
        complete(trial, record)
        return
    store().put_bytes(f"{prefix}/{ATTEMPT_RECORD}", json.dumps(record.to_json()).encode())
    store().put_bytes(f"{prefix}/agent/prompt.txt", task_cached(spec.task).instruction.encode())
    run = jobs.child_scoring_run(trial, scoring_run_name(meta["name"]),
                                 spec.verification.model_dump(by_alias=True, exclude_none=True, mode="json"),
                                 spec.scoring.model_dump(by_alias=True, mode="json"))
    created = kube.create_custom_answer("scoringruns", run)
    if created is not None:  # its verifier right away, in this worker call (one call less than the run's event)
        scoring.start_created(created)


def end_attempt(job: Mapping[str, Any], verdict: podevidence.Verdict) -> None:
    """The operator decided how an attempt ended (:mod:`anchorage.controller.pods`: a platform failure, or the agent
    past its time): the verdict is recorded in the trial's folder, the Job deleted (its pod with it), then the trial
    finished by the verdict (:func:`finish`: retried, ended, or scored). A crash in between is finished from the
    record (:func:`anchorage.controller.trials.check_running`)."""
    meta = job["metadata"]
    trial = TRIALS.current(*trial_of_job(job), functools.partial(runs_job, meta["name"]))
    if trial is None or not runs_job(meta["name"], trial):
        kube.delete_job(meta["namespace"], meta["name"])  # an attempt its trial no longer runs: only stopped
        return
    podevidence.record(store(), store_prefix(trial.get("status") or {}), verdict)
    kube.delete_job(meta["namespace"], meta["name"])
    if _ENDED.first(str(meta.get("uid"))):
        try:
            finish(dict(trial), {}, "Verdict")
        except kopf.TemporaryError:
            _ENDED.forget(str(meta.get("uid")))
            raise


async def on_trial_job(type_: str, body: Mapping[str, Any]) -> None:
    """A trial Job's watch event (``anchorage.controller.watching``): when it has ended, finish its Trial (once).
    Not for the initial listing: an unfinished Trial's own listing event repairs it from its Job (one GET per
    *unfinished* trial, never one per finished Job)."""
    result = first_end(type_, body, _ENDED)
    if result is not None:
        await kube.in_thread(_job_ended, dict(body), result, log)


def _job_ended(job: dict[str, Any], result: str, logger: logging.Logger) -> None:
    trial = TRIALS.current(*trial_of_job(job), functools.partial(runs_job, job["metadata"]["name"]))
    if trial is None or not runs_job(job["metadata"]["name"], trial):
        return
    try:
        finish(trial, job, result)
    except kopf.TemporaryError as exc:
        _ENDED.forget(str(job["metadata"].get("uid")))
        logger.warning(f"finishing trial {trial['metadata']['name']} failed; the next event or the sweep retries: {exc}")
