"""VerificationCampaign handlers: create Trials lazily up to ``parallelism``, then aggregate.

Registered by importing ``anchorage.controller``. The matrix comes from the shared planner
(``anchorage.campaigns.planning.plan``), the leaderboard from the shared aggregation
(``anchorage.campaigns.aggregation.leaderboard``) over the same ``trial.json`` records the local
engine writes, so both drivers rank alike. Trials are found through a kopf index (no extra list
calls); a Trial counts as active until it is scored or ended as an infrastructure failure, so the
cluster never holds more than ``parallelism`` of the campaign's pods. ``spec.suspend`` stops new
Trials (running ones finish). Deleting the campaign deletes its Trials (owner references), and
those their Jobs and ScoringRuns; its metric series go with it (:func:`deleted`), here and at the
gateway. The status's ``costUSD`` sums the *known* trial costs; a trial whose
usage could not be read at the gateway (``costUnknownReason``) is counted in ``costsUnknown`` instead of
as 0, so a nonzero count marks ``costUSD`` as a lower bound (likewise per compact leaderboard row).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import kopf
from pydantic import ValidationError

from anchorage import metrics
from anchorage.campaigns.aggregation import Row, TrialResult, cost_note, leaderboard
from anchorage.campaigns.planning import PlannedTrial, plan
from anchorage.campaigns.selection import campaign_task_names
from anchorage.controller import kube, kueue, metering, scoring, trials
from anchorage.controller.caches import TRIALS, Once
from anchorage.controller.settings import config, store
from anchorage.controller.trialstate import condition
from anchorage.errors import InputError
from anchorage.manifests import API_GROUP, API_VERSION, CampaignSpec
from anchorage.runtime.kube import jobs
from anchorage.runtime.kube.conditions import carry, lifecycle, state_of
from anchorage.runtime.kube.status import CampaignStatus
from anchorage.tasks import resolve_task
from anchorage.trials import is_terminal
from anchorage.trials.admission import admit
from anchorage.trials.agents import OPERATOR
from anchorage.trials.records import TrialRecord, UnreadableRecord, parse_record

INTERVAL = float(os.environ.get("ANCHORAGE_CAMPAIGN_INTERVAL", "2"))
SWEEP_SEC = float(os.environ.get("ANCHORAGE_SWEEP_INTERVAL", "10"))
#: kopf runs the timer and the change handlers of one campaign concurrently; one pass at a time keeps ``_CREATED``
#: and the parallelism count consistent.
_PASS_LOCK = threading.Lock()
#: The passes' own thread: a pass never waits in the queue of the Trial/Job handlers' worker threads.
_PASSES = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="anchorage-campaign")


class TrialState(NamedTuple):
    """What the campaign keeps of each of its Trials (kopf's index: never the Trial's body)."""

    name: str
    phase: str | None
    done: bool                 # scored, or ended as an infrastructure failure
    cost: float | None         # None: unknown (the trial's usage could not be read, or some request was unmetered)
    seen: float                # when its last event came (monotonic)
    unmetered: int = 0         # requests the gateway relayed for it without usage


@kopf.index(API_GROUP, API_VERSION, "trials", labels={jobs.LABEL_CAMPAIGN: kopf.PRESENT})
async def trials_by_campaign(name: str, namespace: str | None, labels: kopf.Labels, annotations: kopf.Annotations,
                             status: kopf.Status, **_: Any) -> dict[tuple[str | None, str], TrialState]:
    """(namespace, campaign) → a small tuple per campaign Trial (never its body: 10,000s of them).

    Async although it awaits nothing: kopf runs a sync index function in its thread pool, a thread hop on
    every Trial event for a few dict lookups."""
    phase = status.get("phase")
    done = is_terminal(phase)  # a Trial stays Running until it is scored (or ends InfrastructureFailed)
    cost = None if status.get("costUnknownReason") else float(status.get("costUSD") or 0)
    campaign = annotations.get(jobs.LABEL_CAMPAIGN) or labels[jobs.LABEL_CAMPAIGN]
    unmetered = int((status.get("usage") or {}).get("unmeteredRequests") or 0)
    _UNSEEN.discard((namespace, name))
    _EVENTS[(namespace, campaign)] += 1
    return {(namespace, campaign): TrialState(name, phase, done, cost, time.monotonic(), unmetered)}


#: Trials this process created, by campaign uid (name → when), until the indexer has seen them: the index sees a new
#: Trial only after its watch event, so without this a pass right after a create would POST it again
#: (a harmless 409, but a wasted write) and count too few active trials.
_CREATED: dict[str, dict[str, float]] = {}
#: (namespace, name) of the Trials in ``_CREATED`` the indexer has not seen yet. The indexer drops a Trial from here
#: on its first event, so one created and deleted between two passes (a loaded machine delays a pass for seconds)
#: leaves ``_CREATED`` too: kept there, it counted as active forever and the campaign created nothing more.
_UNSEEN: set[tuple[str | None, str]] = set()
#: By (namespace, campaign): how many Trial events the indexer has had (a periodic pass runs again after any).
_EVENTS: collections.Counter[tuple[str | None, str]] = collections.Counter()
#: By campaign uid: (generation, position in the plan before which every planned Trial exists).
_CURSOR: dict[str, tuple[int, int]] = {}
#: By campaign uid: when the last sweep and the last metrics update ran (monotonic).
_LAST_SWEEP: dict[str, float] = {}
_LAST_METRICS: dict[str, float] = {}
METRICS_SEC = 5.0

_PLANS: dict[tuple[str, int], list[PlannedTrial]] = {}


def _plan(body: kopf.Body, spec: CampaignSpec) -> list[PlannedTrial]:
    """The campaign's matrix, planned once per (uid, generation) by this process; InputError naming a task the
    operator cannot find (before any Trial exists, not as one failed Trial per seed)."""
    key = (body["metadata"]["uid"], int(body["metadata"].get("generation") or 0))
    if key not in _PLANS:
        names = campaign_task_names(spec)
        missing = []
        for task in names:
            try:
                resolve_task(task)
            except InputError:
                missing.append(task)
        if missing:
            raise InputError(f"unknown task(s) {', '.join(repr(t) for t in missing)}: not among the operator's "
                             "task folders", hint="fix spec.tasks (anchorage tasks list) or the operator's "
                             "--task-source")
        _PLANS[key] = plan(body["metadata"]["name"], spec, names)
        _IN_PLAN[key] = frozenset(p.name for p in _PLANS[key])
    return _PLANS[key]


#: By (uid, generation): the campaign's spec as validated, or why the operator refuses to run it (admission).
_SPECS: dict[tuple[str, int], CampaignSpec | InputError] = {}
#: By (uid, generation): the names of the planned Trials.
_IN_PLAN: dict[tuple[str, int], frozenset[str]] = {}


def _admitted(body: kopf.Body) -> CampaignSpec | InputError:
    """The campaign's spec, validated and its entries admitted once per generation by this process (a pass runs
    every few seconds; the spec changes only with the generation); the refusal when an entry cannot run here."""
    key = (body["metadata"]["uid"], int(body["metadata"].get("generation") or 0))
    known = _SPECS.get(key)
    if known is None:
        try:
            spec = CampaignSpec.model_validate(body["spec"])
        except ValidationError as exc:
            raise kopf.PermanentError(f"invalid campaign: {exc}") from exc
        known = spec
        try:
            for entry in spec.entries:  # what the operator cannot run is refused before any Trial exists
                admit(entry.agent, spec.verification, OPERATOR)
            queue = spec.queue_name or config().kueue_queue
            if queue:  # a queue without Kueue (or without that LocalQueue) is refused before any Trial exists
                kueue.require(queue, config().trials_namespace or body["metadata"]["namespace"])
        except InputError as exc:
            known = exc
        _SPECS[key] = known
    return known


def _forget(uid: str, keep_generation: int | None = None) -> None:
    """Drop what this process keeps about a campaign (all of it, or its plans of other generations)."""
    generations: tuple[dict[tuple[str, int], Any], ...] = (_PLANS, _SPECS, _IN_PLAN)
    for by_generation in generations:
        for key in [k for k in by_generation if k[0] == uid and k[1] != keep_generation]:
            del by_generation[key]
    if keep_generation is None:
        for cache in (_CREATED, _CURSOR, _LAST_SWEEP, _LAST_METRICS, _CHECKED, _IDLE, _STORED):
            cache.pop(uid, None)


def _create_next(body: kopf.Body, spec: CampaignSpec, names: set[str], active: int) -> int:
    """Create planned Trials that do not exist yet while fewer than ``parallelism`` are active.

    The plan is walked from a cursor (everything before it exists), so a pass costs what it creates,
    not the campaign's size.
    """
    meta = body["metadata"]
    uid, generation = meta["uid"], int(meta.get("generation") or 0)
    mine = _unindexed(meta["namespace"], _CREATED.setdefault(uid, {}), names)
    active += len(mine)
    planned = _plan(body, spec)
    gen, pos = _CURSOR.get(uid, (generation, 0))
    stored = _STORED.setdefault(uid, {})
    gone = len([n for n in stored if n not in names])
    if gen != generation or (pos >= len(planned) and len(names) + len(mine) + gone < len(planned)):
        pos = 0  # a new generation, or a Trial was deleted: walk the plan again
    created = 0
    while pos < len(planned) and active < spec.parallelism:
        name = planned[pos].name
        if name not in names and name not in mine and name not in stored:
            ended = _ended_in_store(meta["name"], name)
            if ended is not None:  # deleted after its end, or cancelled: its record stands, it never runs twice
                stored[name] = ended
                pos += 1
                continue
            _UNSEEN.add((meta["namespace"], name))  # before the create: its first event may come before it returns
            try:
                kube.create_custom("trials", jobs.child_trial(dict(body), name, planned[pos].spec))
            except BaseException:
                _UNSEEN.discard((meta["namespace"], name))
                raise
            mine[name] = time.monotonic()
            active += 1
            created += 1
        pos += 1
    _CURSOR[uid] = (generation, pos)
    return created


def _unindexed(namespace: str, mine: dict[str, float], names: set[str]) -> dict[str, float]:
    """``mine`` (Trials this process created for a campaign) without those in the pass's view of the index
    (``names``), nor those the API server no longer has: asked once the indexer has had their event (deleted
    before this pass looked) or once they are :data:`SWEEP_SEC` old unseen (a watch that missed their events).
    The ones left count as active.

    The indexer's event alone does not drop a Trial: the pass took its view of the index before, so a Trial
    whose event came between that view and now is in neither — dropped, it freed a place it still held and the
    pass created past ``parallelism`` (7 active at parallelism 4, seen in CI)."""
    now = time.monotonic()
    for name, created in list(mine.items()):
        drop = name in names  # counted through the index now
        if not drop and ((namespace, name) not in _UNSEEN or now - created >= SWEEP_SEC):
            drop = kube.get_custom("trials", namespace, name) is None
        if drop:
            del mine[name]
            _UNSEEN.discard((namespace, name))
    return mine


#: By campaign uid: planned Trials gone from the cluster whose record says they ended (cancelled ones included),
#: as their record has them (:func:`_ended_in_store`).
_STORED: dict[str, dict[str, TrialState]] = {}


def _stored_record(campaign: str, trial: str) -> TrialRecord | None:
    """A planned Trial's ``trial.json`` from the store, read once as the model; None when there is none, or it is not
    JSON, or it records an unfinished trial this version cannot read (:func:`~anchorage.trials.records.parse_record`).
    A *finished* trial's record this version cannot read (another version's) is a TemporaryError: the pass stops
    (kopf retries it) rather than run the trial again over its result or rank it as unrecorded."""
    key = f"{campaign}/{trial}/trial.json"
    try:
        raw = store().get_bytes(key)
    except (OSError, KeyError, ValueError):
        return None
    try:
        return parse_record(raw, key)
    except UnreadableRecord as exc:
        raise kopf.TemporaryError(str(exc), delay=60) from exc


def _ended_in_store(campaign: str, trial: str) -> TrialState | None:
    """A planned Trial that does not exist: its state from its record in the store when it ended (a trial deleted
    before its end is recorded ``Cancelled`` by ``controller.finalizers``), else None (never created, or deleted before
    it had a record: the campaign creates it). See :func:`_stored_record` for a record that cannot be read."""
    record = _stored_record(campaign, trial)
    if record is None or not is_terminal(record.phase):
        return None
    unmetered = int((record.usage or {}).get("unmetered_requests") or 0)
    return TrialState(trial, record.phase.value, True, record.cost_usd, 0.0, unmetered)


def _results(body: kopf.Body, spec: CampaignSpec, states: dict[str, TrialState]) -> list[TrialResult]:
    """Every planned trial's result from its record; one without a record (see :func:`_stored_record`) has the phase
    its Trial last had (else ``InfrastructureFailed``) and nothing scored. An entry's ``costPerRunUSD`` is its trials'
    cost."""
    name = body["metadata"]["name"]
    costs = {e.name: e.cost_per_run_usd for e in spec.entries}
    results = []
    for planned in _plan(body, spec):
        record = _stored_record(name, planned.name)
        if record is not None:
            result = TrialResult.of(record)
        else:
            known = states.get(planned.name)
            phase = str(known.phase) if known is not None else "InfrastructureFailed"
            result = TrialResult.unrecorded(planned.entry, planned.task, planned.seed, phase)
        cost = costs.get(planned.entry)
        if cost is not None:
            result = dataclasses.replace(result, cost_usd=float(cost), cost_known=True)
        results.append(result)
    return results


def _publish(body: kopf.Body, spec: CampaignSpec, states: dict[str, TrialState]) -> dict[str, Any]:
    board = leaderboard(_results(body, spec, states), spec.baseline)
    name = body["metadata"]["name"]
    metrics.board_scores(name, board)  # the means over every seed, also those scored before a restart
    key = f"{name}/leaderboard.json"
    store().put_bytes(key, json.dumps(dataclasses.asdict(board), indent=1).encode())
    rows = [_row(r) for r in board.rows]
    best = next((r for r in board.rows if r.per_seed), None)  # an entry with nothing scored is never "best"
    return {"leaderboard": rows, "profile": board.profile, "bestEntry": best.entry if best else None,
            "bestOEval": best.o_eval_mean if best else None,
            "reportUri": f"{config().store_uri.rstrip('/')}/{key}"}


def _row(r: Row) -> dict[str, Any]:
    """A compact leaderboard row; an entry with nothing scored has no scores (absent — null in the API's terms —
    not 0 or −1)."""
    scored = bool(r.per_seed)
    row = {"entry": r.entry, "oEval": r.o_eval_mean if scored else None, "oEvalStd": r.o_eval_std if scored else None,
           "boEval": r.bo_eval_mean if scored else None, "boEvalStd": r.bo_eval_std if scored else None,
           "artifacts": None if r.artifacts_mean is None else f"{r.artifacts_mean:g}/{r.tasks}",
           "costUSD": r.cost_per_seed_usd if scored else None,
           "costsUnknown": r.costs_unknown, "unmeteredRequests": r.unmetered_requests,
           "infrastructureFailed": r.infrastructure_failed, "cancelled": r.cancelled, "incomplete": r.incomplete}
    return {k: v for k, v in row.items() if v is not None}  # a null inside a list item is not a deletion


def _repair(ns: str, name: str, phase: str | None) -> None:
    if is_terminal(phase):
        return
    # The watched body (every write decided on it is conditional on its resourceVersion), else a GET.
    trial = TRIALS.current(ns, name, lambda _: True)
    run = trials.repair(trial) if trial is not None else None
    if run is not None:
        scoring.check_running(run)


#: By campaign uid: trial name → (its ``seen`` when the sweep last checked it, the wait before the next check,
#: when that check is due). A trial whose Job runs for hours is checked after 10 s, 20 s, 40 s, ... (at most
#: every :data:`SWEEP_MAX_SEC`), not every 10 s: each check reads its Job.
_CHECKED: dict[str, dict[str, tuple[float, float, float]]] = {}
SWEEP_MAX_SEC = 300.0


def sweep(body: kopf.Body, states: Iterable[TrialState], logger: logging.Logger | None = None) -> None:
    """Every ``SWEEP_SEC``: move on the campaign's unfinished trials that had no event for that long.

    A trial not launched yet (its launch failed), or Running with its Job or its ScoringRun's verifier
    Job ended or gone without us seeing the event: what kopf's create/resume handlers and the lone
    trials' timer do for other objects. A trial still quiet after a check is checked again after twice the
    wait (up to :data:`SWEEP_MAX_SEC`); an event of it starts over.
    """
    uid, now = body["metadata"]["uid"], time.monotonic()
    if now - _LAST_SWEEP.get(uid, 0.0) < SWEEP_SEC:
        return
    _LAST_SWEEP[uid] = now
    ns = body["metadata"]["namespace"]
    checked = _CHECKED.setdefault(uid, {})
    unfinished = set()
    for state in states:
        if state.done:
            continue
        unfinished.add(state.name)
        if now - state.seen < SWEEP_SEC:
            continue
        last = checked.get(state.name)
        if last is not None and last[0] == state.seen and now < last[2]:
            continue  # checked since its last event, the next check is not due yet
        wait = min(2 * last[1], SWEEP_MAX_SEC) if last is not None and last[0] == state.seen else SWEEP_SEC
        checked[state.name] = (state.seen, wait, now + wait)
        try:
            _repair(ns, state.name, state.phase)
        except (kopf.PermanentError, kopf.TemporaryError) as exc:  # one trial's trouble stops no other
            (logger or logging.getLogger(__name__)).warning(f"sweeping trial {state.name}: {exc}")
    for name in [n for n in checked if n not in unfinished]:
        del checked[name]


def snapshot(body: kopf.Body, index: kopf.Index[tuple[str | None, str], TrialState]) -> tuple[TrialState, ...]:
    """The campaign's entry of kopf's index, copied. Call it in the event loop: kopf's indexers change the index
    there on every Trial event, so a worker thread iterating it meanwhile fails ("dictionary changed size during
    iteration") — which failed the timer, and kopf retries a failed timer only after 60 s: the campaign created
    nothing for a minute each time."""
    meta = body["metadata"]
    return tuple(index.get((meta["namespace"], meta["name"]), ()))


async def _pass(body: kopf.Body, status: kopf.Status, states: Sequence[TrialState]) -> dict[str, Any]:
    """A pass (:func:`reconcile`) in the passes' thread over ``states`` (the campaign's :func:`snapshot`)."""
    return await asyncio.get_running_loop().run_in_executor(_PASSES, reconcile, body, status, states)


def reconcile(body: kopf.Body, status: kopf.Status, all_states: Sequence[TrialState]) -> dict[str, Any]:
    """One pass: create what may be created, count, aggregate when everything is scored (``all_states``: the
    campaign's :func:`snapshot`)."""
    with _PASS_LOCK:
        return _reconcile(body, status, all_states)


def _reconcile(body: kopf.Body, status: kopf.Status, all_states: Sequence[TrialState]) -> dict[str, Any]:
    meta = body["metadata"]
    generation = meta.get("generation")
    spec = _admitted(body)
    if isinstance(spec, InputError):
        return _failed(body, status, spec, "InvalidSpec")
    try:
        planned = _plan(body, spec)  # unknown tasks, a taskSelector matching nothing: said once, no Trials made
    except InputError as exc:
        return _failed(body, status, exc, "InvalidTasks")
    in_plan = _IN_PLAN.get((meta["uid"], int(generation or 0))) or frozenset(p.name for p in planned)
    # Trials outside the current plan (seeds or entries lowered on a running campaign) are left alone and not
    # counted: the progress is the plan's.
    states = [s for s in all_states if s[0] in in_plan]
    names: set[str] = {s.name for s in states}
    sweep(body, states)
    # planned Trials gone from the cluster after their end (or cancelled): counted from their records
    states += [s for n, s in _STORED.get(meta["uid"], {}).items() if n not in names and n in in_plan]
    active = done = infra = cancelled = unknown = unmetered = 0
    cost = 0.0
    for state in states:
        if state.done:
            done += 1
            infra += state.phase == "InfrastructureFailed"
            cancelled += state.phase == "Cancelled"
        else:
            active += 1
        if state.cost is None:
            unknown += 1  # never summed as 0: costUSD is then the known part, costsUnknown says how much is missing
        else:
            cost += state.cost
        unmetered += state.unmetered
    uid = meta["uid"]
    _forget(uid, keep_generation=int(generation or 0))
    total = len(planned)
    created = 0 if spec.suspend else _create_next(body, spec, names, active)
    now = time.monotonic()
    if now - _LAST_METRICS.get(uid, 0.0) >= METRICS_SEC or done == total:
        _LAST_METRICS[uid] = now
        metrics.campaign_trial_counts(meta["name"], {p.name: p.entry for p in planned}, {s[0]: s[1] for s in states})
    new: dict[str, Any] = {
        "total": total, "created": len(names) + created, "running": active + created, "finished": done,
        "scored": done - infra - cancelled, "infrastructureFailed": infra, "cancelled": cancelled,
        "progress": f"{done}/{total}",
        "costUSD": round(cost, 6), "costsUnknown": unknown, "unmeteredRequests": unmetered,
        "observedGeneration": generation,
        "phase": "Suspended" if spec.suspend else "Running",
    }
    finished = done == total and total > 0
    if finished:
        new.update(_publish(body, spec, {s[0]: s for s in states}), phase="Succeeded")
    outside = len(all_states) - len(states)
    new["message"] = _summary(total, done, infra, outside, finished, cost_note(unknown, unmetered), cancelled)
    new["conditions"] = _conditions(status, new, spec.suspend, generation)
    if finished:
        _forget(uid)
    new = CampaignStatus.model_validate(new).patch()  # typed: what the CRD's schema promises
    if all(status.get(k) == v for k, v in new.items()):
        return {}
    _announce(body, status, new)
    return new


def _summary(total: int, done: int, infra: int, outside: int, finished: bool, costs: str | None = None,
             cancelled: int = 0) -> str:
    """The campaign's state in words: how many trials are scored, and which are not (no "all scored" when some
    ended without a score); ``costs``: the board's note when the campaign's cost is incomplete."""
    text = f"{done - infra - cancelled} of {total} trials scored" if finished else f"{done} of {total} trials finished"
    if infra:
        text += f"; {infra} ended InfrastructureFailed (no score: their entries are marked incomplete)"
    if cancelled:
        text += f"; {cancelled} cancelled (deleted before their end: no score, not run again)"
    if outside:
        text += f"; {outside} existing trial(s) are outside the current plan (seeds or entries lowered) and not counted"
    if costs:
        text += f"; {costs}"
    return text


def _conditions(status: kopf.Status, new: dict[str, Any], suspended: bool, generation: int | None
                ) -> list[dict[str, Any]]:
    """Ready, Degraded (trials that ended InfrastructureFailed), when suspended Suspended, and the lifecycle
    conditions (``kube.conditions``: Complete once finished, Reconciling while running, not while suspended) — each
    keeping its lastTransitionTime while its status stays the same."""
    finished = new["phase"] == "Succeeded"
    infra = int(new["infrastructureFailed"])
    reason = "Completed" if finished else ("Suspended" if suspended else "Running")
    wanted = [("Ready", finished, reason, new["message"]),
              ("Degraded", infra > 0, "InfrastructureFailures" if infra else "NoInfrastructureFailures",
               f"{infra} trial(s) ended InfrastructureFailed" if infra else "no trial ended InfrastructureFailed")]
    if suspended:
        wanted.append(("Suspended", True, "Suspended", "spec.suspend is true: no new Trials (running ones run to "
                       "their end)"))
    fresh = [condition(kind, "True" if ok else "False", why, message, generation) for kind, ok, why, message in wanted]
    state = state_of(str(new["phase"]), trial=False)
    fresh += lifecycle(state, reason, new["message"], generation)
    return carry(status.get("conditions"), fresh)


def _announce(body: kopf.Body, status: kopf.Status, new: dict[str, Any]) -> None:
    """Events for the campaign's phase changes and new infrastructure failures (``kubectl describe vc``)."""
    before, after = status.get("phase"), new.get("phase", status.get("phase"))
    message = str(new.get("message") or status.get("message") or "")
    if after != before:
        reason = {"Running": "Started", "Succeeded": "Succeeded", "Suspended": "Suspended"}.get(str(after), str(after))
        if after == "Succeeded" and new.get("bestEntry"):
            message += f"; best entry {new['bestEntry']} (O-Eval {new.get('bestOEval')})"
        kube.post_event(dict(body), "Normal", reason, message)
    infra_before = int(status.get("infrastructureFailed") or 0)
    if int(new.get("infrastructureFailed", infra_before)) > infra_before:
        kube.post_event(dict(body), "Warning", "Degraded", message)


def _failed(body: kopf.Body, status: kopf.Status, exc: InputError, reason: str) -> dict[str, Any]:
    """The campaign cannot run as written: phase Failed, the reason in its condition, message and a Warning
    Event (once); it is not passed again until its spec changes."""
    meta = body["metadata"]
    text = str(exc)[:1000]
    if status.get("phase") == "Failed" and status.get("observedGeneration") == meta.get("generation"):
        return {}
    if _REFUSED.first(f"{meta['uid']}/{meta.get('generation')}"):  # the timer and a change handler may both see it
        kube.post_event(dict(body), "Warning", reason, text)
    return CampaignStatus.model_validate({
        "phase": "Failed", "message": text, "observedGeneration": meta.get("generation"),
        "conditions": carry(status.get("conditions"), [condition("Ready", "False", reason, text, meta.get("generation")),
                                                       *lifecycle("failed", reason, text, meta.get("generation"))])
    }).patch()


#: Campaign generations this process announced as refused.
_REFUSED = Once()
#: Phases in which a campaign gets no periodic pass: finished, or refused until its spec changes.
RESTING = ("Succeeded", "Failed")


@kopf.on.resume(API_GROUP, API_VERSION, "verificationcampaigns")
@kopf.on.create(API_GROUP, API_VERSION, "verificationcampaigns")
@kopf.on.update(API_GROUP, API_VERSION, "verificationcampaigns", field="spec")
async def start(body: kopf.Body, status: kopf.Status, patch: kopf.Patch, **kwargs: Any) -> None:
    """A pass right away on create, resume and every spec change (suspend, seeds, a fixed task list).

    Async, so the index is copied in the event loop (:func:`snapshot`); the pass itself runs in its own thread."""
    if status.get("phase") != "Succeeded" or status.get("observedGeneration") != body["metadata"].get("generation"):
        states = snapshot(body, kwargs["trials_by_campaign"])
        patch.setdefault("status", {}).update(await _pass(body, status, states))


@kopf.timer(API_GROUP, API_VERSION, "verificationcampaigns", interval=INTERVAL,
            when=lambda status, **_: status.get("phase") not in RESTING)
async def tick(body: kopf.Body, status: kopf.Status, patch: kopf.Patch, **kwargs: Any) -> None:
    """Periodic pass while the campaign runs (``trials_by_campaign`` is kopf's index, copied here in the event
    loop); a finished or failed campaign rests until its spec changes (:func:`start`)."""
    meta = body["metadata"]
    states = snapshot(body, kwargs["trials_by_campaign"])
    seen = (meta.get("resourceVersion"), _EVENTS[(meta["namespace"], meta["name"])],
            tuple((s.name, s.phase, s.done, s.cost, s.unmetered) for s in states))
    if _IDLE.get(meta["uid"]) == seen and time.monotonic() - _LAST_SWEEP.get(meta["uid"], 0.0) < SWEEP_SEC:
        return  # nothing changed since a pass that had nothing to do, and no sweep is due: the same pass again
    update = await _pass(body, status, states)
    if update:
        _IDLE.pop(meta["uid"], None)
        patch.setdefault("status", {}).update(update)
    else:
        _IDLE[meta["uid"]] = seen


#: By campaign uid: the campaign's version and its Trials' states when its last periodic pass had nothing to do.
_IDLE: dict[str, tuple[Any, ...]] = {}


@kopf.on.event(API_GROUP, API_VERSION, "verificationcampaigns")
async def deleted(type: str | None, body: kopf.Body, **_: Any) -> None:
    """A campaign was deleted: remove its series (trial counts, scores, gates, cost) so a dashboard no longer shows
    it and a campaign deleted while running does not look stalled (``AnchorageCampaignStalled``)."""
    if type != "DELETED":
        return
    name = str(body["metadata"]["name"])
    _forget(str(body["metadata"].get("uid")))
    _EVENTS.pop((body["metadata"].get("namespace"), name), None)
    metrics.forget_campaign(name)
    await kube.in_thread(metering.forget_campaign, name, config())
