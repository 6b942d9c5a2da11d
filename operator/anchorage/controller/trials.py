"""The Trial's handler and its repair path: a new Trial is launched (:mod:`~anchorage.controller.launching`); one
found unfinished — at startup, by its campaign's sweep, or by the lone trials' :data:`WATCHDOG` — is brought
forward from wherever a crash or a lost event left it (:func:`repair`).

Registered by importing ``anchorage.controller``. A Trial runs once; only an infrastructure failure is retried, and
only ``spec.retries`` times (each attempt is a new Job ``<trial>-a<N>``). The steps of a Trial's handling are
modules of their own, each below the one that calls it:

- :mod:`~anchorage.controller.launching` — an attempt's start (``Running`` or ``Queued``, then its Job);
- :mod:`~anchorage.controller.attempts` — an attempt's end, from evidence the agent cannot forge
  (:mod:`~anchorage.controller.evidence`), then a retry, the trial's end, or its ScoringRun;
- :mod:`~anchorage.controller.recording` — the attempt's record (the lifecycle core's ``TrialRecord``);
- :mod:`~anchorage.controller.finishing` — after the ScoringRun: protocol steps, then the trial's end, or
  ``Cancelled``;
- :mod:`~anchorage.controller.trialstate` — what they all read of a Trial; :mod:`~anchorage.controller.caches` —
  what the operator holds between events.

The Trial owns its status — no other object's handler writes it. Two status writes per trial:
``Running`` (attempt, Job name) before its Job is created, and the final one, when its ScoringRun has
ended. In between, the attempt's record (the agent's outcome, the evidence, the cost) waits in the trial's own folder
in the store (``attempt.json``), not in the cluster. Trials are driven by watch events (``kopf.on.event``): kopf then
keeps no diff-base or progress annotation on them (one write less per object); what kopf's create/resume handlers
did — retry a failed launch, repair after a restart — is done by :func:`repair`, called for listed objects at
startup, by the campaign's sweep and by the lone trials' :class:`~anchorage.controller.caches.Watchdog` (no kopf
timer: see there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from anchorage.campaigns.names import scoring_run_name
from anchorage.controller import enforcement, finalizers, kube, podevidence, queueing
from anchorage.controller.attempts import finish
from anchorage.controller.caches import RUNS, TRIALS, Once, Watchdog
from anchorage.controller.finishing import deleted, run_ended
from anchorage.controller.jobends import job_result
from anchorage.controller.launching import launch, start_attempt
from anchorage.controller.settings import config, store
from anchorage.controller.trialstate import TERMINAL, read_upload, store_prefix, trial_spec
from anchorage.manifests import API_GROUP, API_VERSION
from anchorage.trials import Phase

#: Trials this process launched.
_LAUNCHED = Once()


def repair(trial: Mapping[str, Any]) -> dict[str, Any] | None:
    """Bring an unfinished trial forward from wherever a crash or a lost event left it.

    Not started yet (or its first write failed): launch it. Running: see :func:`check_running`.
    Returns the trial's ScoringRun when the trial waits for it (the caller may check that one).
    """
    phase = (trial.get("status") or {}).get("phase")
    if not phase or phase == enforcement.WAITING:
        launch(trial)
        return None
    if phase == Phase.QUEUED:
        queueing.check_queued(trial)
        return None
    return check_running(trial)


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
    verdict = podevidence.recorded(store(), store_prefix(status), status.get("jobName") or "")
    if verdict is not None and (job is None or job_result(job) is None):
        # the operator ended this attempt (controller.pods) and was stopped before it finished the trial
        if job is not None:
            kube.delete_job(ns, job["metadata"]["name"])
        finish(dict(trial), job or {}, "Verdict")
        return None
    if job is None and read_upload(status.get("recordUri", "")) is None:
        # Never created (a crash between recording Running and creating it) or deleted before it ran
        # to its end: create it (same deterministic name, so at most one Job per attempt exists).
        start_attempt(trial, trial_spec(trial), int(status.get("attempt") or 0))
        return None
    result = "JobLost" if job is None else job_result(job)
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
