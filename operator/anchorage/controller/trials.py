"""Trial handlers: launch the Job of each attempt; when it ends, record the outcome and create the
ScoringRun.

Registered by importing ``anchorage.controller``. A Trial runs once; only an infrastructure failure
is retried, and only ``spec.retries`` times (each attempt is a new Job ``<trial>-a<N>``). Names are
deterministic, so a restarted operator that re-handles a Trial finds its Job instead of making a
second one.
"""

from __future__ import annotations

import functools
import json
from typing import Any, cast

import kopf
from pydantic import ValidationError

from anchorage import metrics
from anchorage.campaigns.names import dns_label, scoring_run_name
from anchorage.controller import kube
from anchorage.controller.settings import config
from anchorage.errors import AnchorageError
from anchorage.manifests import API_GROUP, API_VERSION, TrialSpec
from anchorage.runtime import kubejobs
from anchorage.runtime.kubepod import open_store
from anchorage.runtime.kubestatus import Condition, now_rfc3339

TERMINAL = ("Succeeded", "Failed", "InfrastructureFailed")


def job_name(trial: str, attempt: int) -> str:
    """The Job of attempt ``attempt`` of ``trial``."""
    return dns_label(f"{trial}-a{attempt}")


def condition(type_: str, status: str, reason: str, message: str = "", generation: int | None = None) -> dict[str, Any]:
    """A metav1.Condition as a dict."""
    return Condition(type=type_, status=status, reason=reason, message=message,
                     observed_generation=generation, last_transition_time=now_rfc3339()
                     ).model_dump(by_alias=True, exclude_none=True)


@functools.lru_cache(maxsize=256)
def _task_inputs_cached(task_name: str) -> tuple[str, dict[str, float]]:
    from anchorage.tasks import load_task, resolve_task

    task = load_task(resolve_task(task_name))
    env = task.config.environment
    defaults = {"cpus": float(env.cpus), "memory_mb": float(env.memory_mb), "storage_mb": float(env.storage_mb),
                "gpus": float(env.gpus), "agent_timeout_sec": float(task.config.agent.timeout_sec)}
    return task.instruction, defaults


def _task_inputs(spec: TrialSpec) -> tuple[str, dict[str, float]]:
    """The task's instruction and its task.toml limits (loaded once per task by this process)."""
    return _task_inputs_cached(spec.task)


def _launch(body: kopf.Body, spec: TrialSpec, attempt: int) -> None:
    """Record the attempt as Running, then create its Job (the Job's events then find it Running).

    A crash between the two is repaired by ``launch`` on resume, which re-creates a missing Job.
    """
    meta = body["metadata"]
    campaign = (meta.get("labels") or {}).get(kubejobs.LABEL_CAMPAIGN)
    instruction, defaults = _task_inputs(spec)
    cfg = config()
    job = kubejobs.trial_job(dict(body), spec, instruction=instruction, task_defaults=defaults, config=cfg,
                             job_name=job_name(meta["name"], attempt), campaign=campaign)
    if (body.get("status") or {}).get("jobName") != job["metadata"]["name"]:
        prefix = kubejobs.trial_prefix(meta["namespace"], meta["name"], campaign)
        kube.patch_status("trials", meta["namespace"], meta["name"], {
            "phase": "Running", "attempt": attempt, "jobName": job["metadata"]["name"], "startTime": now_rfc3339(),
            "recordUri": f"{cfg.store_uri.rstrip('/')}/{prefix}", "observedGeneration": meta.get("generation"),
            "conditions": [condition("Ready", "False", "Running", "the agent is running", meta.get("generation"))]})
    kube.ensure_policies_once(job["metadata"]["namespace"], cfg)
    kube.create_job(job)


@kopf.on.resume(API_GROUP, API_VERSION, "trials")
@kopf.on.create(API_GROUP, API_VERSION, "trials")
def launch(body: kopf.Body, status: kopf.Status, patch: kopf.Patch, **_: Any) -> None:
    """Start the trial's Job; idempotent (deterministic Job name, 409 = already there).

    A Running trial whose attempt has not uploaded its results gets its Job created again if a crash
    came between recording Running and creating the Job (kopf re-runs create handlers that did not
    finish, and runs resume handlers after a restart).
    """
    if status.get("phase") in TERMINAL:
        return
    if status.get("phase") == "Running" and _read_upload(status.get("recordUri", "")) is not None:
        return  # the attempt ran to its end while we were away (its Job may be gone): the timer finishes it
    try:
        spec = TrialSpec.model_validate(body["spec"])
        # Status is written by us (with retries), not through kopf's patch: a failed write is retried
        # here, and the MODIFIED event it causes brings kopf back to this idempotent handler.
        _launch(body, spec, int(status.get("attempt") or 0))
    except (ValidationError, AnchorageError) as exc:
        patch["status"] = {"phase": "InfrastructureFailed", "reason": "sandbox_error", "message": str(exc),
                           "conditions": [condition("Ready", "False", "InvalidInput", str(exc)[:1000])]}
        metrics.operator_trial_finished(body, "InfrastructureFailed", "sandbox_error")
        raise kopf.PermanentError(f"cannot launch: {exc}") from exc


def _finished(job: kopf.Body) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return "Complete" if cond["type"] == "Complete" else str(cond.get("reason") or "Failed")
    return None


def _outcome(result: str, upload: dict[str, Any] | None) -> tuple[str, str, int | None]:
    """(phase, reason, exit code) of a finished attempt."""
    if result == "DeadlineExceeded":
        return "Failed", "timeout", None
    if upload is None:
        return "InfrastructureFailed", "storage_error" if result == "Complete" else "sandbox_error", None
    code = upload.get("exit_code")
    if code is None:
        return "InfrastructureFailed", "sandbox_error", None
    if code == 0:
        return ("Succeeded", "completed", 0) if (upload.get("files") or {}).get("artifacts") else \
            ("Failed", "no_artifact", 0)
    return "Failed", "oom" if code == 137 else "agent_error", int(code)


def _read_upload(record_uri: str) -> dict[str, Any] | None:
    cfg = config()
    key = record_uri.removeprefix(cfg.store_uri.rstrip("/")).strip("/") + "/upload.json"
    try:
        data: dict[str, Any] = json.loads(open_store(cfg.store_uri).get_bytes(key))
    except (OSError, KeyError, ValueError):
        return None
    return data


def finish(trial: dict[str, Any], job: kopf.Body, result: str) -> None:
    """Record the attempt's outcome; retry an infrastructure failure or create the ScoringRun."""
    meta, status = trial["metadata"], trial.get("status") or {}
    spec = TrialSpec.model_validate(trial["spec"])
    phase, reason, code = _outcome(result, _read_upload(status.get("recordUri", "")))
    attempt = int(status.get("attempt") or 0)
    ns, name = meta["namespace"], meta["name"]
    if phase == "InfrastructureFailed" and attempt < spec.retries:
        _launch(kopf.Body(cast(kopf.RawBody, {**trial, "status": {}})), spec, attempt + 1)
        return
    new: dict[str, Any] = {"phase": phase, "reason": reason, "exitCode": code, "completionTime": now_rfc3339(),
                           "costUSD": 0.0,
                           "conditions": [condition("Ready", "True" if phase == "Succeeded" else "False",
                                                    phase, f"agent ended: {reason}", meta.get("generation"))]}
    if phase != "InfrastructureFailed":
        run = scoring_run_name(name)
        verification = spec.verification.model_dump(by_alias=True, exclude_none=True, mode="json")
        kube.create_custom("scoringruns", kubejobs.child_scoring_run(trial, run, verification))
        new["scoringRun"] = run
    kube.patch_status("trials", ns, name, new)
    metrics.operator_trial_finished(trial, phase, reason)


@kopf.on.event("batch", "v1", "jobs", labels={kubejobs.LABEL_ROLE: "trial", **kubejobs.MANAGED_BY})
def trial_job_event(type: str, body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    """A trial Job changed: when it has ended, finish its Trial (once: the Trial's status says so)."""
    result = _finished(body) if type != "DELETED" else None
    if result is None:
        return
    labels, annotations = body["metadata"].get("labels") or {}, body["metadata"].get("annotations") or {}
    ns = annotations.get("anchorage.dev/trial-namespace", body["metadata"]["namespace"])
    trial = kube.get_custom("trials", ns, labels[kubejobs.LABEL_TRIAL])
    if trial is None:
        return
    status = trial.get("status") or {}
    if status.get("phase") != "Running" or status.get("jobName") != body["metadata"]["name"]:
        return
    try:
        finish(trial, body, result)
    except kopf.TemporaryError as exc:
        logger.warning(f"finishing trial {trial['metadata']['name']} failed, will retry on the next event: {exc}")


def check_running(trial: dict[str, Any]) -> None:
    """Finish a Running trial whose Job ended (or vanished) without us seeing the event."""
    status = trial.get("status") or {}
    if status.get("phase") != "Running":
        return
    ns = config().trials_namespace or trial["metadata"]["namespace"]
    job = kube.get_job(ns, status.get("jobName") or "")
    if job is None and _read_upload(status.get("recordUri", "")) is None:
        # Never created (a crash between recording Running and creating it) or deleted before it ran
        # to its end: create it (same deterministic name, so at most one Job per attempt exists).
        _launch(kopf.Body(cast(kopf.RawBody, trial)), TrialSpec.model_validate(trial["spec"]),
                int(status.get("attempt") or 0))
        return
    result = "JobLost" if job is None else _finished(kopf.Body(cast(kopf.RawBody, job)))
    if result is not None:
        finish(trial, kopf.Body(cast(kopf.RawBody, job or {})), result)


# Safety net for lost Job events. Timers make kopf put a finalizer on the object (two more writes),
# so campaign Trials get this check from their campaign's tick instead (``campaigns.sweep``).
@kopf.timer(API_GROUP, API_VERSION, "trials", interval=10, initial_delay=10, idle=5,
            labels={kubejobs.LABEL_CAMPAIGN: kopf.ABSENT},
            when=lambda status, **_: status.get("phase") == "Running")
def watch_running(body: kopf.Body, **_: Any) -> None:
    """Lone Running trials: check their Job every 10 s."""
    check_running(dict(body))
