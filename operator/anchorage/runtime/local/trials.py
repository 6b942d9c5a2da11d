"""One trial end to end on this machine: agent in the sandbox → artifact → post-agent pipeline → ``trial.json``.

Called by the campaign engine (:mod:`.engine`) and by ``anchorage run`` for a single Trial. The
trial's folder is ``<run>/<campaign>/<trial>/`` with ``agent/`` (bound at ``/logs/agent``: stdout,
stderr, the delivered prompt), ``artifacts/`` (bound at ``/root/results``), ``verifier/``,
``score.json`` and finally ``trial.json``, written last by atomic rename: its presence with a
terminal phase is what "finished" means, so a crashed run redoes only unfinished trials.

This module is the local *driver*: what to run comes from the lifecycle core
(:func:`anchorage.trials.plan_agent`), how the attempt ended is the sandbox's evidence turned into an
:class:`~anchorage.trials.AttemptEnd` and classified by :func:`anchorage.trials.classify`, the record
is an :class:`~anchorage.trials.TrialRecord`, and the post-agent steps are
:data:`anchorage.trials.pipeline.STEPS` in their order.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from anchorage import agentclis, confined, metrics
from anchorage.errors import InputError
from anchorage.files import write_json_atomic
from anchorage.manifests import Limits, TrialSpec
from anchorage.runtime.local import interpreter, sandbox
from anchorage.tasks import Task
from anchorage.trials import AgentPlan, AttemptEnd, Phase, Reason, TrialRecord, classify, plan_agent
from anchorage.trials.agents.plans import missing_replay_message, replayed_message
from anchorage.trials.costing import trial_cost
from anchorage.trials.limits import MIB, resolve_limits
from anchorage.trials.pipeline import protocol_steps, summary
from anchorage.trials.records import (
    TRANSCRIPT,
    AgentInfo,
    LimitsInfo,
    PromptInfo,
    ReplayInfo,
    SandboxInfo,
    now,
    parse_record,
    transcript_info,
    transcript_unreadable,
)

if TYPE_CHECKING:  # the scorer is loaded when the first trial is scored (default_scorer)
    from anchorage.scoring.records import ScoreRecord


class GatewayLike(Protocol):
    """What the engine needs of :class:`anchorage.gateway.Gateway`."""

    @property
    def unix_socket(self) -> Path | None: ...

    def issue_token(self, trial_id: str, *, budget_usd: float | None = None, rate_per_min: float | None = None,
                    entry: str | None = None, timeout_sec: float | None = None, transcript: bool = False,
                    campaign: str | None = None) -> str: ...

    def open_trial_socket(self, trial_id: str) -> Path: ...

    def close_trial_socket(self, trial_id: str) -> None: ...

    def usage(self, trial_id: str) -> Any: ...

    def transcript(self, trial_id: str) -> list[dict[str, Any]]: ...


Scorer = Callable[[Task, Path, bool, bool, str | None], "ScoreRecord"]  # (task, results, gates, lean, profile) -> record


def default_scorer(task: Task, results_dir: Path, gates: bool, lean: bool = False,
                   profile: str | None = None) -> ScoreRecord:
    """Score the results folder in-process with the shared scorer (F from the task's configuration);
    ``gates``/``lean`` are the trial's ``verification.gates``/``verification.lean``, ``profile`` its
    ``scoring.profile``."""
    from anchorage.scoring import score_artifact

    return score_artifact(task, results_dir, gates=gates, lean=lean, profile=profile)


@dataclass(frozen=True)
class TrialJob:
    """One cell of the matrix (or a lone Trial): everything needed to run it."""

    name: str
    task: Task
    spec: TrialSpec
    entry: str
    campaign: str | None = None
    cost_per_run_usd: float | None = None


@dataclass
class LocalRuntime:
    """What every trial of one run shares."""

    mechanism: sandbox.Mechanism
    base_dir: Path
    gateway: GatewayLike | None = None
    scorer: Scorer = default_scorer
    campaign_limits: Limits = field(default_factory=Limits)


def read_record(trial_dir: Path) -> TrialRecord | None:
    """The trial's ``trial.json``; None when there is none, or an unfinished one this version cannot read (the trial
    then runs again); a finished one this version cannot read is refused (:func:`~anchorage.trials.records.
    parse_record`)."""
    try:  # the trial folder is the agent's neighbour: read it like anything else there (anchorage.confined)
        raw = confined.read_bytes(trial_dir, "trial.json", limit=confined.RECORD_LIMIT)
    except (OSError, ValueError, confined.ConfinedError):
        return None
    return parse_record(raw, str(trial_dir / "trial.json"))


def sandbox_limits(spec: TrialSpec, task: Task, campaign: Limits) -> sandbox.SandboxLimits:
    """The sandbox's limits: those in force (:func:`anchorage.trials.limits.resolve_limits`: the Trial's, then the
    campaign's, then ``task.toml``), with the local engine's derived ones (files up to the storage limit; a tmpfs of
    at most 1 GiB, within memory and storage)."""
    limits = resolve_limits(task, spec.limits, campaign)
    return sandbox.SandboxLimits(
        timeout_sec=limits.timeout_sec, cpus=limits.cpus, memory_mb=limits.memory_mb, pids=limits.pids,
        result_max_bytes=limits.result_max_bytes, file_max_bytes=limits.storage_mb * MIB,
        tmp_mb=min(limits.storage_mb, limits.memory_mb, 1024))


def _prepare(trial_dir: Path) -> dict[str, Path]:
    """A clean trial folder (an unfinished attempt's leftovers are removed first)."""
    if trial_dir.exists():
        shutil.rmtree(trial_dir)
    dirs = {name: trial_dir / name for name in ("agent", "artifacts", "verifier")}
    for path in dirs.values():
        path.mkdir(parents=True)
    return dirs


def new_record(job: TrialJob, attempt: int, plan: AgentPlan | None = None) -> TrialRecord:
    """The record of an attempt that is starting."""
    agent = job.spec.agent
    return TrialRecord(
        name=job.name, campaign=job.campaign, entry=job.entry, task=job.task.slug, seed=job.spec.seed, attempt=attempt,
        driver="local", agent=AgentInfo(kind=agent.kind, model=agent.model, reasoning_effort=agent.reasoning_effort,
                                        label=plan.label if plan else agent.kind),
        started_at=now())


def run_trial(job: TrialJob, trial_dir: Path, runtime: LocalRuntime, *, attempt: int = 1) -> TrialRecord:
    """Run ``job`` once in ``trial_dir``; return the record also written to ``trial.json``."""
    started = time.monotonic()
    try:
        dirs = _prepare(trial_dir)
    except OSError as exc:
        return infrastructure_failure(job, trial_dir, Reason.STORAGE_ERROR, f"cannot prepare {trial_dir}: {exc}", attempt)
    plan = plan_agent(job.spec.agent, job.task, job.spec.seed)
    record = new_record(job, attempt, plan)
    prompt = job.task.instruction
    (dirs["agent"] / "prompt.txt").write_text(prompt, encoding="utf-8")
    record.prompt = PromptInfo(sha256=hashlib.sha256(prompt.encode()).hexdigest(), delivered=plan.delivers_prompt)
    end = _attempt(job, plan, dirs, runtime, record)
    _cost(job, plan, runtime, record)
    _transcript(job, plan, runtime, trial_dir, record)
    outcome = classify(end)
    record.end(outcome.phase, outcome.reason, outcome.message)
    if record.phase is not Phase.INFRASTRUCTURE_FAILED:
        _pipeline(job, runtime, dirs, trial_dir, record)
    record.finished_at = now()
    record.durations.total_sec = round(time.monotonic() - started, 4)
    write_record(trial_dir, record)
    return record


def write_record(trial_dir: Path, record: TrialRecord) -> None:
    """``trial.json``: the record as JSON, written whole (atomic rename)."""
    write_json_atomic(trial_dir / "trial.json", record.to_json())


def infrastructure_failure(job: TrialJob, trial_dir: Path, reason: Reason, message: str, attempt: int = 1) -> TrialRecord:
    """Record an attempt the engine could not even run (its folder, an engine exception) as the platform's."""
    record = new_record(job, attempt)
    record.end(Phase.INFRASTRUCTURE_FAILED, reason, message)
    record.finished_at = now()
    with contextlib.suppress(OSError):
        trial_dir.mkdir(parents=True, exist_ok=True)
        write_record(trial_dir, record)
    return record


def _attempt(job: TrialJob, plan: AgentPlan, dirs: dict[str, Path], runtime: LocalRuntime,
             record: TrialRecord) -> AttemptEnd:
    """Run the agent; return the evidence of how it ended (the sandbox's and the gateway's)."""
    if plan.problem is not None:
        return AttemptEnd(agent_problem=plan.problem)
    if plan.replay is not None:
        return _replay(job, plan, dirs, runtime, record)
    stack = interpreter.missing_stack()
    if stack is not None:  # the agents' environment is not the benchmark's: never the model's failure
        return AttemptEnd(launcher_failure=stack)
    argv = list(plan.argv)
    env = dict(plan.env)
    binds = {mount: job.task.root / folder for mount, folder in plan.binds.items()}
    if plan.builtin is not None:
        argv = [sandbox.sandbox_python(), "-I", f"{sandbox.INSIDE_MOUNT}/{plan.builtin}.py", *argv]
    elif plan.cli is not None:
        missing = agentclis.missing(plan.cli)
        if missing is not None:  # the platform lacks the tool: never the model's failure
            return AttemptEnd(launcher_failure=missing)
        binds.update(agentclis.sandbox_binds(plan.cli))
        env["PATH"] = f"{agentclis.bin_dir(plan.cli)}:{sandbox.sandbox_path(runtime.mechanism)}"
    token_env: dict[str, str] = {}
    socket: Path | None = None
    limits = sandbox_limits(job.spec, job.task, runtime.campaign_limits)
    if plan.needs_gateway:
        gateway = runtime.gateway
        if gateway is None or gateway.unix_socket is None:
            return AttemptEnd(gateway_failure="this agent needs the model gateway, but none is running")
        try:
            asks: dict[str, Any] = {"transcript": True} if job.spec.transcripts else {}
            if job.campaign is not None:
                asks["campaign"] = job.campaign  # the campaign label of the trial's tokens and cost
            token = gateway.issue_token(job.name, entry=job.entry, timeout_sec=limits.timeout_sec,  # expires with it
                                        **asks)
            socket = gateway.open_trial_socket(job.name)  # the trial's own: its token only, its own connection cap
        except Exception as exc:  # the gateway is another component: any failure is the platform's
            return AttemptEnd(gateway_failure=f"the gateway refused a token: {exc}")
        token_env = {"OPENAI_API_KEY": token, "ANTHROPIC_API_KEY": token}
    spec = sandbox.SandboxSpec(
        argv=argv, results_dir=dirs["artifacts"], logs_dir=dirs["agent"], limits=limits,
        data_dir=job.task.data_dir if job.task.data_dir.is_dir() else None,
        ro_binds=binds, env={**env, **token_env}, gateway_socket=socket, expand_references=True,
    )
    try:
        result = sandbox.run(spec, mechanism=runtime.mechanism, trial_id=f"{job.name[-30:]}-{uuid.uuid4().hex[:8]}")
    finally:
        if socket is not None and runtime.gateway is not None:
            with contextlib.suppress(Exception):  # the agent's processes are gone; a gateway that fails here is
                runtime.gateway.close_trial_socket(job.name)  # stopping anyway
    return _evidence(record, result, limits)


def _evidence(record: TrialRecord, result: sandbox.SandboxResult, limits: sandbox.SandboxLimits) -> AttemptEnd:
    """The sandbox's result as the lifecycle's evidence; the record keeps what was in force.

    Only the sandbox's own channel (``result.started``, the status pipe) makes this the platform's
    failure (``outcome == "sandbox_error"``); the agent's exit code and output never do.
    """
    record.exit_code = result.exit_code
    record.durations.agent_sec = round(result.wall_sec, 4)
    record.sandbox = SandboxInfo(
        mechanism=result.mechanism, enforced=dict(result.enforced), result_bytes=result.result_bytes,
        oversized=result.oversized, killed_processes=result.killed_processes, user=result.user,
        quotas=result.quotas, logs_oversized=result.logs_oversized, started=result.started,
        evidence=result.evidence,
        limits=LimitsInfo(timeout_sec=limits.timeout_sec, cpus=limits.cpus, memory_mb=limits.memory_mb,
                          storage_mb=limits.file_max_bytes // MIB if limits.file_max_bytes else None, pids=limits.pids,
                          result_max_bytes=limits.result_max_bytes, result_max_files=limits.result_max_files,
                          log_max_bytes=limits.log_max_bytes, log_max_files=limits.log_max_files,
                          tmp_mb=limits.tmp_mb))
    launcher = (result.detail or "the sandbox failed to start") if result.outcome == "sandbox_error" else None
    return AttemptEnd(exit_code=result.exit_code, launcher_failure=launcher, timed_out=result.outcome == "timeout",
                      timeout_sec=limits.timeout_sec, oom_killed=result.outcome == "oom", oom_detail=result.detail,
                      memory_mb=limits.memory_mb, oversized=result.oversized or result.logs_oversized,
                      result_bytes=result.result_bytes, result_max_bytes=limits.result_max_bytes,
                      oversized_detail=result.oversized_detail)


def _replay(job: TrialJob, plan: AgentPlan, dirs: dict[str, Path], runtime: LocalRuntime,
            record: TrialRecord) -> AttemptEnd:
    assert plan.replay is not None
    text = plan.replay.source.removeprefix("file://")
    source = job.task.root / text if plan.replay.in_task else Path(text).expanduser()
    if not source.is_absolute():
        source = (runtime.base_dir / source).resolve()
    if not source.exists():
        return AttemptEnd(agent_problem=missing_replay_message(plan))  # the operator's rule too
    try:
        if source.is_dir():
            shutil.copytree(source, dirs["artifacts"], dirs_exist_ok=True)
        else:
            shutil.copyfile(source, dirs["artifacts"] / job.task.artifact_name)
    except OSError as exc:
        return AttemptEnd(storage_failure=f"cannot copy the replayed artifact: {exc}")
    record.replay = ReplayInfo(source=plan.replay.source, label=plan.label)  # as the plan names it (both drivers)
    return AttemptEnd(replayed=replayed_message(plan))


def _cost(job: TrialJob, plan: AgentPlan, runtime: LocalRuntime, record: TrialRecord) -> None:
    usage: dict[str, Any] | None = None
    unreadable = None
    if plan.needs_gateway and runtime.gateway is not None:
        try:
            raw = runtime.gateway.usage(job.name)
            usage = raw.to_dict() if hasattr(raw, "to_dict") else dict(raw)
        except Exception as exc:  # usage is bookkeeping: the cost is unknown, the trial's outcome stands
            unreadable = f"the gateway's usage of this trial could not be read: {exc}"
    elif plan.needs_gateway:
        unreadable = "no gateway ran, so nothing was metered"
    cost = trial_cost(usage, calls_models=plan.needs_gateway, cost_per_run_usd=job.cost_per_run_usd,
                      unreadable=unreadable)
    record.usage, record.cost_usd, record.cost_source, record.cost_unknown_reason = \
        usage, cost.usd, cost.source, cost.unknown_reason
    snapshot = getattr(runtime.gateway, "snapshot", None) if plan.needs_gateway else None
    if snapshot is not None:  # which prices made the cost (the record names them beside the profile and versions)
        record.versions.price_snapshot = snapshot.version


def _transcript(job: TrialJob, plan: AgentPlan, runtime: LocalRuntime, trial_dir: Path, record: TrialRecord) -> None:
    """``transcripts: true``: the gateway's record of the trial's model calls, as ``transcript.jsonl`` beside
    ``trial.json`` (out of the agent's reach: not in its ``agent/`` or ``artifacts/`` folder)."""
    if not (job.spec.transcripts and plan.needs_gateway and runtime.gateway is not None):
        return
    try:
        lines = runtime.gateway.transcript(job.name)
    except Exception as exc:  # bookkeeping: the trial's outcome stands, the record says what is missing
        record.transcript = transcript_unreadable(exc)
        return
    data = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines).encode("utf-8")
    (trial_dir / TRANSCRIPT).write_bytes(data)
    record.transcript = transcript_info(data)


# ----- the post-agent pipeline (anchorage.trials.pipeline.STEPS, in order) -------------------------------

def _pipeline(job: TrialJob, runtime: LocalRuntime, dirs: dict[str, Path], trial_dir: Path, record: TrialRecord) -> None:
    """score (+ gates, Lean) → panel → cbu; ``score.json`` (the scorer's record and the steps' blocks) is written
    once, after the last step."""
    score = _score(job, runtime, dirs, record)
    if score is None:
        return
    blocks: dict[str, dict[str, Any]] = {}
    for step in protocol_steps(job.spec.verification):  # in order; score, gates and lean ran in the scorer's call
        if record.phase is not Phase.INFRASTRUCTURE_FAILED:
            blocks[step.name] = _protocol(step.name, job, runtime, trial_dir, score.artifact, record)
    try:
        write_json_atomic(trial_dir / "score.json", {**score.to_dict(), **blocks})
    except OSError as exc:
        record.end(Phase.INFRASTRUCTURE_FAILED, Reason.STORAGE_ERROR, f"cannot write score.json: {exc}")


def _score(job: TrialJob, runtime: LocalRuntime, dirs: dict[str, Path], record: TrialRecord) -> ScoreRecord | None:
    oversized = record.reason is Reason.OVERSIZED_RESULT
    started = time.monotonic()
    verification = job.spec.verification
    try:
        score = runtime.scorer(job.task, dirs["verifier"] if oversized else dirs["artifacts"],
                               verification.gates, verification.lean, job.spec.scoring.profile)
    except Exception as exc:  # the scorer is in-process: a crash is the platform's failure, not the model's
        record.end(Phase.INFRASTRUCTURE_FAILED, Reason.STORAGE_ERROR if isinstance(exc, OSError) else Reason.SANDBOX_ERROR,
                   f"scoring failed: {type(exc).__name__}: {exc}")
        return None
    write_json_atomic(dirs["verifier"] / "reward.json",
                      {"reward": score.o_eval, "o_eval": score.o_eval, "bo_eval": score.bo_eval, "raw": score.raw})
    record.durations.score_sec = round(time.monotonic() - started, 4)
    record.apply_score(score, _relative(score.artifact, dirs["artifacts"].parent), str(dirs["artifacts"]))
    metrics.score_checked(job.campaign, job.task.slug, score)  # the scorer reports gates and obligations, we count
    return score


def _relative(path: str | None, trial_dir: Path) -> str | None:
    """An artifact path relative to the trial's folder (the same in a run folder and under an S3 prefix)."""
    if not path:
        return None
    with contextlib.suppress(ValueError):
        return Path(path).resolve().relative_to(trial_dir.resolve()).as_posix()
    return path


def _protocol(step: str, job: TrialJob, runtime: LocalRuntime, trial_dir: Path, artifact: str | None,
              record: TrialRecord) -> dict[str, Any]:
    """``verification.panel`` / ``verification.cbu`` on the trial's solution text (``runtime/local/verifying.py``):
    returns the block for ``score.json``, its summary goes into the record; a failed model call is the platform's."""
    from anchorage.runtime.local import verifying

    settings = getattr(job.spec.verification, step)
    runners: dict[str, Callable[..., verifying.PanelOutcome]] = {"panel": verifying.run_trial_panel,
                                                                 "cbu": verifying.run_trial_cbu}
    if step not in runners:  # admission (engine.admit) refuses such manifests; never skip a step silently
        raise InputError(f"verification.{step} cannot run on the local engine")
    run = runners[step]
    outcome = run(job.task, settings, trial=job.name, entry=job.entry, trial_dir=trial_dir, artifact=artifact,
                  gateway=runtime.gateway, mechanism=runtime.mechanism)
    block = outcome.block
    setattr(record, step, summary(step, block))
    setattr(record.durations, f"{step}_sec", block.get("duration_sec"))
    if outcome.failure is not None:
        record.end(Phase.INFRASTRUCTURE_FAILED, Reason.GATEWAY_ERROR, outcome.failure)
    return block
