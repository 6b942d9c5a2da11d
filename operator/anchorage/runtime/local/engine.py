"""The local campaign engine: plan, run with bounded parallelism, resume, aggregate.

Called by ``anchorage run`` (and the benchmark). The run folder is the state: a trial whose
``trial.json`` holds a terminal phase is done and is never run again; anything else is (re)run from
scratch. A lock file (``<campaign>/.lock``, ``flock``) makes a second concurrent run of the same
campaign refuse instead of racing; the kernel drops the lock when a run dies, even by SIGKILL.
``campaign.json`` pins the manifest: resuming with a changed spec is refused with the fix.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorage.campaigns.aggregation import Leaderboard, TrialResult, leaderboard
from anchorage.campaigns.planning import PlannedTrial, plan
from anchorage.campaigns.selection import campaign_task_refs
from anchorage.errors import InputError
from anchorage.manifests import CampaignSpec, Trial, TrialSpec, VerificationCampaign
from anchorage.runtime.local import leftovers
from anchorage.runtime.local.trials import (
    LocalRuntime,
    TrialJob,
    infrastructure_failure,
    read_record,
    run_trial,
    write_json_atomic,
)
from anchorage.tasks import Task, load_task, resolve_task
from anchorage.trials import Outcome, Phase, Reason, is_terminal, should_retry
from anchorage.trials.admission import admit
from anchorage.trials.agents import LOCAL
from anchorage.trials.records import AttemptInfo

Event = Callable[[str, PlannedTrial, dict[str, Any] | None], None]


@dataclass
class CampaignOutcome:
    directory: Path
    records: list[dict[str, Any]]
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
    path = directory / "campaign.json"
    digest = _spec_digest(campaign)
    previous = read_record_file(path)
    if previous is not None and previous.get("spec_sha256") != digest:
        raise InputError(
            f"{directory} holds campaign {campaign.metadata.name!r} run with a different spec",
            hint="give the changed campaign a new metadata.name, or use another --runs-dir; "
                 "resuming only continues the same manifest",
        )
    write_json_atomic(path, {
        "name": campaign.metadata.name, "spec_sha256": digest,
        "manifest": campaign.model_dump(mode="json", by_alias=True, exclude_none=True),
        "trials": [p.name for p in planned],
    })


def read_record_file(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def run_with_retries(job: TrialJob, trial_dir: Path, runtime: LocalRuntime) -> dict[str, Any]:
    """Run a trial; rerun it only after an infrastructure failure, at most ``spec.retries`` times."""
    attempts: list[AttemptInfo] = []
    record: dict[str, Any] = {}
    for attempt in range(1, job.spec.retries + 2):
        record = run_trial(job, trial_dir, runtime, attempt=attempt)
        outcome = Outcome(Phase(record["phase"]), Reason(record["reason"]), record.get("message") or "")
        if not should_retry(outcome, attempt, job.spec.retries):
            break
        attempts.append(AttemptInfo(attempt=attempt, reason=outcome.reason, message=outcome.message))
    if attempts:
        record["previous_attempts"] = [a.model_dump(mode="json") for a in attempts]
        write_json_atomic(trial_dir / "trial.json", record)
    return record


def record_engine_failure(job: TrialJob, trial_dir: Path, exc: BaseException) -> dict[str, Any]:
    """Record an unexpected engine exception as the trial's infrastructure failure."""
    reason = Reason.STORAGE_ERROR if isinstance(exc, OSError) else Reason.SANDBOX_ERROR
    return infrastructure_failure(job, trial_dir, reason, f"the engine failed on this trial: {type(exc).__name__}: {exc}")


def run_campaign(
    campaign: VerificationCampaign, runs_dir: Path, runtime: LocalRuntime, *, on_event: Event | None = None,
) -> CampaignOutcome:
    """Run (or resume) every trial of ``campaign`` under ``runs_dir/<name>``, then aggregate."""
    name = campaign.metadata.name
    directory = runs_dir / name
    tasks = {t.slug: t for t in resolve_tasks(campaign.spec)}
    planned = plan(name, campaign.spec, list(tasks))
    for entry in campaign.spec.entries:
        admit(entry.agent, campaign.spec.verification, LOCAL)
    runtime.campaign_limits = campaign.spec.limits
    notify = on_event or (lambda *_: None)
    with campaign_lock(directory):
        leftovers.sweep()  # quota mounts, cgroups and gateway folders of killed runs
        _pin_manifest(directory, campaign, planned)
        records: dict[str, dict[str, Any]] = {}
        todo: list[PlannedTrial] = []
        for item in planned:
            record = read_record(directory / item.name)
            if record is not None and is_terminal(record.get("phase")):
                records[item.name] = record
                notify("reused", item, record)
            else:
                todo.append(item)
        reused = len(records)
        if not campaign.spec.suspend:
            _run_all(todo, tasks, directory, runtime, campaign.spec.parallelism, records, notify)
    ordered = [records[p.name] for p in planned if p.name in records]
    board = leaderboard([TrialResult.from_record(r) for r in ordered], campaign.spec.baseline)
    return CampaignOutcome(directory, ordered, board, ran=len(ordered) - reused, reused=reused)


def _run_all(
    todo: list[PlannedTrial], tasks: dict[str, Task], directory: Path, runtime: LocalRuntime, parallelism: int,
    records: dict[str, dict[str, Any]], notify: Event,
) -> None:
    lock = threading.Lock()

    def one(item: PlannedTrial) -> None:
        job = TrialJob(item.name, tasks[item.task], item.spec, item.entry, directory.name, item.cost_per_run_usd)
        notify("started", item, None)
        try:
            record = run_with_retries(job, directory / item.name, runtime)
        except Exception as exc:  # a bug or an OS failure must cost one trial, never the whole run
            record = record_engine_failure(job, directory / item.name, exc)
        with lock:
            records[item.name] = record
        notify("finished", item, record)

    with ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="trial") as pool:
        pending: set[Future[None]] = {pool.submit(one, item) for item in todo}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                future.result()


def run_single_trial(trial: Trial, runs_dir: Path, runtime: LocalRuntime) -> dict[str, Any]:
    """Run one Trial manifest under ``runs_dir/<name>/`` (always afresh unless already finished)."""
    spec: TrialSpec = trial.spec
    admit(spec.agent, spec.verification, LOCAL)
    task = load_task(resolve_task(spec.task))
    directory = runs_dir / trial.metadata.name
    with campaign_lock(runs_dir / f".{trial.metadata.name}"):
        leftovers.sweep()
        existing = read_record(directory)
        if existing is not None and is_terminal(existing.get("phase")):
            return existing
        job = TrialJob(trial.metadata.name, task, spec, spec.entry or spec.agent.kind)
        return run_with_retries(job, directory, runtime)
