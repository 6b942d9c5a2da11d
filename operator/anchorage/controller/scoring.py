"""ScoringRun handlers: launch the verifier Job; when it ends, publish the scores.

Registered by importing ``anchorage.controller``. One status write per run, when it is scored (the
verifier Job's name is deterministic, ``<run>-verify``, so no "Running" write is needed to find it);
for a trial's run the same pass writes the Trial's final status: the agent's outcome, carried by the
run's annotation ``trials.OUTCOME``, with the scores. Runs are driven by watch events, like Trials
(see ``anchorage.controller.trials``). Sources: ``trialRef`` (the trial's uploaded
results; the score also lands on the Trial's status and in its ``trial.json`` record, which the
campaign aggregates), ``artifacts`` (external artifacts, e.g. third-party runs: rescored with the same
scorer) and ``campaignRef`` (every trial of a campaign, rescored).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from anchorage import metrics
from anchorage.controller import gatewaying, kube, trials
from anchorage.controller.settings import config, store
from anchorage.controller.trials import _finished, condition
from anchorage.errors import InputError
from anchorage.manifests import API_GROUP, API_VERSION, ScoringRunSpec
from anchorage.runtime import kubejobs, kuberescoring
from anchorage.runtime.kubestatus import now_rfc3339

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
    task, items = kuberescoring.campaign_items(campaign, spec.task, store())
    return task, items, out


def _outcome(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """The agent's outcome a trial's run carries (:data:`trials.OUTCOME`), None for other runs."""
    raw = ((run["metadata"].get("annotations") or {}).get(trials.OUTCOME))
    try:
        outcome = json.loads(raw) if raw else None
    except ValueError:
        return None
    return outcome if isinstance(outcome, dict) else None


def _run_sources(run: Mapping[str, Any], spec: ScoringRunSpec) -> tuple[str, list[dict[str, Any]], str]:
    """:func:`_sources`, without reading the Trial when the run says where its results are."""
    source = (_outcome(run) or {}).get("source") or {}
    if spec.trial_ref and source.get("recordUri") and source.get("task"):
        prefix = _key(source["recordUri"])
        return source["task"], [{"uri": f"{prefix}/artifacts", "entry": source.get("entry") or spec.trial_ref,
                                 "seed": source.get("seed", 0), "out": ""}], prefix
    return _sources(run["metadata"]["namespace"], run["metadata"]["name"], spec)


def verifier_job_name(run: Mapping[str, Any]) -> str:
    """The verifier Job of a run (the name ``kubejobs.verifier_job`` gives it)."""
    return f"{run['metadata']['name']}-verify"


def start(run: dict[str, Any]) -> None:
    """Create the verifier Job (``<run>-verify``; 409 = already there).

    Raises InputError/ValidationError for a run that cannot be scored.
    """
    spec = ScoringRunSpec.model_validate(run["spec"])
    task, items, out = _run_sources(run, spec)
    kube.create_job(kubejobs.verifier_job(run, task=task, artifacts=items, out=out, config=config(),
                                          baseline=spec.baseline, gates=spec.verification.gates))


def launch(run: dict[str, Any]) -> None:
    """Start the verifier (see :func:`start`); a run that cannot be scored ends Failed."""
    meta = run["metadata"]
    try:
        start(run)
    except (ValidationError, InputError) as exc:
        failed = condition("Ready", "False", "InvalidInput", str(exc)[:1000])
        outcome = {k: v for k, v in (_outcome(run) or {}).items() if k != "source"}
        trial_ref = (run.get("spec") or {}).get("trialRef")
        if outcome and trial_ref:  # the trial waits for these scores: end it unscored
            kube.patch_status("trials", meta["namespace"], trial_ref, {
                **outcome, "scoringRun": meta["name"], "gradable": False,
                "conditions": [trials.ready_condition(outcome), condition("Scored", "False", "InvalidInput", str(exc)[:1000])]})
        kube.patch_status("scoringruns", meta["namespace"], meta["name"], {
            "phase": "Failed", "message": str(exc), "conditions": [failed]})
        raise kopf.PermanentError(str(exc)) from exc


#: Runs this process started and verifier Jobs whose end it handled.
_STARTED, _ENDED = trials.Once(), trials.Once()
#: Unfinished runs as last watched (the verifier Job's end reads them from here).
RUNS = trials.Latest(lambda namespace, name: kube.get_custom("scoringruns", namespace, name))


@kopf.on.event(API_GROUP, API_VERSION, "scoringruns")
async def run_event(type: str | None, body: kopf.Body, status: kopf.Status, **_: Any) -> None:
    """A new run: start its verifier. At startup (the initial listing) check unfinished ones."""
    meta = body["metadata"]
    ended = WATCHDOG.note(type, body, status.get("phase"), FINAL)
    RUNS.note(body, ended)
    if ended:
        return
    uid = meta["uid"]
    if type is None:
        await kube.in_thread(check_running, dict(body))
    elif _STARTED.first(uid):
        try:
            await kube.in_thread(launch, dict(body))
        except kopf.TemporaryError:
            _STARTED.forget(uid)  # the next event, the sweep or the timer tries again
            raise


def _summaries(run: dict[str, Any], items: list[dict[str, Any]], out: str) -> list[dict[str, Any]]:
    records = store()
    scores = []
    for item in items:
        key = "/".join(p for p in (out, item["out"], "score.json") if p)
        try:
            record = json.loads(records.get_bytes(key))
        except (OSError, KeyError, ValueError):
            record = {"gradable": False, "error": f"no score record at {key}"}
        scores.append({"entry": item["entry"], "seed": item["seed"], "artifact": item["uri"],
                       "raw": record.get("raw"), "oEval": record.get("o_eval"), "boEval": record.get("bo_eval"),
                       "gradable": bool(record.get("gradable")), "recordUri": key, "_record": record})
    return scores


def _write_trial_record(trial: dict[str, Any], record: dict[str, Any], out: str) -> None:
    status = trial.get("status") or {}
    spec = trial["spec"]
    doc = {"name": trial["metadata"]["name"], "entry": spec.get("entry") or trial["metadata"]["name"],
           "task": spec["task"], "seed": spec.get("seed", 0), "phase": status.get("phase"),
           "reason": status.get("reason"), "exit_code": status.get("exitCode"), "attempt": status.get("attempt"),
           **gatewaying.record_fields(status), "score": record, "driver": "operator"}
    records = store()
    records.put_bytes(f"{out}/trial.json", json.dumps(doc, indent=1).encode())
    records.mark_complete(out)  # written after every other object of the trial (design notes: run folder)


def _awaits_scores(source: Mapping[str, Any], trial: Mapping[str, Any]) -> bool:
    """Whether a watched Trial body is the one the run's outcome came from: Running the attempt it names."""
    status = trial.get("status") or {}
    return bool(source.get("jobName")) and status.get("phase") == "Running" and \
        status.get("jobName") == source["jobName"] and status.get("recordUri") == source.get("recordUri")


def finish(run: dict[str, Any], result: str) -> None:
    """Publish the scores of a finished verifier Job; for trialRef runs also the Trial's final status."""
    meta = run["metadata"]
    spec = ScoringRunSpec.model_validate(run["spec"])
    outcome = {k: v for k, v in (_outcome(run) or {}).items() if k != "source"}
    if spec.trial_ref:
        trial = trials.TRIALS.current(meta["namespace"], spec.trial_ref,
                                      functools.partial(_awaits_scores, (_outcome(run) or {}).get("source") or {}))
        if trial is None:
            return
        items, out = [_trial_items(trial, out="")], _key((trial.get("status") or {}).get("recordUri", ""))
    else:
        _, items, out = _sources(meta["namespace"], meta["name"], spec)
        trial = None
    scores = _summaries(run, items, out)
    ok = result == "Complete" and all("error" not in s["_record"] or s["_record"].get("o_eval") is not None
                                      for s in scores)
    first = scores[0] if scores else {}
    if trial is not None and first:
        status = {**(trial.get("status") or {}), **outcome}
        _write_trial_record({**trial, "status": status}, first["_record"], out)
        ready = [trials.ready_condition(outcome, trial["metadata"].get("generation"))] if outcome else \
            (trial.get("status") or {}).get("conditions", [])[:1]
        kube.patch_status("trials", meta["namespace"], trial["metadata"]["name"], {
            **outcome, "scoringRun": meta["name"],
            "raw": first["raw"], "oEval": first["oEval"], "boEval": first["boEval"], "gradable": first["gradable"],
            "conditions": [*ready, condition("Scored", "True" if ok else "False", "Scored" if ok else "VerifierFailed",
                                             f"O-Eval {first['oEval']}")]})
        metrics.operator_trial_scored(trial, first["oEval"], first["boEval"])
    kube.patch_status("scoringruns", meta["namespace"], meta["name"], {
        "phase": "Succeeded" if ok else "Failed", "jobName": verifier_job_name(run),
        "recordUri": f"{config().store_uri.rstrip('/')}/{out}", "observedGeneration": meta.get("generation"),
        "raw": first.get("raw"), "oEval": first.get("oEval"), "boEval": first.get("boEval"),
        "scores": [{k: v for k, v in s.items() if k != "_record" and v is not None} for s in scores],
        "message": None if ok else f"verifier job ended: {result}",
        "conditions": [condition("Ready", "True" if ok else "False", "Scored" if ok else "VerifierFailed",
                                 f"{len(scores)} artifact(s) scored at {now_rfc3339()}")]})


@kopf.on.event("batch", "v1", "jobs", labels={kubejobs.LABEL_ROLE: "verifier", **kubejobs.MANAGED_BY},
               **trials.ENDED_JOBS)
async def verifier_job_event(type: str | None, body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    """A verifier Job changed: when it has ended, publish the scores (once)."""
    result = trials.first_end(type, body, _ENDED)
    if result is not None:
        await kube.in_thread(_job_ended, dict(body), result, logger)


def _job_ended(job: dict[str, Any], result: str, logger: kopf.Logger) -> None:
    labels, annotations = job["metadata"].get("labels") or {}, job["metadata"].get("annotations") or {}
    ns = annotations.get("anchorage.dev/scoring-run-namespace", job["metadata"]["namespace"])
    run = RUNS.current(ns, labels[kubejobs.LABEL_SCORING], _unfinished)
    if run is None or (run.get("status") or {}).get("phase") in FINAL:
        return
    try:
        finish(run, result)
    except kopf.TemporaryError as exc:
        _ENDED.forget(str(job["metadata"].get("uid")))
        logger.warning(f"publishing scores of {run['metadata']['name']} failed; the sweep or the timer retries: {exc}")


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
    result = "JobLost" if job is None else _finished(job)
    if result is not None:
        finish(run, result)


def _check_lone(namespace: str, name: str) -> bool:
    run = kube.get_custom("scoringruns", namespace, name)
    if run is None or (run.get("status") or {}).get("phase") in FINAL:
        return False
    check_running(run)
    return True


#: Lone (campaign-less) runs, checked when their events stop coming (see ``trials.Watchdog``).
WATCHDOG = trials.Watchdog("scoring run", _check_lone)


@kopf.on.cleanup()
async def stop_watchdog(**_: Any) -> None:
    """Stop the lone runs' watchdog with the operator."""
    WATCHDOG.stop()
