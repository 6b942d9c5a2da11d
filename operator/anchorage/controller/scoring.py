"""ScoringRun handlers: launch the verifier Job; when it ends, publish the run's scores.

Registered by importing ``anchorage.controller``. One status write per run, when it is scored (the
verifier Job's name is deterministic, ``<run>-verify``, so no "Running" write is needed to find it).
A run writes only its own status: a trial's run ending is for the *trial's* handler
(:func:`anchorage.controller.finishing.run_ended`), which writes the Trial's final status and its
``trial.json`` — called in the same worker call right after this process published the scores, else from the
run's event. Likewise a trial's run created by this process gets its verifier in the worker call that created it
(:func:`start_created`); its own event starts it otherwise. Runs are driven by watch events, like Trials (see
``anchorage.controller.trials``).
Sources: ``trialRef`` (the trial's uploaded results), ``artifacts`` (external artifacts, e.g.
third-party runs: rescored with the same scorer) and ``campaignRef`` (every trial of a campaign,
rescored). The post-agent steps the verifier runs are the lifecycle core's
(:mod:`anchorage.trials.pipeline`); a step the operator cannot run is refused at admission.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from anchorage.campaigns.aggregation import TrialResult, leaderboard
from anchorage.controller import finalizers, kube
from anchorage.controller.caches import RUNS, TRIALS, Once, Watchdog
from anchorage.controller.finishing import run_ended
from anchorage.controller.jobends import first_end, job_result
from anchorage.controller.settings import config, store
from anchorage.controller.trialstate import condition, typed
from anchorage.errors import InputError
from anchorage.manifests import ScoringRunSpec
from anchorage.runtime.kube import jobs, rescoring
from anchorage.runtime.kube.conditions import lifecycle
from anchorage.runtime.kube.scores import SCORES_FILE, run_status, scores_lines
from anchorage.runtime.kube.status import LeaderboardRow, ScoringRunStatus
from anchorage.scoring.profiles import get_profile
from anchorage.scoring.records import ScoreRecord
from anchorage.trials.agents import OPERATOR
from anchorage.trials.pipeline import protocol_steps, refusals

FINAL = ("Succeeded", "Failed")


def _key(uri: str) -> str:
    """A store key from a URI under the store root (keys are relative to it)."""
    return uri.removeprefix(config().store_uri.rstrip("/")).strip("/")


def _trial_items(trial: dict[str, Any], out: str | None = None) -> dict[str, Any]:
    status = trial.get("status") or {}
    prefix = _key(status.get("recordUri", ""))
    if not prefix:
        raise kopf.TemporaryError(f"trial {trial['metadata']['name']} has no record yet", delay=5)
    return {"uri": f"{prefix}/artifacts", "entry": trial["spec"].get("entry") or trial["metadata"]["name"],
            "seed": trial["spec"].get("seed", 0), "out": out if out is not None else prefix}


def _sources(ns: str, name: str, spec: ScoringRunSpec) -> tuple[str, list[dict[str, Any]], str]:
    """(task, artifact items, output prefix) of a ScoringRun."""
    if spec.trial_ref:
        trial = kube.get_custom("trials", ns, spec.trial_ref)
        if trial is None:
            raise InputError(f"trialRef {spec.trial_ref!r} does not exist in namespace {ns}",
                             hint="create the Trial first or fix spec.trialRef")
        item = _trial_items(trial, out="")
        return trial["spec"]["task"], [item], item["uri"].rsplit("/", 1)[0]
    out = f"_scoring/{ns}/{name}"
    if spec.artifacts:
        items = [{"uri": a.uri, "entry": a.entry, "seed": a.seed, "out": f"{a.entry}-s{a.seed}"} for a in spec.artifacts]
        return spec.task or "", items, out
    campaign = kube.get_custom("verificationcampaigns", ns, spec.campaign_ref or "")
    if campaign is None:
        raise InputError(f"campaignRef {spec.campaign_ref!r} does not exist in namespace {ns}",
                         hint="fix spec.campaignRef (the campaign's trials are rescored from the store)")
    task, items = rescoring.campaign_items(campaign, spec.task, store())
    return task, items, out


def _run_sources(run: Mapping[str, Any], spec: ScoringRunSpec) -> tuple[str, list[dict[str, Any]], str]:
    """:func:`_sources`, reading a trial's body from the watched ones when it has its record folder."""
    meta = run["metadata"]
    if spec.trial_ref:
        trial = TRIALS.current(meta["namespace"], spec.trial_ref,
                                      lambda t: bool((t.get("status") or {}).get("recordUri")))
        if trial is not None:
            item = _trial_items(trial, out="")
            return trial["spec"]["task"], [item], item["uri"].rsplit("/", 1)[0]
    return _sources(meta["namespace"], meta["name"], spec)


def verifier_job_name(run: Mapping[str, Any]) -> str:
    """The verifier Job of a run (the name ``kube.jobs.verifier_job`` gives it)."""
    return jobs.verifier_job_name(run["metadata"]["name"])


def start(run: dict[str, Any]) -> None:
    """Create the verifier Job (``<run>-verify``; 409 = already there); a lone run first gets the finalizer
    (``controller.finalizers``) and its ``Running`` status. A run being deleted is never started.

    Raises InputError/ValidationError for a run that cannot be scored.
    """
    if finalizers.leaving(run):
        return
    spec = ScoringRunSpec.model_validate(run["spec"])
    refused = refusals(spec.verification, OPERATOR)
    if spec.trial_ref is None:  # panel and CBU run as the Trial's own steps (its pods, its tokens), never here
        refused += [f"spec.verification.{step.name} runs as a step of a Trial (its own pod and gateway token), not "
                    "on a ScoringRun's artifacts or campaignRef: set it on the Trial or the campaign"
                    for step in protocol_steps(spec.verification)]
    if refused:
        raise InputError("; ".join(refused), hint="docs/architecture.md lists the steps each driver runs")
    task, items, out = _run_sources(run, spec)
    if spec.trial_ref is None:  # a lone run (a trial's has its finalizer from its creation): held, Running
        run = dict(finalizers.hold_run(run))
        _running(run)
    kube.create_job(jobs.verifier_job(run, task=task, artifacts=items, out=out, config=config(),
                                      baseline=spec.baseline, gates=spec.verification.gates,
                                      lean=spec.verification.lean, profile=spec.scoring.profile))


def _running(run: Mapping[str, Any]) -> None:
    """A lone run's ``Running`` status (kstatus then reads it InProgress until its end; a trial's run is followed
    through its trial, whose status says Running: no write for it)."""
    meta = run["metadata"]
    if (run.get("status") or {}).get("phase") == "Running":
        return
    generation = meta.get("generation")
    message = "the verifier is scoring"
    running = ScoringRunStatus(phase="Running", job_name=verifier_job_name(run), observed_generation=generation,
                               conditions=typed([condition("Ready", "False", "Running", message, generation),
                                                 *lifecycle("working", "Running", message, generation)]))
    kube.patch_status("scoringruns", meta["namespace"], meta["name"], running.patch())


def launch(run: dict[str, Any]) -> None:
    """Start the verifier (see :func:`start`); a run that cannot be scored ends Failed."""
    meta = run["metadata"]
    try:
        start(run)
    except (ValidationError, InputError) as exc:
        generation = meta.get("generation")
        failed = ScoringRunStatus(phase="Failed", message=str(exc), observed_generation=generation, conditions=typed([
            condition("Ready", "False", "InvalidInput", str(exc)[:1000], generation),
            *lifecycle("failed", "InvalidInput", str(exc)[:1000], generation)]))
        kube.patch_status("scoringruns", meta["namespace"], meta["name"], failed.patch())
        kube.post_event(run, "Warning", "InvalidInput", str(exc))
        raise kopf.PermanentError(str(exc)) from exc


#: Runs this process started and verifier Jobs whose end it handled.
_STARTED, _ENDED = Once(), Once()
#: Trial runs whose end this process passed to the trial's handler.
_TRIAL_ENDED = Once()


async def on_run_event(type: str | None, body: Mapping[str, Any]) -> None:
    """A ScoringRun's watch event (``anchorage.controller.watching``; ``type`` None for a listed run): a new run —
    start its verifier; a listed unfinished one (at startup) — check it; a trial's run that ended — end the trial."""
    meta, status = body["metadata"], body.get("status") or {}
    ended = WATCHDOG.note(type, body, status.get("phase"), FINAL)
    RUNS.note(body, ended)
    if finalizers.finalizing(body):  # being deleted: its verifier Job stopped, then it goes
        await finalizers.finalize(finalizers.run_deleted, body)
        return
    uid = meta["uid"]
    if ended:
        # Not for the initial listing (type None): a trial still waiting for its run is repaired by its own
        # listing event (no GET of the trial of every finished run after a restart).
        if type not in ("DELETED", None) and status.get("phase") in FINAL and (body.get("spec") or {}).get("trialRef") \
                and _TRIAL_ENDED.first(uid):
            try:
                await kube.in_thread(run_ended, dict(body))  # the trial's handler ends the trial
            except kopf.TemporaryError:
                _TRIAL_ENDED.forget(uid)
                raise
        return
    if type is None:
        await kube.in_thread(check_running, dict(body))
    elif _STARTED.first(uid):
        try:
            await kube.in_thread(launch, dict(body))
        except kopf.TemporaryError:
            _STARTED.forget(uid)  # the next event, the sweep or the timer tries again
            raise


def start_created(run: dict[str, Any]) -> None:
    """Start the verifier of a run this process has just created (:func:`anchorage.controller.attempts.conclude`):
    one worker call less than waiting for the run's event. A failure is logged; the run's event (when it comes later)
    or the repair path (the campaign's sweep, the watchdog) starts it then."""
    uid = str(run["metadata"].get("uid"))
    if not _STARTED.first(uid):
        return
    try:
        launch(run)
    except kopf.TemporaryError as exc:
        _STARTED.forget(uid)
        logging.getLogger(__name__).warning(f"starting the verifier of {run['metadata']['name']} failed: {exc}")
    except kopf.PermanentError as exc:  # launch wrote the run's end (Failed): the trial's handler ends the trial
        logging.getLogger(__name__).warning(f"scoring run {run['metadata']['name']}: {exc}")


@dataclasses.dataclass(frozen=True, slots=True)
class _Scored:
    """One artifact of a run and its score record, read once from the store (None: none at ``key``, or not a score
    record — the artifact counts as unscored)."""

    entry: str
    seed: int
    artifact: str
    key: str
    score: ScoreRecord | None

    @property
    def ok(self) -> bool:
        """Whether the scorer gave it an O-Eval (a run succeeds when every artifact has one)."""
        return self.score is not None and self.score.o_eval is not None

    def summary(self) -> dict[str, Any]:
        """Its summary as the status and :data:`~anchorage.runtime.kube.scores.SCORES_FILE` take it."""
        score = self.score
        return {"entry": self.entry, "seed": self.seed, "artifact": self.artifact,
                "raw": None if score is None else score.raw, "oEval": None if score is None else score.o_eval,
                "boEval": None if score is None else score.bo_eval, "gradable": bool(score and score.gradable),
                "recordUri": self.key, "unscored": score is None}


def _scored(items: list[dict[str, Any]], out: str) -> list[_Scored]:
    """The score record of every artifact (``<out>/<item out>/score.json``), read once as the model."""
    records = store()
    scored = []
    for item in items:
        key = "/".join(p for p in (out, item["out"], "score.json") if p)
        try:
            score: ScoreRecord | None = ScoreRecord.from_dict(json.loads(records.get_bytes(key)))
        except (OSError, KeyError, ValueError, RecursionError):
            score = None
        scored.append(_Scored(item["entry"], item["seed"], item["uri"], key, score))
    return scored


def finish(run: dict[str, Any], result: str) -> dict[str, Any] | None:
    """Publish the scores of a finished verifier Job in the run's status (its only write); the status written
    (None: the run is gone)."""
    meta = run["metadata"]
    spec = ScoringRunSpec.model_validate(run["spec"])
    task, items, out = _run_sources(run, spec)
    scored = _scored(items, out)
    ok = result == "Complete" and all(s.ok for s in scored)
    scores = [s.summary() for s in scored]
    first = scores[0] if scores else {}
    board = _campaign_board(run, spec, task, scored, out) if spec.campaign_ref else []
    root = config().store_uri.rstrip("/")
    scores_uri = None
    if not spec.trial_ref:  # every artifact's summary in the store; the status keeps counts and the first few
        key = "/".join(p for p in (out, SCORES_FILE) if p)
        store().put_bytes(key, scores_lines(scores))
        scores_uri = f"{root}/{key}"
    done = run_status(
        scores=scores, ok=ok, result=result, job_name=verifier_job_name(run), record_uri=f"{root}/{out}",
        scores_uri=scores_uri, profile=get_profile(spec.scoring.profile).ref, leaderboard=board,
        generation=meta.get("generation"))
    published = done.patch()
    if not kube.patch_status("scoringruns", meta["namespace"], meta["name"], published):
        return None
    if not ok:
        kube.post_event(run, "Warning", "VerifierFailed", f"verifier job ended: {result}")
    elif not spec.trial_ref:  # a trial's run is announced by its trial
        kube.post_event(run, "Normal", "Scored", f"{len(scores)} artifact(s) scored; O-Eval of the first "
                        f"{first.get('oEval')}")
    return published


def _campaign_board(run: Mapping[str, Any], spec: ScoringRunSpec, task: str, scored: list[_Scored],
                    out: str) -> list[LeaderboardRow]:
    """campaignRef: the rescored task's leaderboard under the run's profile (F: the campaign's baseline
    entry), written beside the score records and summarised in the status."""
    campaign = kube.get_custom("verificationcampaigns", run["metadata"]["namespace"], spec.campaign_ref or "") or {}
    baseline = (campaign.get("spec") or {}).get("baseline")
    results = [TrialResult.rescored(s.entry, task, s.seed, s.score, spec.scoring.profile) for s in scored]
    board = leaderboard(results, baseline)
    store().put_bytes("/".join(p for p in (out, "leaderboard.json") if p),
                      json.dumps(dataclasses.asdict(board), indent=1).encode())
    return [LeaderboardRow.model_validate({"entry": r.entry, "oEval": r.o_eval_mean, "oEvalStd": r.o_eval_std,
                                           "boEval": r.bo_eval_mean, "boEvalStd": r.bo_eval_std,
                                           "artifacts": None if r.artifacts_mean is None
                                           else f"{r.artifacts_mean:g}/{r.tasks}"}) for r in board.rows]


async def on_verifier_job(type_: str, body: Mapping[str, Any]) -> None:
    """A verifier Job's watch event (``anchorage.controller.watching``): when it has ended, publish the scores
    (once). Not for the initial listing: an unfinished run's own listing event checks its Job."""
    result = first_end(type_, body, _ENDED)
    if result is not None:
        await kube.in_thread(_job_ended, dict(body), result, logging.getLogger(__name__))


def _job_ended(job: dict[str, Any], result: str, logger: logging.Logger) -> None:
    annotations = job["metadata"].get("annotations") or {}
    ns = annotations.get("anchorage.dev/scoring-run-namespace", job["metadata"]["namespace"])
    run = RUNS.current(ns, jobs.named(job["metadata"], jobs.LABEL_SCORING) or "", _unfinished)
    if run is None or (run.get("status") or {}).get("phase") in FINAL:
        return
    try:
        published = finish(run, result)
    except kopf.TemporaryError as exc:
        _ENDED.forget(str(job["metadata"].get("uid")))
        logger.warning(f"publishing scores of {run['metadata']['name']} failed; the sweep or the timer retries: {exc}")
        return
    uid = str(run["metadata"].get("uid"))
    if published is not None and (run.get("spec") or {}).get("trialRef") and _TRIAL_ENDED.first(uid):
        # The trial's end right away, in this thread (the run's own event then finds it done): one hop less.
        try:
            run_ended({**run, "status": {**(run.get("status") or {}), **published}})
        except kopf.TemporaryError as exc:
            _TRIAL_ENDED.forget(uid)
            logger.warning(f"ending the trial of {run['metadata']['name']} failed; the sweep or the watchdog "
                           f"retries: {exc}")


def _unfinished(run: Mapping[str, Any]) -> bool:
    return (run.get("status") or {}).get("phase") not in FINAL


def check_running(run: dict[str, Any]) -> None:
    """Start or publish an unfinished run whose verifier Job events were lost (or never came)."""
    if (run.get("status") or {}).get("phase") in FINAL:
        return
    job = kube.get_job(config().trials_namespace or run["metadata"]["namespace"], verifier_job_name(run))
    if job is None:
        try:
            _, _, out = _run_sources(run, ScoringRunSpec.model_validate(run["spec"]))
        except (ValidationError, InputError):
            out = None
        if out is None or not store().exists(f"{out}/verifier-upload.json"):
            launch(run)  # never created (or deleted before it ran to its end)
            return
    result = "JobLost" if job is None else job_result(job)
    if result is not None:
        finish(run, result)


def _check_lone(namespace: str, name: str) -> bool:
    run = kube.get_custom("scoringruns", namespace, name)
    if run is None or (run.get("status") or {}).get("phase") in FINAL:
        return False
    check_running(run)
    return True


#: Lone (campaign-less) runs, checked when their events stop coming (see ``caches.Watchdog``).
WATCHDOG = Watchdog("scoring run", _check_lone)


@kopf.on.cleanup()
async def stop_watchdog(**_: Any) -> None:
    """Stop the lone runs' watchdog with the operator."""
    WATCHDOG.stop()
