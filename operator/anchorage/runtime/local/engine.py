"""The local campaign engine: plan, run with bounded parallelism, resume, aggregate.

Called by ``anchorage run`` (and the benchmark). The run folder is the state: a trial whose
``trial.json`` holds a terminal phase is done and is never run again; anything else is (re)run from
scratch. A lock file (``<campaign>/.lock``, ``flock``) makes a second concurrent run of the same
campaign refuse instead of racing; the kernel drops the lock when a run dies, even by SIGKILL.
``campaign.json`` pins the manifest: a run continues it or grows it (more seeds, entries, tasks; the
history is kept there); any other change is refused with the fix. A :class:`Selection` runs a subset.
With a store (``anchorage run --store URI``), finished trials are also published there and the store's records
count as finished (:mod:`anchorage.runtime.local.publishing`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorage.campaigns.aggregation import Leaderboard, TrialResult, leaderboard
from anchorage.campaigns.growth import grown, growth_problems
from anchorage.campaigns.planning import PlannedTrial, plan
from anchorage.campaigns.selection import campaign_task_refs
from anchorage.errors import InfrastructureError, InputError, did_you_mean
from anchorage.files import write_json_atomic
from anchorage.manifests import CampaignSpec, Trial, TrialSpec, VerificationCampaign
from anchorage.runtime.local import cgroups, leftovers, quotas, views
from anchorage.runtime.local.publishing import Publisher, TrialCopies
from anchorage.runtime.local.trials import (
    LocalRuntime,
    TrialJob,
    infrastructure_failure,
    read_record,
    run_trial,
    write_record,
)
from anchorage.store import ArtifactStore
from anchorage.tasks import Task, load_task, resolve_task
from anchorage.trials import Phase, Reason, TrialRecord, is_terminal, should_retry
from anchorage.trials.admission import admit
from anchorage.trials.agents import LOCAL
from anchorage.trials.records import AttemptInfo, now

Event = Callable[[str, PlannedTrial, TrialRecord | None], None]
log = logging.getLogger(__name__)


@dataclass
class CampaignOutcome:
    directory: Path
    records: list[TrialRecord]
    board: Leaderboard
    ran: int
    reused: int
    extra: dict[str, Any] = field(default_factory=dict)


@contextmanager
def campaign_lock(directory: Path) -> Iterator[None]:
    """Hold ``directory/.lock`` for the run; refuse clearly when another run holds it."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise InputError(
                f"another 'anchorage run' is already running campaign {directory.name} (pid {holder})",
                hint="wait for it to finish (or stop it); re-running afterwards resumes where it stopped",
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield


def resolve_tasks(spec: CampaignSpec) -> list[Task]:
    """The campaign's tasks, loaded (``campaigns.selection``: ``tasks`` then ``taskSelector``); an unknown
    task is an InputError naming it."""
    return [load_task(resolve_task(ref)) for ref in campaign_task_refs(spec)]


def _spec_digest(campaign: VerificationCampaign) -> str:
    text = json.dumps(campaign.spec.model_dump(mode="json", by_alias=True), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _pin_manifest(directory: Path, campaign: VerificationCampaign, planned: list[PlannedTrial]) -> None:
    """Write ``campaign.json``; a folder that holds a run of the same name continues it, or grows it (more
    seeds, entries or tasks: :mod:`anchorage.campaigns.growth`) — any other change is refused with the fix."""
    path = directory / "campaign.json"
    digest = _spec_digest(campaign)
    previous = read_record_file(path)
    history = list((previous or {}).get("history") or [])
    if previous is not None and previous.get("spec_sha256") != digest:
        problems = _growth_problems(previous, campaign)
        if problems:
            raise InputError(
                f"{directory} holds campaign {campaign.metadata.name!r} run with a different spec: "
                + "; ".join(problems),
                hint="a finished campaign can grow under its name (more seeds, more entries, more tasks; other "
                     "entries and settings unchanged); for anything else give it a new metadata.name, or use "
                     "another --runs-dir",
            )
        old = VerificationCampaign.model_validate(previous["manifest"])
        history.append({"spec_sha256": previous.get("spec_sha256"), "grown_at": now(),
                        **grown(old.spec, campaign.spec)})
    write_json_atomic(path, {
        "name": campaign.metadata.name, "spec_sha256": digest,
        "manifest": campaign.model_dump(mode="json", by_alias=True, exclude_none=True),
        "trials": [p.name for p in planned], **({"history": history} if history else {}),
    })


def _growth_problems(previous: dict[str, Any], campaign: VerificationCampaign) -> list[str]:
    try:
        old = VerificationCampaign.model_validate(previous["manifest"])
    except (KeyError, ValueError):
        return ["the stored manifest cannot be read back"]
    return growth_problems(old.spec, campaign.spec)


def read_record_file(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def run_with_retries(job: TrialJob, trial_dir: Path, runtime: LocalRuntime, *,
                     earlier: list[AttemptInfo] | None = None) -> TrialRecord:
    """Run a trial; rerun it only after an infrastructure failure, at most ``spec.retries`` times.

    ``earlier``: attempts of a previous run of this trial (``--retry-infra``): numbering continues after them
    and they stay in ``previous_attempts``; the retry budget is the spec's again."""
    attempts: list[AttemptInfo] = list(earlier or [])
    first = len(attempts) + 1
    for done in range(1, job.spec.retries + 2):
        attempt = first + done - 1
        record = run_trial(job, trial_dir, runtime, attempt=attempt)
        if not should_retry(record.outcome(), done, job.spec.retries):
            break
        attempts.append(AttemptInfo(attempt=attempt, reason=record.reason, message=record.message))
    if attempts:
        record.previous_attempts = attempts
        write_record(trial_dir, record)
    return record


def earlier_attempts(record: TrialRecord) -> list[AttemptInfo]:
    """A finished record's attempts (its earlier ones and its own) for a rerun that keeps them."""
    return [*record.previous_attempts, AttemptInfo(attempt=record.attempt, reason=record.reason, message=record.message)]


def record_engine_failure(job: TrialJob, trial_dir: Path, exc: BaseException) -> TrialRecord:
    """Record an unexpected engine exception as the trial's infrastructure failure."""
    reason = Reason.STORAGE_ERROR if isinstance(exc, OSError) else Reason.SANDBOX_ERROR
    return infrastructure_failure(job, trial_dir, reason, f"the engine failed on this trial: {type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class Selection:
    """Which planned trials a run may start (``anchorage run --task/--entry/--limit/--retry-infra``).

    Trials outside it are neither run nor forgotten: finished ones stay on the leaderboard, the others
    wait for a later run. ``retry_infra``: trials that ended ``InfrastructureFailed`` are run again
    (their earlier attempts kept); without it a finished trial is never rerun."""

    tasks: tuple[str, ...] = ()
    entries: tuple[str, ...] = ()
    limit: int | None = None
    retry_infra: bool = False

    def check(self, planned: list[PlannedTrial]) -> None:
        """Every name given must be one of the campaign's; an unknown one is an InputError with a suggestion."""
        for flag, wanted, known in (("--task", self.tasks, {p.task for p in planned}),
                                    ("--entry", self.entries, {p.entry for p in planned})):
            for name in wanted:
                if name not in known:
                    raise InputError(f"{flag} {name!r} is not in the campaign ({', '.join(sorted(known))})",
                                     hint=did_you_mean(name, known) or f"use one of the campaign's names with {flag}")

    def wants(self, item: PlannedTrial) -> bool:
        return (not self.tasks or item.task in self.tasks) and (not self.entries or item.entry in self.entries)


def run_campaign(
    campaign: VerificationCampaign, runs_dir: Path, runtime: LocalRuntime, *, on_event: Event | None = None,
    selection: Selection | None = None, store: ArtifactStore | None = None,
) -> CampaignOutcome:
    """Run (or resume, or grow) the trials of ``campaign`` under ``runs_dir/<name>`` that ``selection``
    allows, then aggregate every finished trial. ``store``: also publish every finished trial there, and take
    its records as finished (``extra["unpublished"]``: the trials whose upload failed; a rerun publishes them)."""
    name = campaign.metadata.name
    directory = runs_dir / name
    tasks = {t.slug: t for t in resolve_tasks(campaign.spec)}
    planned = plan(name, campaign.spec, list(tasks))
    selection = selection or Selection()
    selection.check(planned)
    for entry in campaign.spec.entries:
        admit(entry.agent, campaign.spec.verification, LOCAL)
    runtime.campaign_limits = campaign.spec.limits
    notify = on_event or (lambda *_: None)
    publisher = Publisher(store, name) if store is not None else None
    unpublished: list[str] = []
    with campaign_lock(directory):
        sweep_leftovers()
        if publisher is not None:
            publisher.pull_manifest(directory)
        _pin_manifest(directory, campaign, planned)
        if publisher is not None:
            publisher.publish_files(directory, ["campaign.json"])
            _sync_with_store(publisher, planned, directory, unpublished)
        records: dict[str, TrialRecord] = {}
        earlier: dict[str, list[AttemptInfo]] = {}
        todo: list[PlannedTrial] = []
        for item in planned:
            record = read_record(directory / item.name)
            finished = record is not None and is_terminal(record.phase)
            if record is not None and finished and not (
                    selection.retry_infra and selection.wants(item) and record.phase is Phase.INFRASTRUCTURE_FAILED):
                records[item.name] = record
                notify("reused", item, record)
            elif selection.wants(item):
                if record is not None and finished:
                    earlier[item.name] = earlier_attempts(record)
                todo.append(item)
        if selection.limit is not None:
            todo = todo[:selection.limit]
        reused = len(records)
        if not campaign.spec.suspend:
            if publisher is not None:
                for item in todo:
                    if item.name in earlier:
                        publisher.retract(item.name)
            _run_all(todo, tasks, directory, runtime, campaign.spec.parallelism, records, notify, earlier,
                     publisher, unpublished)
    ordered = [records[p.name] for p in planned if p.name in records]
    board = leaderboard([TrialResult.from_record(r.to_json()) for r in ordered], campaign.spec.baseline,
                        [(p.entry, p.task, p.seed) for p in planned])
    selected = [records[p.name] for p in planned if p.name in records and selection.wants(p)]
    return CampaignOutcome(directory, ordered, board, ran=len(ordered) - reused, reused=reused,
                           extra={"selected": selected, "not_run": len([p for p in planned if p.name not in records]),
                                  "unpublished": sorted(unpublished)})


def _sync_with_store(publisher: Publisher, planned: list[PlannedTrial], directory: Path,
                     unpublished: list[str]) -> None:
    """Before anything runs: the store's records come into the run folder, and the trials finished here that the
    store lacks (a kill before their upload) go up (one listing of the store for all of them)."""
    stored = publisher.stored_records()
    for item in planned:
        TrialCopies(item.name, directory / item.name, publisher).settle_with(stored.get(item.name), unpublished)


def _run_all(
    todo: list[PlannedTrial], tasks: dict[str, Task], directory: Path, runtime: LocalRuntime, parallelism: int,
    records: dict[str, TrialRecord], notify: Event, earlier: dict[str, list[AttemptInfo]] | None = None,
    publisher: Publisher | None = None, unpublished: list[str] | None = None,
) -> None:
    lock = threading.Lock()

    def one(item: PlannedTrial) -> None:
        job = TrialJob(item.name, tasks[item.task], item.spec, item.entry, directory.name, item.cost_per_run_usd)
        notify("started", item, None)
        try:
            record = run_with_retries(job, directory / item.name, runtime, earlier=(earlier or {}).get(item.name))
        except Exception as exc:  # a bug or an OS failure must cost one trial, never the whole run
            record = record_engine_failure(job, directory / item.name, exc)
        record = TrialCopies(item.name, directory / item.name, publisher).publish(
            record, unpublished if unpublished is not None else [])
        with lock:
            records[item.name] = record
        notify("finished", item, record)

    with ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="trial") as pool:
        pending: set[Future[None]] = {pool.submit(one, item) for item in todo}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                future.result()


def sweep_leftovers() -> dict[str, int]:
    """Remove every leftover of dead local runs: quota mounts, views, trial cgroups, gateway socket folders."""
    return {"quota_mounts": quotas.sweep_stale(), "views": views.sweep_stale(), "cgroups": cgroups.sweep_stale(),
            "gateway_folders": leftovers.sweep_gateway_folders()}


def run_single_trial(trial: Trial, runs_dir: Path, runtime: LocalRuntime, *,
                     store: ArtifactStore | None = None) -> TrialRecord:
    """Run one Trial manifest under ``runs_dir/<name>/`` (always afresh unless already finished; with ``store``,
    finished there counts too, and the finished trial is published at ``<store>/<name>/``)."""
    spec: TrialSpec = trial.spec
    admit(spec.agent, spec.verification, LOCAL)
    task = load_task(resolve_task(spec.task))
    name = trial.metadata.name
    directory = runs_dir / name
    publisher = Publisher(store) if store is not None else None
    copies = TrialCopies(name, directory, publisher)
    unpublished: list[str] = []
    with campaign_lock(runs_dir / f".{name}"):
        sweep_leftovers()
        record = copies.settle(unpublished)
        if record is None:
            job = TrialJob(name, task, spec, spec.entry or spec.agent.kind)
            record = copies.publish(run_with_retries(job, directory, runtime), unpublished)
    if unpublished:
        raise InfrastructureError(f"trial {name} finished ({directory}) but could not be published to "
                                  f"{store.uri if store is not None else '?'}", hint="rerun the same command: it "
                                  "publishes the finished trial without running it again")
    return record
