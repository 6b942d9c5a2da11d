"""Which tasks a campaign runs: ``spec.tasks`` plus the tasks its ``taskSelector`` matches.

Shared by both drivers: the local engine (``runtime.local.engine.resolve_tasks``) and the operator
(``controller.campaigns``, through :func:`campaign_task_names`) plan the same matrix from the same
selection, and a ScoringRun's ``campaignRef`` finds the same tasks. Matching is pure
(:func:`matches`); the candidates are the task folders of ``anchorage.tasks.search_dirs()`` (``./tasks``,
the repo's ``tasks/``, ``$ANCHORAGE_TASKS``; the first folder holding a slug wins).

A selector matches a task when every ``names`` glob set is satisfied (any one glob matches the slug;
no globs: any slug) and every ``matchLabels`` pair is among the task's keywords, written either
``key=value`` or just ``value``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from pathlib import Path

from anchorage.errors import InputError
from anchorage.manifests import CampaignSpec, TaskSelector
from anchorage.tasks import Task, list_tasks, load_task, search_dirs


def matches(selector: TaskSelector, slug: str, keywords: Iterable[str]) -> bool:
    """Whether a task (its slug and keywords) is selected."""
    names_ok = not selector.names or any(fnmatch.fnmatchcase(slug, pattern) for pattern in selector.names)
    words = set(keywords)
    return names_ok and all(f"{k}={v}" in words or v in words for k, v in selector.match_labels.items())


def candidate_tasks(dirs: Iterable[Path] | None = None) -> list[Task]:
    """Every task folder under ``dirs`` (default: ``search_dirs()``), one per slug, sorted by slug."""
    found: dict[str, Task] = {}
    for directory in search_dirs() if dirs is None else dirs:
        for path in list_tasks(directory):
            task = load_task(path)
            found.setdefault(task.slug, task)
    return [found[slug] for slug in sorted(found)]


def select(selector: TaskSelector, candidates: Iterable[Task]) -> list[Task]:
    """The candidates the selector matches; InputError when none does."""
    chosen = [t for t in candidates if matches(selector, t.slug, t.config.task.keywords)]
    if not chosen:
        wanted = ", ".join([*selector.names, *(f"{k}={v}" for k, v in selector.match_labels.items())]) or "anything"
        raise InputError(f"taskSelector ({wanted}) matches no task",
                         hint="check the name globs and labels against 'anchorage tasks list'")
    return chosen


def campaign_task_refs(spec: CampaignSpec, candidates: Iterable[Task] | None = None) -> list[str]:
    """``spec.tasks`` then the selected tasks' folders (as paths), without repeats, in that order."""
    refs = list(spec.tasks)
    if spec.task_selector is not None:
        listed = {ref.rstrip("/").split("/")[-1] for ref in refs}  # the slug resolve_task reads from a name or path
        chosen = select(spec.task_selector, candidate_tasks() if candidates is None else candidates)
        refs += [str(t.root) for t in chosen if t.slug not in listed]
    return list(dict.fromkeys(refs))


def campaign_task_names(spec: CampaignSpec, candidates: Iterable[Task] | None = None) -> list[str]:
    """The task names a campaign plans with: ``spec.tasks`` as written, selected tasks by slug, no repeats."""
    names = list(spec.tasks)
    if spec.task_selector is not None:
        listed = {name.rstrip("/").split("/")[-1] for name in names}
        chosen = select(spec.task_selector, candidate_tasks() if candidates is None else candidates)
        names += [t.slug for t in chosen if t.slug not in listed]
    return list(dict.fromkeys(names))
