"""Rescoring a benchmark entry's published answers (per-metric values, no artifact) under a scoring profile.

Used by ``anchorage rescore-published`` (:mod:`anchorage.commands.published`), ``tools/rescore_published.py``
(every profile side by side) and ``tools/profile_table.py`` (the means under each profile in tasks/README.md).

**The answers file** (the shape of the benchmark's published answers, e.g. ``tests/scoring/published/
v4-pro-answers.json``): one JSON object; keys starting with ``_`` are notes (``_about``, ``_provenance``);
every other key is an entry, mapping task slugs to ``{metric path: value}`` — the paths of the task's
``tests/score_config.json`` (``a.b[2].c``). A value is what the entry answered: a number, a numeric string, or
``null`` / absent when the entry gave none. **The scores file** (optional, e.g. ``v4-pro-scores.json``): the
same entries and slugs, each ``{"views": {VIEW: {"raw", "o_eval", "bo_eval", "hard_gated", ...}}}`` — the
published cells set beside the rescored ones.

Per task the scored metric paths are rebuilt into an artifact (SPEC C.3: "where the artifact was not
packaged, the scored fields are rebuilt from the saved per-metric records") and scored like any artifact.
What is missing is said, never scored as a model's zero: a benchmark task the entry has no answer for is
``missing`` (no score, left out of the means, named in the summary); a task with some of its scored metrics
unanswered is ``partial`` (scored — an unanswered metric earns 0 by the scoring rules, so the cell is a lower
bound — with the unanswered paths listed); answers for a task the suite does not have, or for paths that are
not scored metrics of the task, are listed as such. A file of another shape is one clear error.

The benchmark's tasks are the suite's tasks whose ``paper`` anchor is the benchmark's (``published`` or
``corrected`` in ``tests/profiles.yaml``); a task of this project's own (``original``, e.g. smoke-inventory)
is answered by no published entry.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from anchorage.errors import InputError, did_you_mean
from anchorage.scoring.profiles import get_profile
from anchorage.scoring.rebuild import artifact_from_values
from anchorage.scoring.records import ScoreRecord
from anchorage.scoring.scorer import ProfileArg, as_task, compiled, score_data
from anchorage.tasks import list_tasks
from anchorage.tasks.profiles import load_profiles

TaskStatus = Literal["complete", "partial", "missing", "unknown_task"]
DEFAULT_VIEW = "report@4a3807d"
FORMAT_HINT = ("an answers file is a JSON object {ENTRY: {TASK_SLUG: {METRIC_PATH: value}}} (keys starting with "
               "'_' are notes), as tests/scoring/published/v4-pro-answers.json; see anchorage.scoring.published")


@dataclass
class TaskRescore:
    """One task of one entry: its answers, the record they score under the profile, the published cell."""

    task: str
    status: TaskStatus
    answered: list[str] = field(default_factory=list)      # scored metric paths the entry answered
    unanswered: list[str] = field(default_factory=list)    # scored metric paths it did not (null or absent)
    unused: list[str] = field(default_factory=list)        # answer paths that are not scored metrics of the task
    record: ScoreRecord | None = None
    published: dict[str, Any] | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        record = self.record
        return {
            "task": self.task, "status": self.status, "answered": len(self.answered),
            "unanswered": self.unanswered, "unused_answers": self.unused, "note": self.note,
            "raw": None if record is None else round(record.raw, 6),
            "o_eval": None if record is None else round(record.o_eval, 6),
            "bo_eval": None if record is None else round(record.bo_eval, 6),
            "baseline_source": None if record is None else record.baseline_source,
            "hard_gates": [] if record is None else [g.name for g in record.gates if g.hard_error],
            "penalty": None if record is None else (record.penalty or None),
            "published": self.published,
        }


@dataclass
class EntryRescore:
    """An entry's published answers under one profile: a row per benchmark task and the means over the scored."""

    entry: str
    profile: str
    tasks: list[TaskRescore]
    view: str | None = None

    @property
    def scored(self) -> list[TaskRescore]:
        return [t for t in self.tasks if t.record is not None]

    def summary(self) -> dict[str, Any]:
        scored = self.scored
        published = [t.published for t in scored if t.published and isinstance(t.published.get("o_eval"), int | float)]
        return {
            "benchmark_tasks": sum(t.status != "unknown_task" for t in self.tasks),
            "scored": len(scored),
            "partial": [t.task for t in self.tasks if t.status == "partial"],
            "missing": [t.task for t in self.tasks if t.status == "missing"],
            "unknown_tasks": [t.task for t in self.tasks if t.status == "unknown_task"],
            "hard_gated": [t.task for t in scored if t.record is not None and t.record.hard_gate_failed],
            "mean_o_eval": _mean([t.record.o_eval for t in scored if t.record is not None]),
            "mean_bo_eval": _mean([t.record.bo_eval for t in scored if t.record is not None]),
            "published_mean_o_eval": (_mean([float(p["o_eval"]) for p in published])
                                      if len(published) == len(scored) and published else None),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"entry": self.entry, "profile": self.profile, "view": self.view,
                "tasks": [t.to_dict() for t in self.tasks], "summary": self.summary()}


def _mean(values: list[float]) -> float | None:
    return round(math.fsum(values) / len(values), 6) if values else None


# --- reading the files -------------------------------------------------------------------------------------

def _load_object(path: Path, what: str) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist", hint="pass the path of a published answers file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{what} {path} cannot be read: {exc}", hint="pass a UTF-8 JSON file") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{what} {path} is not valid JSON: {exc}", hint=FORMAT_HINT) from None
    if not isinstance(data, dict):
        raise InputError(f"{what} {path} holds a JSON {type(data).__name__}, not an object", hint=FORMAT_HINT)
    return data


def load_answers(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """The entries of an answers file: ``{entry: {task slug: {metric path: value}}}``; :class:`InputError` on
    another shape, naming where."""
    data = _load_object(path, "answers file")
    entries = {name: value for name, value in data.items() if not name.startswith("_")}
    if not entries:
        raise InputError(f"answers file {path} names no entry (only notes: {', '.join(sorted(data)) or 'nothing'})",
                         hint=FORMAT_HINT)
    for name, tasks in entries.items():
        if not isinstance(tasks, dict):
            raise InputError(f"answers file {path}: entry {name!r} holds a JSON {type(tasks).__name__}, not an "
                             "object of tasks", hint=FORMAT_HINT)
        for slug, values in tasks.items():
            if not isinstance(values, dict):
                raise InputError(f"answers file {path}: entry {name!r}, task {slug!r} holds a JSON "
                                 f"{type(values).__name__}, not an object of metric paths", hint=FORMAT_HINT)
    return entries


def load_scores(path: Path) -> dict[str, dict[str, Any]]:
    """The entries of a published scores file (``{entry: {task slug: {"views": {view: cell}}}}``)."""
    data = _load_object(path, "scores file")
    entries = {name: value for name, value in data.items() if not name.startswith("_") and isinstance(value, dict)}
    if not entries:
        raise InputError(f"scores file {path} names no entry",
                         hint="a scores file is {ENTRY: {TASK_SLUG: {\"views\": {VIEW: {raw, o_eval, bo_eval}}}}}, "
                              "as tests/scoring/published/v4-pro-scores.json")
    return entries


def benchmark_tasks(tasks_dir: Path | None = None) -> list[Path]:
    """The suite's benchmark tasks: those whose ``paper`` anchor is the benchmark's (not this project's own)."""
    return [root for root in list_tasks(tasks_dir) if load_profiles(root).anchors.paper.source != "original"]


# --- rescoring ---------------------------------------------------------------------------------------------

def rescore_entry(entry: str, answers: dict[str, dict[str, Any]], profile: ProfileArg = None, *,
                  tasks_dir: Path | None = None, published: dict[str, Any] | None = None,
                  view: str | None = DEFAULT_VIEW) -> EntryRescore:
    """Score one entry's answers on every benchmark task under ``profile`` (see the module docstring)."""
    chosen = get_profile(profile)
    roots = {root.name: root for root in benchmark_tasks(tasks_dir)}
    rows = [_task(slug, root, answers.get(slug), chosen.name, _cell(published, slug, view))
            for slug, root in sorted(roots.items())]
    for slug in sorted(set(answers) - set(roots)):
        close = did_you_mean(slug, roots)
        rows.append(TaskRescore(slug, "unknown_task", unused=sorted(answers[slug]),
                                note="not a task of the suite" + (f" ({close})" if close else "")))
    return EntryRescore(entry, chosen.name, rows, view if published is not None else None)


def _cell(published: dict[str, Any] | None, slug: str, view: str | None) -> dict[str, Any] | None:
    if published is None or view is None:
        return None
    views = published.get(slug, {}).get("views", {}) if isinstance(published.get(slug), dict) else {}
    cell = views.get(view) if isinstance(views, dict) else None
    if not isinstance(cell, dict):
        return None
    return {k: cell.get(k) for k in ("raw", "o_eval", "bo_eval", "hard_gated")}


def _task(slug: str, root: Path, values: dict[str, Any] | None, profile: str,
          cell: dict[str, Any] | None) -> TaskRescore:
    task = as_task(root)
    metrics = [m.path for m in compiled(task, profile).config.metrics if m.excluded_reason is None]
    given = {path: value for path, value in (values or {}).items() if value is not None}
    answered = [p for p in metrics if p in given]
    unanswered = [p for p in metrics if p not in given]
    unused = sorted(set(values or {}) - set(metrics))
    if not answered:
        note = "no answer for any scored metric" if values else "the entry has no answers for this task"
        return TaskRescore(slug, "missing", [], unanswered, unused, None, cell, note)
    record = score_data(task, artifact_from_values({p: given[p] for p in answered}), profile=profile)
    status: TaskStatus = "partial" if unanswered else "complete"
    note = (f"{len(unanswered)} of {len(metrics)} scored metrics unanswered: they earn 0, so this cell is a lower "
            "bound" if unanswered else "")
    return TaskRescore(slug, status, answered, unanswered, unused, record, cell, note)
