"""A campaign exported as Inspect AI eval logs, so ``inspect view`` (and Inspect's log reader) open it.

Called by ``anchorage export inspect RUN -o DIR``. Needs the optional extra ``anchorage[inspect]`` (the real
``inspect_ai`` package): the logs are built from its own log types and written by its own writer, never by
re-writing its schema here. The mapping:

* one eval log per (entry, task) — Inspect's unit is one task run by one model: ``eval.task`` is the task,
  ``eval.model`` the entry's model (``anchorage/<kind>`` for an agent without one: ``anchorage/oracle``),
  ``eval.solver`` the agent kind, the entry's name in ``eval.metadata`` and the tags; ``eval.task_id`` and
  ``eval.run_id`` are distinct per entry (``inspect view`` takes logs sharing a task id for retries of one
  another and shows only one of them);
* one sample per trial: the sample id is the task, the epoch is the seed's rank (1, 2, …; the seed itself in
  ``metadata.seed``); the input is the prompt the agent got; the **target** the task's anchors (each scored
  metric's path, anchor value, direction and unit, from the score records); the **answer** (``Score.answer``,
  the viewer's ANSWER column) the scored artifact as the agent wrote it (capped at :data:`ANSWER_LIMIT`); the
  messages come from the gateway's transcript when it was captured (Inspect's own converters of OpenAI
  chat/responses and Anthropic messages); the sample's **events** are its transcript: an info event with the
  trial's outcome, a model event per call with its raw request and response, a score event per score; the
  scores ``o_eval`` as scored (its explanation the trial's message: the failed gates, the penalty) and
  ``bo_eval`` against the board's F (its explanation says which F), their metadata the score record; tokens and
  cost per model (an unknown cost stays unknown: ``total_cost`` None); an infrastructure failure is a sample
  error with its message, never a zero score;
* every string an agent could have written is made valid Unicode first (:func:`anchorage.text.deep_clean`): a
  lone surrogate in an artifact never breaks the export or the viewer;
* the log's results: the mean and standard error of ``o_eval`` over the scored seeds; its status
  ``success`` when every seed of the cell finished, ``started`` while some are missing or running.

Every number keeps its provenance in the log's metadata: campaign, profile, price snapshot, versions.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import statistics
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anchorage.campaigns.aggregation import INFRA_PHASE, Leaderboard
from anchorage.errors import InputError
from anchorage.report.pages import board_bo
from anchorage.report.runs import RunReadError, Runs, is_terminal_record
from anchorage.text import decode
from anchorage.text import deep_clean as clean

if TYPE_CHECKING:
    from inspect_ai.event import Event
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.model import ChatMessage, ModelOutput

PROMPT_LIMIT = 1 << 20
"""The prompt is read up to this many bytes (longer ones are cut, and the sample says so)."""
ANSWER_LIMIT = 64 * 1024
"""Characters of the scored artifact a sample carries as its answer (a longer one: its start, said so)."""
ARTIFACT_READ_LIMIT = 16 * 1024 * 1024
"""An artifact larger than this is not read for the answer (the sample says so)."""

SCORE_NAME = "o_eval"
BOARD_SCORE = "bo_eval"
INSTALL_HINT = "install the optional extra: pip install 'anchorage[inspect]' (the inspect_ai package)"


def require_inspect() -> None:
    """An :class:`InputError` naming the extra when ``inspect_ai`` is not installed."""
    try:
        import inspect_ai.log  # noqa: F401
    except ImportError:
        raise InputError("exporting Inspect logs needs the inspect_ai package", hint=INSTALL_HINT) from None


def export_inspect(runs: Runs, campaign: str, out_dir: Path, *, fmt: str = "eval") -> list[Path]:
    """Write one Inspect eval log per (entry, task) of ``campaign`` into ``out_dir``; returns the files."""
    require_inspect()
    from inspect_ai.log import write_eval_log

    if fmt not in ("eval", "json"):
        raise InputError(f"--format {fmt!r} is not eval or json", hint="use --format eval (Inspect's default) or json")
    run = runs.campaign(campaign)
    if not run.records:
        raise InputError(f"campaign {campaign!r} in {runs.location} has no trial records yet",
                         hint="export it once some trials have finished")
    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for record in run.records:
        cells[(str(record["entry"]), str(record["task"]))].append(record)
    spec = (run.manifest or {}).get("spec") or {}
    planned_seeds = spec.get("seeds") if isinstance(spec.get("seeds"), int) else None
    meta = run.metadata()
    logs = asyncio.run(_build_all(runs, campaign, cells, meta, planned_seeds, run.board))
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for (entry, task), log in sorted(logs.items()):
        stamp = re.sub(r"[^0-9T]", "", log.eval.created.split(".")[0].split("+")[0])
        path = out_dir / f"{stamp}_{_slug(task)}_{_slug(entry)}_{log.eval.eval_id}.{fmt}"
        write_eval_log(log, path, format=fmt)   # type: ignore[arg-type]
        written.append(path)
    return written


async def _build_all(runs: Runs, campaign: str, cells: dict[tuple[str, str], list[dict[str, Any]]],
                     meta: dict[str, Any], planned_seeds: int | None, board: Leaderboard) -> dict[tuple[str, str], EvalLog]:
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (_, task), records in cells.items():
        by_task[task] += [r for r in records if r.get("phase") != INFRA_PHASE]
    targets = {task: _target(runs, campaign, records) for task, records in by_task.items()}
    return {cell: await _build_log(runs, campaign, cell, records, meta, planned_seeds, board, targets)
            for cell, records in cells.items()}


async def _build_log(runs: Runs, campaign: str, cell: tuple[str, str], records: list[dict[str, Any]],
                     meta: dict[str, Any], planned_seeds: int | None, board: Leaderboard,
                     targets: dict[str, str]) -> EvalLog:
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalPlan,
        EvalPlanStep,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
    )

    entry, task = cell
    records = sorted(records, key=lambda r: int(r["seed"]))
    agent = records[0].get("agent") or {}
    model = _model_name(agent)
    finished = [r for r in records if is_terminal_record(r)]
    target = targets[task]
    samples = [await _sample(runs, campaign, r, epoch, model, board, target)
               for epoch, r in enumerate(records, start=1) if is_terminal_record(r)]
    scored = [s for s in samples if s.scores]
    values = [float(s.scores[SCORE_NAME].value) for s in scored if s.scores]   # type: ignore[arg-type]
    metrics = {}
    if values:
        metrics["mean"] = EvalMetric(name="mean", value=statistics.fmean(values))
        if len(values) >= 2:
            metrics["stderr"] = EvalMetric(name="stderr", value=statistics.stdev(values) / math.sqrt(len(values)))
    expected = max(planned_seeds or 0, len(records))
    complete = len(finished) == expected
    starts = sorted(str(r["started_at"]) for r in records if r.get("started_at"))
    ends = sorted(str(r["finished_at"]) for r in finished if r.get("finished_at"))
    created = starts[0] if starts else datetime.now(UTC).isoformat()
    profiles = sorted({str(r.get("scoring_profile")) for r in finished if r.get("scoring_profile")})
    provenance = {
        "exported_by": "anchorage export inspect", "campaign": campaign, "location": meta.get("location"),
        "entry": entry, "agent": agent, "baseline": meta.get("baseline"), "scoring_profiles": profiles,
        "price_snapshots": meta.get("price_snapshots"), "anchorage_versions": meta.get("anchorage_versions"),
        "scorers": meta.get("scorers"), "drivers": meta.get("drivers"),
        "seeds": [int(r["seed"]) for r in records], "complete": complete,
        "note": "one sample per trial; the epoch is the seed's rank (the seed is in each sample's metadata)",
        "f_rule": board.f_rule, "board_f": (board.f_by_task.get(task) or {}),
    }
    eval_id = _id(campaign, meta.get("location"), entry, task)
    spec = EvalSpec(
        eval_id=eval_id, run_id=_id(campaign, meta.get("location"), entry), created=created, task=task,
        task_id=_id("task", campaign, meta.get("location"), entry, task),
        task_version=str((records[0].get("versions") or {}).get("scorer") or 0),
        task_display_name=f"{task} · {entry}", solver=str(agent.get("kind") or entry),
        tags=[campaign, entry, *profiles],
        dataset=EvalDataset(name=task, samples=1, sample_ids=[task]), model=model,
        config=EvalConfig(epochs=expected), packages={"anchorage": str((meta.get("anchorage_versions") or ["?"])[-1])},
        metadata=provenance,
    )
    plan = EvalPlan(name="anchorage", steps=[EvalPlanStep(solver=str(agent.get("kind") or entry),
                                                          params={"entry": entry, **agent})])
    board_values = [float(s.scores[BOARD_SCORE].value) for s in scored   # type: ignore[arg-type]
                    if s.scores and BOARD_SCORE in s.scores]
    scores = [EvalScore(name=SCORE_NAME, scorer="anchorage", scored_samples=len(scored),
                        unscored_samples=len(samples) - len(scored), metrics=metrics,
                        metadata={"scoring_profiles": profiles})] if values else []
    if board_values:
        scores.append(EvalScore(name=BOARD_SCORE, scorer="anchorage", scored_samples=len(board_values),
                                unscored_samples=len(samples) - len(board_values),
                                metrics={"mean": EvalMetric(name="mean", value=statistics.fmean(board_values))},
                                metadata={"f_rule": board.f_rule}))
    results = EvalResults(
        total_samples=expected, completed_samples=len(scored), scores=scores,
        metadata={"infrastructure_failures": sum(1 for r in finished if r.get("phase") == INFRA_PHASE),
                  "unfinished": expected - len(finished)},
    )
    usage: dict[str, Any] = {}
    for sample in samples:
        for name, counted in sample.model_usage.items():
            usage[name] = counted if name not in usage else usage[name] + counted
    stats = EvalStats(started_at=created, completed_at=ends[-1] if ends and complete else "", model_usage=usage)
    return EvalLog(eval=spec, plan=plan, results=results, stats=stats, samples=samples,
                   status="success" if complete else "started", tags=spec.tags or [], metadata=provenance)


async def _sample(runs: Runs, campaign: str, record: dict[str, Any], epoch: int, model: str, board: Leaderboard,
                  target: str) -> EvalSample:
    from inspect_ai._util.error import EvalError
    from inspect_ai.event import InfoEvent, ScoreEvent
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Score

    trial = str(record["name"])
    prompt, prompt_note = _prompt(runs, campaign, trial, record)
    messages, output, events, transcript_note = await _conversation(runs, campaign, trial, model)
    score = record.get("score") or {}
    durations = record.get("durations") or {}
    infra = record.get("phase") == INFRA_PHASE
    details = _score_details(runs, campaign, trial)
    metadata: dict[str, Any] = {
        "trial": trial, "seed": int(record["seed"]), "phase": record.get("phase"), "reason": record.get("reason"),
        "message": record.get("message"), "scoring_profile": record.get("scoring_profile"),
        "cost_usd": record.get("cost_usd"), "cost_unknown_reason": record.get("cost_unknown_reason"),
        "durations": durations, "versions": record.get("versions"), "attempt": record.get("attempt"),
    }
    if prompt_note:
        metadata["prompt_note"] = prompt_note
    if transcript_note:
        metadata["transcript_note"] = transcript_note
    started = record.get("started_at")
    stamp = {"timestamp": started} if isinstance(started, str) else {}
    outcome = InfoEvent(source="anchorage", data=clean({
        "trial": trial, "phase": record.get("phase"), "reason": record.get("reason"), "message": record.get("message"),
        "artifact": (record.get("artifact") or {}).get("path")}), **stamp)
    scores = None
    tail: list[Any] = []
    if not infra:
        answer, answer_note = _answer(runs, campaign, trial, record)
        if answer_note:
            metadata["answer_note"] = answer_note
        explanation = str(record.get("message") or "") or None
        scores = {SCORE_NAME: Score(value=float(score.get("o_eval") or 0.0), answer=answer, explanation=explanation,
                                    metadata=clean({"score": score, **details}))}
        value, why = board_bo(record, board)
        if value is not None:
            scores[BOARD_SCORE] = Score(value=value, answer=answer, explanation=clean(
                f"Robust BO-Eval on the campaign's board, against its {why} (the trial's own, against the task "
                f"configuration's F: {score.get('bo_eval')})"), metadata={"board_f_rule": board.f_rule})
        tail = [ScoreEvent(score=item, target=target, scorer=name) for name, item in scores.items()]
    return EvalSample(
        id=str(record["task"]), epoch=epoch, input=prompt, target=target, messages=messages,
        output=output or ModelOutput(model=model), scores=scores, metadata=clean(metadata),
        events=[outcome, *events, *tail], model_usage=_usage(record), started_at=record.get("started_at"),
        completed_at=record.get("finished_at"), total_time=durations.get("total_sec"),
        working_time=durations.get("agent_sec"), uuid=_id(campaign, trial),
        error=EvalError(message=clean(f"infrastructure failure ({record.get('reason')}): {record.get('message') or ''}"),
                        traceback="", traceback_ansi="") if infra else None,
    )


def _answer(runs: Runs, campaign: str, trial: str, record: dict[str, Any]) -> tuple[str, str]:
    """The scored artifact as the agent wrote it (its start when long), or why there is none."""
    path = (record.get("artifact") or {}).get("path")
    if not path:
        return "(no artifact: " + clean(str((record.get("score") or {}).get("error") or "none was found")) + ")", ""
    try:
        data = runs.read(campaign, trial, str(path), limit=ARTIFACT_READ_LIMIT)
    except RunReadError as exc:
        return f"(the artifact {path} cannot be shown: {clean(str(exc))})", "artifact unreadable or too large"
    if data is None:
        return f"(the artifact {path} was not kept)", "artifact missing from the trial's folder"
    text = decode(data)
    if len(text) <= ANSWER_LIMIT:
        return text, ""
    return (text[:ANSWER_LIMIT] + f"\n… ({len(text) - ANSWER_LIMIT} more characters in {path})",
            f"the artifact has {len(text)} characters: its first {ANSWER_LIMIT} are the answer")


def _target(runs: Runs, campaign: str, records: list[dict[str, Any]]) -> str:
    """The task's anchors, one line per scored metric (path = anchor, direction, unit), from a score record."""
    for record in records:
        try:
            full = runs.json(campaign, str(record["name"]), "score.json")
        except RunReadError:
            continue
        metrics = (full or {}).get("metrics") if isinstance(full, dict) else None
        if not metrics:
            continue
        lines = [f"{m.get('path')} = {m.get('anchor')} ({m.get('direction') or 'target'}"
                 + (f", {m.get('unit')}" if m.get("unit") else "") + ")"
                 for m in metrics if isinstance(m, dict) and m.get("anchor") is not None]
        source = full.get("anchor_source") or full.get("oracle_source")
        if lines:
            return str(clean("\n".join(lines) + (f"\n(anchors: {source})" if source else "")))
    return "(the anchors are in the task's score_config.json: no trial of this task has a score record)"


def _prompt(runs: Runs, campaign: str, trial: str, record: dict[str, Any]) -> tuple[str, str]:
    relative = str((record.get("prompt") or {}).get("path") or "agent/prompt.txt")
    try:
        data = runs.read(campaign, trial, relative, limit=PROMPT_LIMIT)
    except RunReadError as exc:
        return "(the prompt cannot be shown)", str(exc)
    if data is None:
        return "(no prompt was kept for this trial)", "no prompt file"
    return decode(data) or "(empty prompt)", ""


def _score_details(runs: Runs, campaign: str, trial: str) -> dict[str, Any]:
    """Per-metric rewards and the gates and obligations with their messages, from the trial's score.json."""
    try:
        full = runs.json(campaign, trial, "score.json")
    except RunReadError:
        return {}
    if not isinstance(full, dict):
        return {}
    keep = ("metrics", "gates", "obligations", "profile_ref", "penalty", "hard_gate_failed")
    return {k: clean(full[k]) for k in keep if k in full}


async def _conversation(runs: Runs, campaign: str, trial: str,
                        model: str) -> tuple[list[ChatMessage], ModelOutput | None, list[Event], str]:
    """The trial's model calls as Inspect model events (each call's messages, answer and raw request and
    response), and the messages of the last call with its answer — all by Inspect's own converters."""
    try:
        transcript = runs.transcript(campaign, trial)
    except RunReadError as exc:
        return [], None, [], f"the transcript cannot be read: {exc}"
    if transcript is None:
        return [], None, [], ""
    calls = [line for line in transcript.lines if isinstance(line.get("request"), dict)
             and not line["request"].get("truncated")]
    if not calls:
        return [], None, [], "the transcript holds no complete request"
    events: list[Event] = []
    problems: list[str] = []
    messages: list[ChatMessage] = []
    output: ModelOutput | None = None
    for line in map(clean, calls):
        try:
            messages, output = await _call(line)
        except Exception as exc:   # a body Inspect cannot read is noted, never fatal to the export
            problems.append(f"{type(exc).__name__}: {exc}")
            messages, output = [], None
            continue
        events.append(_event(line, messages, output, model))
    note = f"{len(events)} of {len(calls)} model call(s) converted" + (" (transcript cut)" if transcript.cut else "")
    if problems:
        note += f"; not converted: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
    if calls[-1].get("response") is None and calls[-1].get("response_sse"):
        note += "; the last answer was streamed (kept as text in transcript.jsonl, not converted)"
    if output is not None and output.choices:
        messages = [*messages, output.message]
    return messages, output, events, note


async def _call(line: dict[str, Any]) -> tuple[list[ChatMessage], ModelOutput | None]:
    """One transcript line's request messages and answer, by the converter of its wire format."""
    from inspect_ai.model import (
        ChatMessageSystem,
        ChatMessageUser,
        messages_from_anthropic,
        messages_from_openai,
        messages_from_openai_responses,
        model_output_from_anthropic,
        model_output_from_openai,
        model_output_from_openai_responses,
    )

    request, response, endpoint = line["request"], line.get("response"), line.get("endpoint")
    output: ModelOutput | None = None
    if endpoint == "chat":
        messages = await messages_from_openai(request.get("messages") or [])
        if isinstance(response, dict) and response.get("choices"):
            output = await model_output_from_openai(response)
    elif endpoint == "responses":
        given = request.get("input")
        messages = ([ChatMessageUser(content=given)] if isinstance(given, str)
                    else await messages_from_openai_responses(given or []))
        if isinstance(request.get("instructions"), str):
            messages.insert(0, ChatMessageSystem(content=request["instructions"]))
        if isinstance(response, dict) and response.get("output") is not None:
            output = await model_output_from_openai_responses(response)
    elif endpoint == "messages":
        system = request.get("system")
        messages = await messages_from_anthropic(request.get("messages") or [],
                                                 system_message=system if isinstance(system, str) else None)
        if isinstance(response, dict) and response.get("content") is not None:
            output = await model_output_from_anthropic(response)
    else:
        raise ValueError(f"the endpoint {endpoint!r} has no converter")
    return messages, output


def _event(line: dict[str, Any], messages: list[ChatMessage], output: ModelOutput | None, model: str) -> Event:
    from inspect_ai.event import ModelEvent
    from inspect_ai.model import GenerateConfig, ModelCall, ModelOutput

    response = line.get("response")
    stamp = line.get("ts")
    extra = {"timestamp": stamp} if isinstance(stamp, str) else {}
    return ModelEvent(
        model=str(line.get("model") or model), input=messages, tools=[], tool_choice="none", config=GenerateConfig(),
        output=output or ModelOutput(model=str(line.get("model") or model)),
        call=ModelCall(request=line["request"], response=response if isinstance(response, dict) else None),
        error=None if line.get("status") in (None, 200) else f"HTTP {line.get('status')}",
        metadata={"endpoint": line.get("endpoint"), "status": line.get("status"), "usage": line.get("usage"),
                  "unmetered": line.get("unmetered")}, **extra)


def _usage(record: dict[str, Any]) -> dict[str, Any]:
    from inspect_ai.model import ModelUsage

    usage = record.get("usage") or {}
    by_model = usage.get("by_model") or {}
    if not by_model and usage.get("requests"):
        by_model = {str((record.get("agent") or {}).get("model") or "unknown"): usage}
    out: dict[str, Any] = {}
    for name, counted in by_model.items():
        inp, outp = int(counted.get("input_tokens") or 0), int(counted.get("output_tokens") or 0)
        out[str(name)] = ModelUsage(
            input_tokens=inp, output_tokens=outp, total_tokens=inp + outp,
            input_tokens_cache_read=counted.get("cached_input_tokens"), reasoning_tokens=counted.get("reasoning_tokens"),
            total_cost=counted.get("cost_usd") if counted.get("cost_known") else None)
    return out


def _model_name(agent: dict[str, Any]) -> str:
    """``provider/model`` as Inspect names models; an agent that calls none (the oracle: the task's reproduction
    script) is ``anchorage/<its kind>``."""
    model = agent.get("model")
    if not model:
        return f"anchorage/{agent.get('kind') or 'agent'}"
    return str(model) if "/" in str(model) else f"{agent.get('kind') or 'anchorage'}/{model}"


def _id(*parts: Any) -> str:
    return hashlib.sha256("\0".join(str(p) for p in parts).encode()).hexdigest()[:22]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text)[:60]
