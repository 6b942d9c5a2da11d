"""VerificationCampaign handlers: create Trials lazily up to ``parallelism``, then aggregate.

Registered by importing ``anchorage.controller``. The matrix comes from the shared planner
(``anchorage.campaigns.planning.plan``), the leaderboard from the shared aggregation
(``anchorage.campaigns.aggregation.leaderboard``) over the same ``trial.json`` records the local
engine writes, so both drivers rank alike. Trials are found through a kopf index (no extra list
calls); a Trial counts as active until it is scored or ended as an infrastructure failure, so the
cluster never holds more than ``parallelism`` of the campaign's pods. ``spec.suspend`` stops new
Trials (running ones finish). Deleting the campaign deletes its Trials (owner references), and
those their Jobs and ScoringRuns. The status's ``costUSD`` sums the *known* trial costs; a trial whose
usage could not be read at the gateway (``costUnknownReason``) is counted in ``costsUnknown`` instead of
as 0, so a nonzero count marks ``costUSD`` as a lower bound (likewise per compact leaderboard row).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Iterable
from typing import Any

import kopf
from pydantic import ValidationError

from anchorage import metrics
from anchorage.campaigns.aggregation import TrialResult, leaderboard
from anchorage.campaigns.planning import PlannedTrial, plan
from anchorage.campaigns.selection import campaign_task_names
from anchorage.controller import kube, scoring, trials
from anchorage.controller.settings import config, store
from anchorage.controller.trials import condition
from anchorage.errors import InputError
from anchorage.manifests import API_GROUP, API_VERSION, CampaignSpec
from anchorage.runtime import kubejobs
from anchorage.runtime.kubestatus import CampaignStatus
from anchorage.trials import is_terminal
from anchorage.trials.admission import admit
from anchorage.trials.agents import OPERATOR

INTERVAL = float(os.environ.get("ANCHORAGE_CAMPAIGN_INTERVAL", "2"))
SWEEP_SEC = float(os.environ.get("ANCHORAGE_SWEEP_INTERVAL", "10"))
#: kopf runs the timer and the change handlers of one campaign concurrently (sync handlers in its
#: thread pool); one pass at a time keeps ``_CREATED`` and the parallelism count consistent.
_PASS_LOCK = threading.Lock()
#: name, phase, done (scored or ended as an infrastructure failure), cost (None: unknown, the trial's usage could
#: not be read at the gateway), when its last event came (monotonic)
TrialState = tuple[str, str | None, bool, float | None, float]


@kopf.index(API_GROUP, API_VERSION, "trials", labels={kubejobs.LABEL_CAMPAIGN: kopf.PRESENT})
async def trials_by_campaign(name: str, namespace: str | None, labels: kopf.Labels, annotations: kopf.Annotations,
                             status: kopf.Status, **_: Any) -> dict[tuple[str | None, str], TrialState]:
    """(namespace, campaign) → a small tuple per campaign Trial (never its body: 10,000s of them).

    Async although it awaits nothing: kopf runs a sync index function in its thread pool, a thread hop on
    every Trial event for a few dict lookups."""
    phase = status.get("phase")
    done = is_terminal(phase)  # a Trial stays Running until it is scored (or ends InfrastructureFailed)
    cost = None if status.get("costUnknownReason") else float(status.get("costUSD") or 0)
    campaign = annotations.get(kubejobs.LABEL_CAMPAIGN) or labels[kubejobs.LABEL_CAMPAIGN]
    return {(namespace, campaign): (name, phase, done, cost, time.monotonic())}


#: Trials this process created, by campaign uid, until the index shows them: the index sees a new
#: Trial only after its watch event, so without this a pass right after a create would POST it again
#: (a harmless 409, but a wasted write) and count too few active trials.
_CREATED: dict[str, set[str]] = {}
#: By campaign uid: (generation, position in the plan before which every planned Trial exists).
_CURSOR: dict[str, tuple[int, int]] = {}
#: By campaign uid: when the last sweep and the last metrics update ran (monotonic).
_LAST_SWEEP: dict[str, float] = {}
_LAST_METRICS: dict[str, float] = {}
METRICS_SEC = 5.0

_PLANS: dict[tuple[str, int], list[PlannedTrial]] = {}


def _plan(body: kopf.Body, spec: CampaignSpec) -> list[PlannedTrial]:
    """The campaign's matrix, planned once per (uid, generation) by this process."""
    key = (body["metadata"]["uid"], int(body["metadata"].get("generation") or 0))
    if key not in _PLANS:
        _PLANS[key] = plan(body["metadata"]["name"], spec, campaign_task_names(spec))
    return _PLANS[key]


def _forget(uid: str, keep_generation: int | None = None) -> None:
    """Drop what this process keeps about a campaign (all of it, or its plans of other generations)."""
    for key in [k for k in _PLANS if k[0] == uid and k[1] != keep_generation]:
        del _PLANS[key]
    if keep_generation is None:
        for cache in (_CREATED, _CURSOR, _LAST_SWEEP, _LAST_METRICS):
            cache.pop(uid, None)


def _create_next(body: kopf.Body, spec: CampaignSpec, names: set[str], active: int) -> int:
    """Create planned Trials that do not exist yet while fewer than ``parallelism`` are active.

    The plan is walked from a cursor (everything before it exists), so a pass costs what it creates,
    not the campaign's size.
    """
    meta = body["metadata"]
    uid, generation = meta["uid"], int(meta.get("generation") or 0)
    mine = _CREATED.setdefault(uid, set())
    mine.intersection_update([n for n in mine if n not in names])  # keep only those not yet indexed
    active += len(mine)
    planned = _plan(body, spec)
    gen, pos = _CURSOR.get(uid, (generation, 0))
    if gen != generation or (pos >= len(planned) and len(names) + len(mine) < len(planned)):
        pos = 0  # a new generation, or a Trial was deleted: walk the plan again
    created = 0
    while pos < len(planned) and active < spec.parallelism:
        name = planned[pos].name
        if name not in names and name not in mine:
            kube.create_custom("trials", kubejobs.child_trial(dict(body), name, planned[pos].spec))
            mine.add(name)
            active += 1
            created += 1
        pos += 1
    _CURSOR[uid] = (generation, pos)
    return created


def _results(body: kopf.Body, spec: CampaignSpec, states: dict[str, TrialState]) -> list[TrialResult]:
    records = store()
    name = body["metadata"]["name"]
    costs = {e.name: e.cost_per_run_usd for e in spec.entries}
    results = []
    for planned in _plan(body, spec):
        try:
            record = json.loads(records.get_bytes(f"{name}/{planned.name}/trial.json"))
        except (OSError, KeyError, ValueError):
            phase = states.get(planned.name, ("", "InfrastructureFailed", True, 0.0, 0.0))[1]
            record = {"entry": planned.entry, "task": planned.task, "seed": planned.seed, "phase": phase, "score": {}}
        if costs.get(planned.entry) is not None:
            record["cost_usd"] = costs[planned.entry]
        results.append(TrialResult.from_record(record))
    return results


def _publish(body: kopf.Body, spec: CampaignSpec, states: dict[str, TrialState]) -> dict[str, Any]:
    board = leaderboard(_results(body, spec, states), spec.baseline)
    name = body["metadata"]["name"]
    key = f"{name}/leaderboard.json"
    store().put_bytes(key, json.dumps(dataclasses.asdict(board), indent=1).encode())
    rows = [{"entry": r.entry, "oEval": r.o_eval_mean, "oEvalStd": r.o_eval_std, "boEval": r.bo_eval_mean,
             "boEvalStd": r.bo_eval_std, "artifacts": f"{r.artifacts_mean:g}/{r.tasks}",
             "costUSD": r.cost_per_seed_usd, "costsUnknown": r.costs_unknown,
             "unmeteredRequests": r.unmetered_requests} for r in board.rows]
    best = board.rows[0] if board.rows else None
    return {"leaderboard": rows, "bestEntry": best.entry if best else None,
            "bestOEval": best.o_eval_mean if best else None,
            "reportUri": f"{config().store_uri.rstrip('/')}/{key}"}


def _repair(ns: str, name: str, phase: str | None) -> None:
    if is_terminal(phase):
        return
    trial = kube.get_custom("trials", ns, name)
    run = trials.repair(trial) if trial is not None else None
    if run is not None:
        scoring.check_running(run)


def sweep(body: kopf.Body, states: Iterable[TrialState], logger: logging.Logger | None = None) -> None:
    """Every ``SWEEP_SEC``: move on the campaign's unfinished trials that had no event for that long.

    A trial not launched yet (its launch failed), or Running with its Job or its ScoringRun's verifier
    Job ended or gone without us seeing the event: what kopf's create/resume handlers and the lone
    trials' timer do for other objects.
    """
    uid, now = body["metadata"]["uid"], time.monotonic()
    if now - _LAST_SWEEP.get(uid, 0.0) < SWEEP_SEC:
        return
    _LAST_SWEEP[uid] = now
    ns = body["metadata"]["namespace"]
    for name, phase, done, _, seen in states:
        if done or now - seen < SWEEP_SEC:
            continue
        try:
            _repair(ns, name, phase)
        except (kopf.PermanentError, kopf.TemporaryError) as exc:  # one trial's trouble stops no other
            (logger or logging.getLogger(__name__)).warning(f"sweeping trial {name}: {exc}")


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
    try:
        for entry in spec.entries:  # what the operator cannot run is refused before any Trial exists
            admit(entry.agent, spec.verification, OPERATOR)
        _plan(body, spec)  # taskSelector resolution (campaigns.selection) can fail: say so, retry next tick
    except InputError as exc:
        failed = {"phase": "Failed", "conditions": [condition("Ready", "False", "InvalidTasks", str(exc)[:1000],
                                                              meta.get("generation"))]}
        return {} if status.get("phase") == "Failed" else CampaignStatus.model_validate(failed).patch()
    states = index.get((meta["namespace"], meta["name"]), ())
    names: set[str] = set()
    active = done = infra = unknown = 0
    cost = 0.0
    for name, phase, finished, trial_cost, _ in states:
        names.add(name)
        if finished:
            done += 1
            infra += phase == "InfrastructureFailed"
        else:
            active += 1
        if trial_cost is None:
            unknown += 1  # never summed as 0: costUSD is then the known part, costsUnknown says how much is missing
        else:
            cost += trial_cost
    sweep(body, states)
    uid, generation = meta["uid"], int(meta.get("generation") or 0)
    _forget(uid, keep_generation=generation)
    total = len(_plan(body, spec))
    created = 0 if spec.suspend else _create_next(body, spec, names, active)
    now = time.monotonic()
    if now - _LAST_METRICS.get(uid, 0.0) >= METRICS_SEC or done == total:
        _LAST_METRICS[uid] = now
        metrics.campaign_trial_counts(meta["name"], {p.name: p.entry for p in _plan(body, spec)},
                                      {s[0]: s[1] for s in states})
    new: dict[str, Any] = {
        "total": total, "created": len(names) + created, "running": active + created, "finished": done,
        "scored": done - infra, "infrastructureFailed": infra, "progress": f"{done}/{total}",
        "costUSD": round(cost, 6), "costsUnknown": unknown, "observedGeneration": meta.get("generation"),
        "phase": "Suspended" if spec.suspend else "Running",
    }
    if done == total and total:
        new.update(_publish(body, spec, {s[0]: s for s in states}), phase="Succeeded")
        new["conditions"] = [condition("Ready", "True", "Completed", f"{total} trials scored", meta.get("generation"))]
        _forget(uid)
    elif spec.suspend:
        new["conditions"] = [condition("Suspended", "True", "Suspended", "spec.suspend is true", meta.get("generation"))]
    new = CampaignStatus.model_validate(new).patch()  # typed: what the CRD's schema promises
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
