"""Harbor job folders: a campaign exported as one, and a Harbor job's results imported to be scored here.

Called by ``anchorage export harbor RUN -o DIR`` and ``anchorage import harbor JOB_DIR``. The layout is
Harbor's job folder (``harbor jobs start``, Harbor 0.25): ``<job>/config.json`` (the job's config),
``<job>/result.json`` (the job result: counts, per agent × dataset rewards, tokens and cost) and one folder
per trial holding ``config.json``, ``result.json`` (the trial result: task, agent and model, token counts and
cost, ``verifier_result.rewards``, ``exception_info``, timings), ``agent/`` (the agent's logs),
``verifier/`` (``reward.txt``, ``reward.json`` and, from here, the full ``score.json``), ``artifacts/`` (what
the agent produced) and ``trial.log``. Field names are Harbor's; the test reads the export with Harbor's
own pydantic models.

Mapping of an export: one Harbor trial per Anchorage trial; the agent is the entry's agent kind and model,
the reward is O-Eval as scored (``rewards.reward``; the profile's other numbers beside it), an unknown cost
stays ``null``; an infrastructure failure is an ``exception_info`` with no reward.

An import reads each trial folder's ``result.json`` and ``artifacts/`` (through
:mod:`anchorage.confined`: Harbor's artifacts are what an agent wrote; no link is followed, sizes are
capped), scores the artifact with this project's scorer under the chosen profile and writes an ordinary
run folder (``RUNS_DIR/<name>/``: ``campaign.json``, one ``<trial>/trial.json`` + ``score.json`` +
``artifacts/`` per trial, the leaderboard and report), so ``view``, ``report``, ``compare`` and ``rescore``
work on it. Harbor's task name must be one of this project's tasks. A trial Harbor ended with an agent-side
exception (timeout, context exhausted, non-zero exit, refusal) and no artifact is the model's failure; any
other exception (sandbox, provider, Harbor itself) is an infrastructure failure, never a zero.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from anchorage import __version__, confined
from anchorage.campaigns.aggregation import INFRA_PHASE, Leaderboard, TrialResult, leaderboard
from anchorage.errors import InputError
from anchorage.report.runs import RunReadError, Runs, is_terminal_record

COPY_LIMIT = 64 << 20
"""Bytes copied per trial folder part (agent logs, artifacts) in either direction."""

RESULT_LIMIT = 16 << 20

#: Harbor's exception types that end a trial for the agent's own reasons (Harbor's "agent exhausted its
#: budget", "agent refused", and a non-zero exit of the agent): without an artifact, the model's failure.
AGENT_EXCEPTIONS = {
    "AgentTimeoutError": "timeout", "ContextWindowExceededError": "agent_error",
    "OutputTokenExceededError": "agent_error", "ContextLengthExceededError": "agent_error",
    "OutputLengthExceededError": "agent_error", "AgentSafetyRefusalError": "agent_error",
    "ContentPolicyViolationError": "agent_error", "NonZeroAgentExitCodeError": "agent_error",
}
#: Verifier-side exceptions: Harbor's own verifier is not used on import (this project's scorer is).
VERIFIER_EXCEPTIONS = {"VerifierTimeoutError", "RewardFileNotFoundError", "RewardFileEmptyError",
                       "VerifierOutputParseError"}


# ---------------------------------------------------------------------------------------------- export


def export_harbor(runs: Runs, campaign: str, out_dir: Path) -> Path:
    """Write ``campaign`` as the Harbor job folder ``out_dir/<campaign>``; returns that folder."""
    run = runs.campaign(campaign)
    finished = [r for r in run.records if is_terminal_record(r)]
    if not finished:
        raise InputError(f"campaign {campaign!r} in {runs.location} has no finished trial yet",
                         hint="export it once some trials have finished")
    job_dir = out_dir / campaign
    if job_dir.exists() and any(job_dir.iterdir()):
        raise InputError(f"{job_dir} exists and is not empty", hint="export into another folder (-o) or remove it")
    job_dir.mkdir(parents=True, exist_ok=True)
    job_id = _uuid("job", campaign, runs.location)
    spec = (run.manifest or {}).get("spec") or {}
    agents = {_agent_key(r): _agent_config(r) for r in finished}
    tasks = sorted({str(r["task"]) for r in finished})
    trial_results = [_export_trial(runs, campaign, record, job_dir, job_id) for record in finished]
    _write(job_dir / "config.json", {
        "job_name": campaign, "jobs_dir": str(out_dir),
        "n_attempts": int(spec.get("seeds") or max(int(r["seed"]) for r in finished) + 1),
        "agents": list(agents.values()), "tasks": [{"path": f"tasks/{t}"} for t in tasks],
    })
    starts = sorted(str(r["started_at"]) for r in finished if r.get("started_at"))
    ends = sorted(str(r["finished_at"]) for r in finished if r.get("finished_at"))
    _write(job_dir / "result.json", {
        "id": job_id, "started_at": starts[0] if starts else _now(), "finished_at": ends[-1] if ends else None,
        "n_total_trials": max(len(run.planned), len(finished)), "stats": _job_stats(trial_results, finished),
    })
    _write(job_dir / "anchorage.json", {"exported_by": f"anchorage {__version__}", "campaign": campaign,
                                         "location": runs.location, "metadata": run.metadata(),
                                         "baseline": run.baseline, "manifest": run.manifest})
    return job_dir


def _export_trial(runs: Runs, campaign: str, record: dict[str, Any], job_dir: Path, job_id: str) -> dict[str, Any]:
    trial = str(record["name"])
    folder = job_dir / trial
    for part in ("agent", "verifier", "artifacts"):
        (folder / part).mkdir(parents=True, exist_ok=True)
    budget = COPY_LIMIT
    for relative in runs.files(campaign, trial):
        top = relative.split("/", 1)[0]
        if top in ("agent", "artifacts", "verifier") and "/" in relative:
            target = relative
        elif relative in ("score.json", "trial.json", "transcript.jsonl"):
            target = f"verifier/{relative}" if relative == "score.json" else f"agent/{relative}"
        else:
            continue
        try:
            data = runs.read(campaign, trial, relative, limit=budget)
        except RunReadError:
            continue   # too large or not a plain file: left out (the Anchorage run still has it)
        if data is None:
            continue
        budget -= len(data)
        path = folder / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    score = record.get("score") or {}
    infra = record.get("phase") == INFRA_PHASE
    rewards = None
    if not infra:
        reward = float(score.get("o_eval") or 0.0)
        rewards = {"reward": reward, **{k: float(v) for k, v in score.items()
                                        if k in ("raw", "bo_eval", "oracle_raw", "baseline_raw")
                                        and isinstance(v, int | float)}}
        (folder / "verifier" / "reward.txt").write_text(f"{reward}\n", encoding="utf-8")
    config = {"task": {"path": f"tasks/{record['task']}"}, "trial_name": trial, "trials_dir": str(job_dir),
              "agent": _agent_config(record), "job_id": job_id}
    _write(folder / "config.json", config)
    agent = record.get("agent") or {}
    usage = record.get("usage") or {}
    cost = record.get("cost_usd")
    result: dict[str, Any] = {
        "id": _uuid("trial", campaign, trial), "task_name": str(record["task"]), "trial_name": trial,
        "trial_uri": folder.resolve().as_uri(), "task_id": {"path": f"tasks/{record['task']}"},
        "source": "anchorage", "task_checksum": _checksum(record), "config": config,
        "agent_info": {"name": str(agent.get("kind") or record["entry"]), "version": __version__,
                       "model_info": ({"name": str(agent["model"]), "provider": None} if agent.get("model") else None)},
        "agent_result": {
            "n_input_tokens": usage.get("input_tokens"), "n_cache_tokens": usage.get("cached_input_tokens"),
            "n_output_tokens": usage.get("output_tokens"), "cost_usd": cost if isinstance(cost, int | float) else None,
            "metadata": {"entry": record["entry"], "seed": record["seed"], "phase": record.get("phase"),
                         "reason": record.get("reason"), "message": record.get("message"),
                         "scoring_profile": record.get("scoring_profile"), "versions": record.get("versions"),
                         "cost_unknown_reason": record.get("cost_unknown_reason")},
        } if usage or cost is not None else None,
        "verifier_result": {"rewards": rewards} if rewards is not None else None,
        "exception_info": {"exception_type": "InfrastructureFailure",
                           "exception_message": f"{record.get('reason')}: {record.get('message') or ''}",
                           "exception_traceback": "", "occurred_at": record.get("finished_at") or _now()}
        if infra else None,
        "started_at": record.get("started_at"), "finished_at": record.get("finished_at"),
        "agent_execution": _timing(record, "agent_sec"), "verifier": _timing(record, "score_sec", after_agent=True),
    }
    _write(folder / "result.json", result)
    (folder / "trial.log").write_text(f"{record.get('phase')} ({record.get('reason')}): {record.get('message') or ''}\n",
                                      encoding="utf-8")
    return result


def _job_stats(trial_results: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    evals: dict[str, dict[str, Any]] = defaultdict(lambda: {"n_trials": 0, "n_errors": 0, "metrics": [],
                                                            "reward_stats": {"reward": {}}, "exception_stats": {}})
    totals: dict[str, Any] = {"n_input_tokens": None, "n_cache_tokens": None, "n_output_tokens": None, "cost_usd": None}
    cost_unknown = False
    for result, record in zip(trial_results, records, strict=True):
        model = ((result["agent_info"].get("model_info") or {}).get("name"))
        key = f"{result['agent_info']['name']}__{model}__{record['task']}" if model else \
            f"{result['agent_info']['name']}__{record['task']}"
        stats = evals[key]
        stats["n_trials"] += 1
        if result["exception_info"]:
            stats["n_errors"] += 1
            stats["exception_stats"].setdefault(result["exception_info"]["exception_type"], []).append(
                result["trial_name"])
        else:
            reward = result["verifier_result"]["rewards"]["reward"]
            stats["reward_stats"]["reward"].setdefault(str(reward), []).append(result["trial_name"])
        agent_result = result.get("agent_result") or {}
        for field in ("n_input_tokens", "n_cache_tokens", "n_output_tokens"):
            if agent_result.get(field) is not None:
                totals[field] = (totals[field] or 0) + int(agent_result[field])
        if agent_result.get("cost_usd") is None and (record.get("usage") or {}).get("requests"):
            cost_unknown = True
        elif agent_result.get("cost_usd") is not None:
            totals["cost_usd"] = (totals["cost_usd"] or 0.0) + float(agent_result["cost_usd"])
    for stats in evals.values():
        rewards = [float(v) for v, names in stats["reward_stats"]["reward"].items() for _ in names]
        if rewards:
            stats["metrics"] = [{"mean": sum(rewards) / len(rewards)}]
    if cost_unknown:
        totals["cost_usd"] = None   # a part of it is unknown: the sum is unknown, never a partial number
    n_errors = sum(1 for r in trial_results if r["exception_info"])
    return {"n_completed_trials": len(trial_results), "n_errored_trials": n_errors, "evals": dict(evals), **totals}


def _agent_key(record: dict[str, Any]) -> str:
    agent = record.get("agent") or {}
    return f"{agent.get('kind') or record['entry']}/{agent.get('model') or ''}"


def _agent_config(record: dict[str, Any]) -> dict[str, Any]:
    agent = record.get("agent") or {}
    return {"name": str(agent.get("kind") or record["entry"]), "model_name": agent.get("model"),
            "kwargs": {"anchorage_entry": record["entry"]}}


def _timing(record: dict[str, Any], key: str, *, after_agent: bool = False) -> dict[str, Any] | None:
    durations = record.get("durations") or {}
    started = record.get("started_at")
    seconds = durations.get(key)
    if not started or not isinstance(seconds, int | float):
        return None
    begin = datetime.fromisoformat(str(started))
    if after_agent and isinstance(durations.get("agent_sec"), int | float):
        begin = begin.fromtimestamp(begin.timestamp() + float(durations["agent_sec"]), tz=begin.tzinfo)
    end = begin.fromtimestamp(begin.timestamp() + float(seconds), tz=begin.tzinfo)
    return {"started_at": begin.isoformat(), "finished_at": end.isoformat()}


def _checksum(record: dict[str, Any]) -> str:
    return hashlib.sha256(f"{record['task']}\0{(record.get('versions') or {}).get('scorer')}".encode()).hexdigest()


def _uuid(*parts: Any) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "anchorage:" + "\0".join(map(str, parts))))


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _write(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True, default=str, allow_nan=False), encoding="utf-8")


# ---------------------------------------------------------------------------------------------- import


def import_harbor(job_dir: Path, runs_dir: Path, *, name: str | None = None, profile: str | None = None,
                  baseline: str | None = None, with_plots: bool = True) -> tuple[Path, Leaderboard, dict[str, Path]]:
    """Score a Harbor job's trials here; returns the run folder written, its board and the files written."""
    from anchorage.report.writing import write_outputs
    from anchorage.scoring import score_artifact
    from anchorage.scoring.profiles import get_profile
    from anchorage.tasks import load_task, resolve_task
    from anchorage.trials.records import SCORE_KEYS

    chosen = get_profile(profile)
    job_dir = job_dir.resolve()
    trials = _harbor_trials(job_dir)
    campaign = _name(name or job_dir.name)
    out_dir = runs_dir / campaign
    if out_dir.exists() and any(out_dir.iterdir()):
        raise InputError(f"{out_dir} exists and is not empty", hint="give the import another --name")
    tasks: dict[str, Any] = {}
    for folder, result in trials:
        task_name = str(result.get("task_name") or "")
        if task_name not in tasks:
            try:
                tasks[task_name] = load_task(resolve_task(task_name))
            except InputError as exc:
                raise InputError(f"{folder.name}/result.json: Harbor's task {task_name!r} is not a task of this "
                                 f"project ({exc.message})", hint=exc.hint or "import jobs run on this project's tasks "
                                 "(anchorage export harbor writes them with the same names)") from None
    out_dir.mkdir(parents=True, exist_ok=True)
    taken: dict[tuple[str, str], set[int]] = defaultdict(set)
    records: list[dict[str, Any]] = []
    for folder, result in sorted(trials, key=lambda t: (str(t[1].get("started_at") or ""), t[0].name)):
        task = tasks[str(result["task_name"])]
        entry = _entry(result)
        seed = _seed(result, taken[(entry, task.slug)])
        taken[(entry, task.slug)].add(seed)
        trial = _name(f"{campaign}-{entry}-{task.slug}-s{seed}")
        target = out_dir / trial
        target.mkdir(parents=True, exist_ok=True)
        copied = _copy_artifacts(folder, target / "artifacts")
        exception = result.get("exception_info") or {}
        kind = str(exception.get("exception_type") or "")
        record = _imported_record(campaign, trial, entry, task.slug, seed, result)
        if kind and kind not in AGENT_EXCEPTIONS and kind not in VERIFIER_EXCEPTIONS:
            record.update(phase=INFRA_PHASE, reason="sandbox_error",
                          message=f"Harbor ended the trial with {kind}: {exception.get('exception_message') or ''}"
                          .strip())
        elif not copied and kind in AGENT_EXCEPTIONS:
            record.update(phase="Failed", reason=AGENT_EXCEPTIONS[kind],
                          message=f"no artifact; Harbor ended the agent with {kind}: "
                          f"{exception.get('exception_message') or ''}".strip())
        elif not copied:
            record.update(phase="Failed", reason="no_artifact", message="the Harbor trial left no artifact")
        else:
            score = score_artifact(task, target / "artifacts", profile=chosen).to_dict()
            (target / "score.json").write_text(json.dumps(score, indent=2, sort_keys=True, default=str),
                                               encoding="utf-8")
            record["score"] = {k: score[k] for k in SCORE_KEYS if score.get(k) is not None}
            record["scoring_profile"] = chosen.ref
            record.update(phase="Succeeded", reason="completed",
                          message=f"imported from Harbor and scored under {chosen.ref}")
        record["message"] = f"Harbor trial {result.get('trial_name')}: {record['message']}"
        (target / "trial.json").write_text(json.dumps(record, indent=2, sort_keys=True, default=str), encoding="utf-8")
        records.append(record)
    meta = {"name": campaign, "baseline": baseline, "trials": [r["name"] for r in records],
            "imported_from": {"harbor_job": str(job_dir), "trials": len(trials)},
            "manifest": {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign",
                         "metadata": {"name": campaign},
                         "spec": {"baseline": baseline, "scoring": {"profile": chosen.name},
                                  "tasks": sorted({r["task"] for r in records}),
                                  "entries": [{"name": e} for e in sorted({r["entry"] for r in records})]}}}
    (out_dir / "campaign.json").write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")
    board = leaderboard([TrialResult.from_record(r) for r in records], baseline)
    outputs = write_outputs(out_dir, f"{campaign} (imported from Harbor, scored under {chosen.ref})", board, records,
                            with_plots=with_plots)
    return out_dir, board, outputs


def _harbor_trials(job_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    if not job_dir.is_dir():
        raise InputError(f"{job_dir} is not a folder", hint="pass a Harbor job folder (jobs/<job name>)")
    found: list[tuple[Path, dict[str, Any]]] = []
    for folder in sorted(p for p in job_dir.iterdir() if p.is_dir() and not p.is_symlink()):
        try:
            data = json.loads(confined.read_bytes(folder, "result.json", limit=RESULT_LIMIT))
        except confined.ConfinedError as exc:
            if exc.reason == "missing":
                continue
            raise InputError(f"{folder}/result.json cannot be read: {exc.message}") from None
        except ValueError as exc:
            raise InputError(f"{folder}/result.json is not valid JSON: {exc}",
                             hint="a Harbor trial folder holds its TrialResult as result.json") from None
        if not isinstance(data, dict) or "task_name" not in data or "agent_info" not in data:
            raise InputError(f"{folder}/result.json is not a Harbor trial result (no task_name or agent_info)",
                             hint="pass the job folder that harbor jobs start wrote (jobs/<job name>)")
        found.append((folder, data))
    if not found:
        raise InputError(f"{job_dir} holds no Harbor trial (no <trial>/result.json)",
                         hint="pass the job folder that harbor jobs start wrote (jobs/<job name>)")
    return found


def _copy_artifacts(folder: Path, target: Path) -> bool:
    """Copy the trial's ``artifacts/`` (never following links); True when it held a file."""
    target.mkdir(parents=True, exist_ok=True)
    source = folder / "artifacts"
    if not source.is_dir() or source.is_symlink():
        return False
    fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    try:
        report = confined.copy_tree(source, fd, max_bytes=COPY_LIMIT)
    finally:
        os.close(fd)
    return report.files > 0


def _imported_record(campaign: str, trial: str, entry: str, task: str, seed: int,
                     result: dict[str, Any]) -> dict[str, Any]:
    agent_info = result.get("agent_info") or {}
    model = (agent_info.get("model_info") or {}).get("name")
    agent_result = result.get("agent_result") or {}
    cost = agent_result.get("cost_usd")
    tokens = {k: agent_result.get(k) for k in ("n_input_tokens", "n_cache_tokens", "n_output_tokens")}
    usage = None
    if any(v is not None for v in tokens.values()):
        usage = {"input_tokens": tokens["n_input_tokens"] or 0, "cached_input_tokens": tokens["n_cache_tokens"] or 0,
                 "output_tokens": tokens["n_output_tokens"] or 0, "cost_known": cost is not None,
                 "cost_usd": cost, "source": "Harbor's agent_result"}
    started, finished = result.get("started_at"), result.get("finished_at")
    total = None
    if started and finished:
        try:
            total = (datetime.fromisoformat(str(finished)) - datetime.fromisoformat(str(started))).total_seconds()
        except ValueError:
            total = None
    return {
        "apiVersion": "anchorage.dev/v1alpha1", "kind": "TrialRecord", "name": trial, "campaign": campaign,
        "entry": entry, "task": task, "seed": seed, "attempt": 1, "driver": "local",
        "agent": {"kind": str(agent_info.get("name") or "harbor"), "model": model,
                  "label": f"{agent_info.get('name')} {agent_info.get('version') or ''} (Harbor)".strip()},
        "started_at": started, "finished_at": finished, "usage": usage,
        "cost_usd": float(cost) if isinstance(cost, int | float) else None,
        "cost_source": "Harbor's agent_result" if cost is not None else None,
        "cost_unknown_reason": None if cost is not None else "Harbor's result names no cost for this trial",
        "durations": {"total_sec": total}, "versions": {"anchorage": __version__},
        "artifact": {"path": "artifacts"},
        "logs": {},
    }


def _seed(result: dict[str, Any], taken: set[int]) -> int:
    """The seed an Anchorage export recorded (when still free), else the next free one in start order."""
    recorded = ((result.get("agent_result") or {}).get("metadata") or {}).get("seed")
    if isinstance(recorded, int) and recorded >= 0 and recorded not in taken:
        return recorded
    return next(n for n in range(len(taken) + 1) if n not in taken)


def _entry(result: dict[str, Any]) -> str:
    """The entry's name: the one an Anchorage export recorded, else Harbor's agent and model."""
    kwargs = ((result.get("config") or {}).get("agent") or {}).get("kwargs") or {}
    if isinstance(kwargs.get("anchorage_entry"), str):
        return _name(kwargs["anchorage_entry"])
    agent_info = result.get("agent_info") or {}
    model = (agent_info.get("model_info") or {}).get("name")
    name = str(agent_info.get("name") or "agent")
    return _name(f"{name}-{model.split('/')[-1]}" if model else name)


def _name(text: str) -> str:
    """A name usable as a campaign, entry or trial folder: lower-case letters, digits and dashes."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return cleaned[:120] or "imported"
