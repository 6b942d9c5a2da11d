"""ScoringRun handlers: launch the verifier Job; when it ends, publish the scores.

Registered by importing ``anchorage.controller``. Sources: ``trialRef`` (the trial's uploaded
results; the score also lands on the Trial's status and in its ``trial.json`` record, which the
campaign aggregates), ``artifacts`` (external artifacts, e.g. third-party runs: rescored with the same
scorer) and ``campaignRef`` (every trial of a campaign, rescored).
"""

from __future__ import annotations

import json
from typing import Any, cast

import kopf
from pydantic import ValidationError

from anchorage import metrics
from anchorage.controller import kube
from anchorage.controller.settings import config
from anchorage.controller.trials import _finished, condition
from anchorage.errors import InputError
from anchorage.manifests import API_GROUP, API_VERSION, ScoringRunSpec
from anchorage.runtime import kubejobs
from anchorage.runtime.kubepod import open_store
from anchorage.runtime.kubestatus import now_rfc3339


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
    raise InputError("campaignRef rescoring is done per task: list the artifacts, or rescore each trial",
                     hint="use spec.artifacts (with the campaign's artifact URIs) or spec.trialRef")


def start(run: dict[str, Any]) -> None:
    """Record Running, then create the verifier Job (``<run>-verify``; 409 = already there).

    A Running run without its upload marker gets its Job created again (a crash between the writes).
    Raises InputError/ValidationError for a run that cannot be scored.
    """
    meta, status = run["metadata"], run.get("status") or {}
    spec = ScoringRunSpec.model_validate(run["spec"])
    task, items, out = _sources(meta["namespace"], meta["name"], spec)
    job = kubejobs.verifier_job(run, task=task, artifacts=items, out=out, config=config(),
                                baseline=spec.baseline, gates=spec.verification.gates)
    if status.get("phase") != "Running":
        kube.patch_status("scoringruns", meta["namespace"], meta["name"], {
            "phase": "Running", "jobName": job["metadata"]["name"], "recordUri": f"{config().store_uri.rstrip('/')}/{out}",
            "observedGeneration": meta.get("generation"),
            "conditions": [condition("Ready", "False", "Scoring", "the verifier is running")]})
    elif open_store(config().store_uri).exists(f"{out}/verifier-upload.json"):
        return  # it ran to its end while we were away: the sweep publishes the scores
    kube.create_job(job)


@kopf.on.resume(API_GROUP, API_VERSION, "scoringruns")
@kopf.on.create(API_GROUP, API_VERSION, "scoringruns")
def launch(body: kopf.Body, status: kopf.Status, patch: kopf.Patch, **_: Any) -> None:
    """Start the verifier (see :func:`start`); a run that cannot be scored ends Failed."""
    if status.get("phase") in ("Succeeded", "Failed"):
        return
    try:
        start(dict(body))
    except (ValidationError, InputError) as exc:
        patch["status"] = {"phase": "Failed", "message": str(exc),
                           "conditions": [condition("Ready", "False", "InvalidInput", str(exc)[:1000])]}
        raise kopf.PermanentError(str(exc)) from exc


def _summaries(run: dict[str, Any], items: list[dict[str, Any]], out: str) -> list[dict[str, Any]]:
    store = open_store(config().store_uri)
    scores = []
    for item in items:
        key = "/".join(p for p in (out, item["out"], "score.json") if p)
        try:
            record = json.loads(store.get_bytes(key))
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
           "cost_usd": status.get("costUSD") or 0.0, "score": record, "driver": "operator"}
    store = open_store(config().store_uri)
    store.put_bytes(f"{out}/trial.json", json.dumps(doc, indent=1).encode())
    store.mark_complete(out)  # written after every other object of the trial (design notes: run folder)


def finish(run: dict[str, Any], result: str) -> None:
    """Publish the scores of a finished verifier Job (and onto the Trial for trialRef runs)."""
    meta = run["metadata"]
    spec = ScoringRunSpec.model_validate(run["spec"])
    if spec.trial_ref:
        trial = kube.get_custom("trials", meta["namespace"], spec.trial_ref)
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
        _write_trial_record(trial, first["_record"], out)
        kube.patch_status("trials", meta["namespace"], trial["metadata"]["name"], {
            "raw": first["raw"], "oEval": first["oEval"], "boEval": first["boEval"], "gradable": first["gradable"],
            "conditions": [*(trial.get("status") or {}).get("conditions", [])[:1],
                           condition("Scored", "True" if ok else "False", "Scored" if ok else "VerifierFailed",
                                     f"O-Eval {first['oEval']}")]})
        metrics.operator_trial_scored(trial, first["oEval"], first["boEval"])
    kube.patch_status("scoringruns", meta["namespace"], meta["name"], {
        "phase": "Succeeded" if ok else "Failed",
        "raw": first.get("raw"), "oEval": first.get("oEval"), "boEval": first.get("boEval"),
        "scores": [{k: v for k, v in s.items() if k != "_record" and v is not None} for s in scores],
        "message": None if ok else f"verifier job ended: {result}",
        "conditions": [condition("Ready", "True" if ok else "False", "Scored" if ok else "VerifierFailed",
                                 f"{len(scores)} artifact(s) scored at {now_rfc3339()}")]})


@kopf.on.event("batch", "v1", "jobs", labels={kubejobs.LABEL_ROLE: "verifier", **kubejobs.MANAGED_BY})
def verifier_job_event(type: str, body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    """A verifier Job changed: when it has ended, publish the scores (once)."""
    result = _finished(body) if type != "DELETED" else None
    if result is None:
        return
    labels, annotations = body["metadata"].get("labels") or {}, body["metadata"].get("annotations") or {}
    ns = annotations.get("anchorage.dev/scoring-run-namespace", body["metadata"]["namespace"])
    run = kube.get_custom("scoringruns", ns, labels[kubejobs.LABEL_SCORING])
    if run is None or (run.get("status") or {}).get("phase") != "Running":
        return
    try:
        finish(run, result)
    except kopf.TemporaryError as exc:
        logger.warning(f"publishing scores of {run['metadata']['name']} failed; the timer retries: {exc}")


def check_running(run: dict[str, Any]) -> None:
    """Publish a Running run whose verifier Job ended (or vanished) without us seeing the event."""
    status = run.get("status") or {}
    if status.get("phase") != "Running":
        return
    ns = config().trials_namespace or run["metadata"]["namespace"]
    job = kube.get_job(ns, status.get("jobName") or "")
    out = _key(status.get("recordUri", ""))
    if job is None and not open_store(config().store_uri).exists(f"{out}/verifier-upload.json"):
        start(run)
        return
    result = "JobLost" if job is None else _finished(kopf.Body(cast(kopf.RawBody, job)))
    if result is not None:
        finish(run, result)


# Safety net for lost Job events; campaign runs are swept by their campaign (see trials.watch_running).
@kopf.timer(API_GROUP, API_VERSION, "scoringruns", interval=10, initial_delay=10, idle=5,
            labels={kubejobs.LABEL_CAMPAIGN: kopf.ABSENT},
            when=lambda status, **_: status.get("phase") == "Running")
def watch_running(body: kopf.Body, **_: Any) -> None:
    """Lone Running scoring runs: check their Job every 10 s."""
    check_running(dict(body))
