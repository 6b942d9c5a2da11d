"""VerificationCampaign handlers: create Trials lazily up to ``parallelism``, then aggregate.

Registered by importing ``anchorage.controller``. The matrix comes from the shared planner
(``anchorage.campaigns.planning.plan``), the leaderboard from the shared aggregation
(``anchorage.campaigns.aggregation.leaderboard``) over the same ``trial.json`` records the local
engine writes, so both drivers rank alike. Trials are found through a kopf index (no extra list
calls); a Trial counts as active until it is scored or ended as an infrastructure failure, so the
cluster never holds more than ``parallelism`` of the campaign's pods. ``spec.suspend`` stops new
Trials (running ones finish). Deleting the campaign deletes its Trials (owner references), and
those their Jobs and ScoringRuns.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from typing import Any

import kopf
from pydantic import ValidationError

from anchorage import metrics
from anchorage.campaigns.aggregation import TrialResult, leaderboard
from anchorage.campaigns.names import scoring_run_name
from anchorage.campaigns.planning import PlannedTrial, plan
from anchorage.controller import kube, scoring, trials
from anchorage.controller.settings import config
from anchorage.controller.trials import condition
from anchorage.manifests import API_GROUP, API_VERSION, CampaignSpec
from anchorage.runtime import kubejobs
from anchorage.runtime.kubepod import open_store

INTERVAL = float(os.environ.get("ANCHORAGE_CAMPAIGN_INTERVAL", "2"))
SWEEP_SEC = float(os.environ.get("ANCHORAGE_SWEEP_INTERVAL", "10"))
_LAST_SWEEP: dict[str, float] = {}
#: kopf runs the timer and the change handlers of one campaign concurrently (sync handlers in its
#: thread pool); one pass at a time keeps ``_CREATED`` and the parallelism count consistent.
_PASS_LOCK = threading.Lock()
TrialState = tuple[str, str | None, bool, float]  # name, phase, done, cost


@kopf.index(API_GROUP, API_VERSION, "trials", labels={kubejobs.LABEL_CAMPAIGN: kopf.PRESENT})
def trials_by_campaign(name: str, namespace: str | None, labels: kopf.Labels, status: kopf.Status,
                       **_: Any) -> dict[tuple[str | None, str], TrialState]:
    """(namespace, campaign) → (trial, phase, done, cost) of every campaign Trial."""
    phase = status.get("phase")
    done = phase == "InfrastructureFailed" or status.get("gradable") is not None
    return {(namespace, labels[kubejobs.LABEL_CAMPAIGN]): (name, phase, done, float(status.get("costUSD") or 0))}


#: Trials this process created, by campaign uid: the index sees a new Trial only after its watch
#: event, so without this a tick right after a create would POST it again (a harmless 409, but a
#: wasted write). Lost on restart, when the index is complete from the initial listing anyway.
_CREATED: dict[str, set[str]] = {}


_PLANS: dict[tuple[str, int], list[PlannedTrial]] = {}


def _plan(body: kopf.Body, spec: CampaignSpec) -> list[PlannedTrial]:
    """The campaign's matrix, planned once per (uid, generation) by this process."""
    key = (body["metadata"]["uid"], int(body["metadata"].get("generation") or 0))
    if key not in _PLANS:
        _PLANS[key] = plan(body["metadata"]["name"], spec, list(spec.tasks))
    return _PLANS[key]


def _create_next(body: kopf.Body, spec: CampaignSpec, existing: dict[str, TrialState], active: int) -> int:
    """Create planned Trials that do not exist yet while fewer than ``parallelism`` are active."""
    created = 0
    mine = _CREATED.setdefault(body["metadata"]["uid"], set())
    mine.intersection_update(n for n in mine if n not in existing)  # keep only those not yet indexed
    active += len(mine)
    for planned in _plan(body, spec):
        if active >= spec.parallelism:
            break
        if planned.name in existing or planned.name in mine:
            continue
        kube.create_custom("trials", kubejobs.child_trial(dict(body), planned.name, planned.spec))
        mine.add(planned.name)
        active += 1
        created += 1
    return created


def _results(body: kopf.Body, spec: CampaignSpec, states: dict[str, TrialState]) -> list[TrialResult]:
    store = open_store(config().store_uri)
    name = body["metadata"]["name"]
    costs = {e.name: e.cost_per_run_usd for e in spec.entries}
    results = []
    for planned in plan(name, spec, list(spec.tasks)):
        try:
            record = json.loads(store.get_bytes(f"{name}/{planned.name}/trial.json"))
        except (OSError, KeyError, ValueError):
            phase = states.get(planned.name, ("", "InfrastructureFailed", True, 0.0))[1]
            record = {"entry": planned.entry, "task": planned.task, "seed": planned.seed, "phase": phase, "score": {}}
        if costs.get(planned.entry) is not None:
            record["cost_usd"] = costs[planned.entry]
        results.append(TrialResult.from_record(record))
    return results


def _publish(body: kopf.Body, spec: CampaignSpec, states: dict[str, TrialState]) -> dict[str, Any]:
    board = leaderboard(_results(body, spec, states), spec.baseline)
    name = body["metadata"]["name"]
    key = f"{name}/leaderboard.json"
    open_store(config().store_uri).put_bytes(key, json.dumps(dataclasses.asdict(board), indent=1).encode())
    rows = [{"entry": r.entry, "oEval": r.o_eval_mean, "oEvalStd": r.o_eval_std, "boEval": r.bo_eval_mean,
             "boEvalStd": r.bo_eval_std, "artifacts": f"{r.artifacts_mean:g}/{r.tasks}",
             "costUSD": r.cost_per_seed_usd} for r in board.rows]
    best = board.rows[0] if board.rows else None
    return {"leaderboard": rows, "bestEntry": best.entry if best else None,
            "bestOEval": best.o_eval_mean if best else None,
            "reportUri": f"{config().store_uri.rstrip('/')}/{key}"}


def sweep(body: kopf.Body, states: dict[str, TrialState]) -> None:
    """Every ``SWEEP_SEC``: finish the campaign's trials and scoring runs whose Job events were lost."""
    uid, now = body["metadata"]["uid"], time.monotonic()
    if now - _LAST_SWEEP.get(uid, 0.0) < SWEEP_SEC:
        return
    _LAST_SWEEP[uid] = now
    ns = body["metadata"]["namespace"]
    for name, phase, done, _ in states.values():
        if phase == "Running":
            trial = kube.get_custom("trials", ns, name)
            if trial is not None:
                trials.check_running(trial)
        elif phase in ("Succeeded", "Failed") and not done:
            run = kube.get_custom("scoringruns", ns, scoring_run_name(name))
            if run is not None:
                scoring.check_running(run)


def reconcile(body: kopf.Body, status: kopf.Status,
              index: kopf.Index[tuple[str | None, str], TrialState]) -> dict[str, Any]:
    """One pass: create what may be created, count, aggregate when everything is scored."""
    with _PASS_LOCK:
        return _reconcile(body, status, index)


def _reconcile(body: kopf.Body, status: kopf.Status,
               index: kopf.Index[tuple[str | None, str], TrialState]) -> dict[str, Any]:
    meta = body["metadata"]
    try:
        spec = CampaignSpec.model_validate(body["spec"])
    except ValidationError as exc:
        raise kopf.PermanentError(f"invalid campaign: {exc}") from exc
    states = {s[0]: s for s in index.get((meta["namespace"], meta["name"]), [])}
    sweep(body, states)
    total = len(spec.entries) * len(spec.tasks) * spec.seeds
    active = sum(1 for s in states.values() if not s[2])
    created = 0 if spec.suspend else _create_next(body, spec, states, active)
    done = sum(1 for s in states.values() if s[2])
    infra = sum(1 for s in states.values() if s[1] == "InfrastructureFailed")
    metrics.campaign_trial_counts(meta["name"], {p.name: p.entry for p in _plan(body, spec)},
                                  {n: s[1] for n, s in states.items()})
    new: dict[str, Any] = {
        "total": total, "created": len(states) + created, "running": active + created, "finished": done,
        "scored": done - infra, "infrastructureFailed": infra, "progress": f"{done}/{total}",
        "costUSD": round(sum(s[3] for s in states.values()), 6), "observedGeneration": meta.get("generation"),
        "phase": "Suspended" if spec.suspend else "Running",
    }
    if done == total and total:
        new.update(_publish(body, spec, states), phase="Succeeded")
        new["conditions"] = [condition("Ready", "True", "Completed", f"{total} trials scored", meta.get("generation"))]
    elif spec.suspend:
        new["conditions"] = [condition("Suspended", "True", "Suspended", "spec.suspend is true", meta.get("generation"))]
    if all(status.get(k) == v for k, v in new.items() if k != "conditions"):
        return {}
    return new


@kopf.on.resume(API_GROUP, API_VERSION, "verificationcampaigns")
@kopf.on.create(API_GROUP, API_VERSION, "verificationcampaigns")
@kopf.on.field(API_GROUP, API_VERSION, "verificationcampaigns", field="spec.suspend")
def start(body: kopf.Body, status: kopf.Status, patch: kopf.Patch, **kwargs: Any) -> None:
    """First pass right away on create, resume, and suspend/resume changes."""
    if status.get("phase") != "Succeeded":
        patch.setdefault("status", {}).update(reconcile(body, status, kwargs["trials_by_campaign"]))


@kopf.timer(API_GROUP, API_VERSION, "verificationcampaigns", interval=INTERVAL,
            when=lambda status, **_: status.get("phase") != "Succeeded")
def tick(body: kopf.Body, status: kopf.Status, patch: kopf.Patch, **kwargs: Any) -> None:
    """Periodic pass while the campaign is not finished (``trials_by_campaign`` is kopf's index)."""
    update = reconcile(body, status, kwargs["trials_by_campaign"])
    if update:
        patch.setdefault("status", {}).update(update)
