"""One trial end to end on this machine: agent in the sandbox → artifact → score → ``trial.json``.

Called by the campaign engine (:mod:`.engine`) and by ``anchorage run`` for a single Trial. The
trial's folder is ``<run>/<campaign>/<trial>/`` with ``agent/`` (bound at ``/logs/agent``: stdout,
stderr, the delivered prompt), ``artifacts/`` (bound at ``/root/results``), ``verifier/``,
``score.json`` and finally ``trial.json``, written last by atomic rename: its presence with a
terminal phase is what "finished" means, so a crashed run redoes only unfinished trials.

Phases and reasons follow docs/design-notes.md ("Trial phases"): the model's own failures
(``agent_error``, ``timeout``, ``oom``, ``oversized_result``, ``no_artifact``) are ``Failed`` and
scored (a missing artifact is BO-Eval −1); the platform's (``sandbox_error``, ``gateway_error``,
``storage_error``) are ``InfrastructureFailed``, never scored, retried only as configured.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from anchorage.manifests import Limits, TrialSpec
from anchorage.runtime.local import sandbox
from anchorage.runtime.local.agents import AgentPlan, plan_agent
from anchorage.tasks import Task

TERMINAL = frozenset({"Succeeded", "Failed", "InfrastructureFailed"})
INFRA_REASONS = frozenset({"sandbox_error", "gateway_error", "storage_error"})
MIB = 1024 * 1024
DEFAULT_PIDS = 1024
DEFAULT_RESULT_MAX_MB = 512


class GatewayLike(Protocol):
    """What the engine needs of :class:`anchorage.gateway.Gateway`."""

    @property
    def unix_socket(self) -> Path | None: ...

    def issue_token(self, trial_id: str, *, budget_usd: float | None = None, rate_per_min: float | None = None,
                    entry: str | None = None) -> str: ...

    def usage(self, trial_id: str) -> Any: ...


Scorer = Callable[[Task, Path, bool, bool], dict[str, Any]]  # (task, results dir, gates, lean) -> record


def default_scorer(task: Task, results_dir: Path, gates: bool, lean: bool = False) -> dict[str, Any]:
    """Score the results folder in-process with the shared scorer (F from the task's configuration);
    ``gates``/``lean`` are the trial's ``verification.gates``/``verification.lean``."""
    from anchorage.scoring import score_artifact

    record: dict[str, Any] = score_artifact(task, results_dir, gates=gates, lean=lean).to_dict()
    return record


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


def read_record(trial_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((trial_dir / "trial.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` via a temporary file, fsync and rename (all or nothing)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True, default=str)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def resolve_limits(spec: TrialSpec, task: Task, campaign: Limits) -> sandbox.SandboxLimits:
    """Trial manifest, then campaign overrides, then ``task.toml`` — first set value wins."""
    env = task.config.environment

    def pick(name: str) -> Any:
        for source in (spec.limits, campaign):
            value = getattr(source, name)
            if value is not None:
                return value
        return None

    memory = pick("memory_mb") or env.memory_mb
    storage = pick("storage_mb") or env.storage_mb
    result_max = pick("result_max_bytes") or min(storage, DEFAULT_RESULT_MAX_MB) * MIB
    return sandbox.SandboxLimits(
        timeout_sec=float(pick("agent_timeout_sec") or task.config.agent.timeout_sec),
        cpus=float(pick("cpus") or env.cpus),
        memory_mb=int(memory),
        pids=int(pick("pids") or DEFAULT_PIDS),
        result_max_bytes=int(result_max),
        file_max_bytes=int(storage) * MIB,
        tmp_mb=int(min(storage, memory, 1024)),
    )


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def _prepare(trial_dir: Path) -> dict[str, Path]:
    """A clean trial folder (an unfinished attempt's leftovers are removed first)."""
    if trial_dir.exists():
        shutil.rmtree(trial_dir)
    dirs = {name: trial_dir / name for name in ("agent", "artifacts", "verifier")}
    for path in dirs.values():
        path.mkdir(parents=True)
    return dirs


def _base_record(job: TrialJob, plan: AgentPlan, attempt: int) -> dict[str, Any]:
    agent = job.spec.agent
    return {
        "apiVersion": "anchorage.dev/v1alpha1", "kind": "TrialRecord",
        "name": job.name, "campaign": job.campaign, "entry": job.entry, "task": job.task.slug,
        "task_dir": str(job.task.root), "seed": job.spec.seed, "attempt": attempt,
        "agent": {"kind": agent.kind, "model": agent.model, "reasoning_effort": agent.reasoning_effort,
                  "label": plan.label},
        "phase": "Running", "reason": None, "message": "", "started_at": _now(),
    }


def run_trial(job: TrialJob, trial_dir: Path, runtime: LocalRuntime, *, attempt: int = 1) -> dict[str, Any]:
    """Run ``job`` once in ``trial_dir``; return the record also written to ``trial.json``."""
    started = time.monotonic()
    try:
        dirs = _prepare(trial_dir)
    except OSError as exc:
        return _infra_only(job, trial_dir, "storage_error", f"cannot prepare {trial_dir}: {exc}", attempt)
    plan = plan_agent(job.spec.agent, job.task, seed=job.spec.seed, base_dir=runtime.base_dir)
    record = _base_record(job, plan, attempt)
    prompt = job.task.instruction
    (dirs["agent"] / "prompt.txt").write_text(prompt, encoding="utf-8")
    record["prompt"] = {"path": "agent/prompt.txt", "sha256": hashlib.sha256(prompt.encode()).hexdigest(),
                        "delivered": bool(plan.argv) and plan.kind not in ("oracle",)}
    _execute(job, plan, dirs, runtime, record)
    if record["phase"] != "InfrastructureFailed":
        _score(job, runtime, dirs, trial_dir, record)
    if record["phase"] != "InfrastructureFailed" and job.spec.verification.panel is not None:
        _panel(job, runtime, trial_dir, record)
    if record["phase"] != "InfrastructureFailed" and job.spec.verification.cbu is not None:
        _cbu(job, runtime, trial_dir, record)
    record["finished_at"] = _now()
    record["durations"] = {**record.get("durations", {}), "total_sec": round(time.monotonic() - started, 4)}
    record["logs"] = {"stdout": "agent/stdout.log", "stderr": "agent/stderr.log"}
    write_json_atomic(trial_dir / "trial.json", record)
    return record


def _infra_only(job: TrialJob, trial_dir: Path, reason: str, message: str, attempt: int) -> dict[str, Any]:
    record = {"name": job.name, "campaign": job.campaign, "entry": job.entry, "task": job.task.slug,
              "seed": job.spec.seed, "attempt": attempt, "phase": "InfrastructureFailed", "reason": reason,
              "message": message, "finished_at": _now()}
    with contextlib.suppress(OSError):
        trial_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(trial_dir / "trial.json", record)
    return record


def _finish(record: dict[str, Any], phase: str, reason: str, message: str = "") -> None:
    record.update(phase=phase, reason=reason, message=message)


def _execute(job: TrialJob, plan: AgentPlan, dirs: dict[str, Path], runtime: LocalRuntime, record: dict[str, Any]) -> None:
    if plan.problem is not None:
        _finish(record, "Failed", "agent_error", plan.problem)
        return
    if plan.replay_source is not None:
        _replay(job, plan, dirs, record)
        return
    token_env, socket = _gateway_for(job, plan, runtime, record)
    if record["phase"] == "InfrastructureFailed":
        return
    limits = resolve_limits(job.spec, job.task, runtime.campaign_limits)
    spec = sandbox.SandboxSpec(
        argv=plan.argv, results_dir=dirs["artifacts"], logs_dir=dirs["agent"], limits=limits,
        data_dir=job.task.data_dir if job.task.data_dir.is_dir() else None, ro_binds=plan.ro_binds,
        env={**job.task.config.environment.env, **plan.env, **token_env}, gateway_socket=socket,
    )
    result = sandbox.run(spec, mechanism=runtime.mechanism, trial_id=f"{job.name[-30:]}-{uuid.uuid4().hex[:8]}")
    _record_sandbox(record, result, limits)
    _collect_usage(job, plan, runtime, record)


def _gateway_for(
    job: TrialJob, plan: AgentPlan, runtime: LocalRuntime, record: dict[str, Any]
) -> tuple[dict[str, str], Path | None]:
    if not plan.needs_gateway:
        return {}, None
    gateway = runtime.gateway
    if gateway is None or gateway.unix_socket is None:
        _finish(record, "InfrastructureFailed", "gateway_error", "this agent needs the model gateway, but none is running")
        return {}, None
    try:
        token = gateway.issue_token(job.name, entry=job.entry)
    except Exception as exc:  # the gateway is another component: any failure is the platform's
        _finish(record, "InfrastructureFailed", "gateway_error", f"the gateway refused a token: {exc}")
        return {}, None
    return {"OPENAI_API_KEY": token, "ANTHROPIC_API_KEY": token}, gateway.unix_socket


def _replay(job: TrialJob, plan: AgentPlan, dirs: dict[str, Path], record: dict[str, Any]) -> None:
    assert plan.replay_source is not None
    target = dirs["artifacts"] / job.task.artifact_name
    try:
        if plan.replay_source.is_dir():
            shutil.copytree(plan.replay_source, dirs["artifacts"], dirs_exist_ok=True)
        else:
            shutil.copyfile(plan.replay_source, target)
    except OSError as exc:
        _finish(record, "InfrastructureFailed", "storage_error", f"cannot copy the replayed artifact: {exc}")
        return
    record["replay"] = {"source": str(plan.replay_source), "label": plan.label}
    _finish(record, "Succeeded", "completed", f"replayed {plan.replay_source} ({plan.label})")


def _record_sandbox(record: dict[str, Any], result: sandbox.SandboxResult, limits: sandbox.SandboxLimits) -> None:
    record["exit_code"] = result.exit_code
    record["durations"] = {"agent_sec": round(result.wall_sec, 4)}
    record["sandbox"] = {
        "mechanism": result.mechanism, "enforced": result.enforced, "result_bytes": result.result_bytes,
        "oversized": result.oversized, "killed_processes": result.killed_processes,
        "limits": {"timeout_sec": limits.timeout_sec, "cpus": limits.cpus, "memory_mb": limits.memory_mb,
                   "pids": limits.pids, "result_max_bytes": limits.result_max_bytes},
    }
    if result.outcome == "sandbox_error":
        _finish(record, "InfrastructureFailed", "sandbox_error", result.detail or "the sandbox failed to start")
    elif result.outcome == "timeout":
        _finish(record, "Failed", "timeout", f"the agent ran past {limits.timeout_sec:g}s and was killed")
    elif result.outcome == "oom":
        _finish(record, "Failed", "oom", f"out of memory (limit {limits.memory_mb} MB): {result.detail}")
    elif result.oversized:
        _finish(record, "Failed", "oversized_result",
                f"/root/results holds {result.result_bytes} bytes, over the {limits.result_max_bytes}-byte limit")
    elif result.exit_code != 0:
        _finish(record, "Failed", "agent_error", f"the agent exited with status {result.exit_code}")
    else:
        _finish(record, "Succeeded", "completed")


def _collect_usage(job: TrialJob, plan: AgentPlan, runtime: LocalRuntime, record: dict[str, Any]) -> None:
    if plan.needs_gateway and runtime.gateway is not None:
        try:
            usage = runtime.gateway.usage(job.name)
            record["usage"] = usage.to_dict() if hasattr(usage, "to_dict") else dict(usage)
            record["cost_usd"] = float(record["usage"].get("cost_usd", 0.0))
            record["cost_source"] = "gateway metering × price snapshot"
        except Exception as exc:  # usage is bookkeeping: record the failure, keep the trial's outcome
            record["usage_error"] = str(exc)
    if job.cost_per_run_usd is not None:
        record["cost_usd"] = job.cost_per_run_usd
        record["cost_source"] = "entry costPerRunUSD (third-party measured)"
    record.setdefault("cost_usd", 0.0)


def _score(job: TrialJob, runtime: LocalRuntime, dirs: dict[str, Path], trial_dir: Path, record: dict[str, Any]) -> None:
    oversized = record.get("reason") == "oversized_result"
    started = time.monotonic()
    try:
        score = runtime.scorer(job.task, dirs["verifier"] if oversized else dirs["artifacts"],
                               job.spec.verification.gates, job.spec.verification.lean)
    except Exception as exc:  # the scorer is in-process: a crash is the platform's failure, not the model's
        _finish(record, "InfrastructureFailed", "storage_error" if isinstance(exc, OSError) else "sandbox_error",
                f"scoring failed: {type(exc).__name__}: {exc}")
        return
    write_json_atomic(trial_dir / "score.json", score)
    rewards = {key: score[key] for key in ("o_eval", "bo_eval", "raw") if isinstance(score.get(key), int | float)}
    write_json_atomic(dirs["verifier"] / "reward.json", {"reward": rewards.get("o_eval", 0.0), **rewards})
    record.setdefault("durations", {})["score_sec"] = round(time.monotonic() - started, 4)
    record["score"] = {key: score.get(key) for key in
                       ("raw", "oracle_raw", "baseline_raw", "baseline_source", "o_eval", "bo_eval", "gradable",
                        "hard_gate_failed", "error")}
    record["artifact"] = {"path": score.get("artifact"), "recovered_from": score.get("recovered_from"),
                          "recovery_note": score.get("recovery_note", "")}
    if record["phase"] == "Succeeded" and not score.get("gradable") and score.get("artifact") is None:
        _finish(record, "Failed", "no_artifact", str(score.get("error") or "no artifact was written"))
    elif record["phase"] == "Succeeded" and str(score.get("error") or "").startswith("missing artifact"):
        _finish(record, "Failed", "no_artifact", str(score.get("error")))


def _panel(job: TrialJob, runtime: LocalRuntime, trial_dir: Path, record: dict[str, Any]) -> None:
    """``verification.panel``: judge the trial's solution text; the block goes into ``score.json`` as ``panel``."""
    from anchorage.runtime.local.verifying import run_trial_panel

    settings = job.spec.verification.panel
    assert settings is not None
    artifact = (record.get("artifact") or {}).get("path")
    outcome = run_trial_panel(job.task, settings, trial=job.name, entry=job.entry, trial_dir=trial_dir,
                              artifact=artifact, gateway=runtime.gateway, mechanism=runtime.mechanism)
    if not _add_to_score(trial_dir, "panel", outcome.block, record):
        return
    block = outcome.block
    record["panel"] = {key: block.get(key) for key in
                       ("outcome", "status", "repaired", "votes", "launches", "revisions", "calls", "solution_source",
                        "reason", "mock_model")}
    record.setdefault("durations", {})["panel_sec"] = block.get("duration_sec")
    if outcome.failure is not None:
        _finish(record, "InfrastructureFailed", "gateway_error", outcome.failure)


def _add_to_score(trial_dir: Path, key: str, block: dict[str, Any], record: dict[str, Any]) -> bool:
    score_path = trial_dir / "score.json"
    try:
        score = json.loads(score_path.read_text(encoding="utf-8"))
        score[key] = block
        write_json_atomic(score_path, score)
    except (OSError, ValueError) as exc:
        _finish(record, "InfrastructureFailed", "storage_error", f"cannot add the {key} record to score.json: {exc}")
        return False
    return True


def _cbu(job: TrialJob, runtime: LocalRuntime, trial_dir: Path, record: dict[str, Any]) -> None:
    """``verification.cbu``: consequence-based utility of the trial's solution; ``cbu`` in ``score.json``."""
    from anchorage.runtime.local.verifying import run_trial_cbu

    settings = job.spec.verification.cbu
    assert settings is not None
    outcome = run_trial_cbu(job.task, settings, trial=job.name, entry=job.entry, trial_dir=trial_dir,
                            artifact=(record.get("artifact") or {}).get("path"), gateway=runtime.gateway,
                            mechanism=runtime.mechanism)
    if not _add_to_score(trial_dir, "cbu", outcome.block, record):
        return
    record["cbu"] = {key: outcome.block.get(key) for key in ("utility", "outcome", "reason", "rollouts", "calls")}
    record.setdefault("durations", {})["cbu_sec"] = outcome.block.get("duration_sec")
    if outcome.failure is not None:
        _finish(record, "InfrastructureFailed", "gateway_error", outcome.failure)
