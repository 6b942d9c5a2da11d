"""Harbor task directories: the task.toml model, loading, prompt assembly, artifact recovery.

Public API (see docs/design-notes.md): :func:`load_task`, :func:`resolve_task`, :class:`Task`,
:class:`TaskConfig`, :func:`locate_artifact`. Used by the scorer, the runtime, the planner and the CLI.
"""

from anchorage.tasks.artifacts import ArtifactLocation, locate_artifact
from anchorage.tasks.loading import Task, list_tasks, load_task, resolve_task, search_dirs, strip_canary
from anchorage.tasks.taskconfig import TaskConfig

__all__ = [
    "ArtifactLocation",
    "Task",
    "TaskConfig",
    "list_tasks",
    "load_task",
    "locate_artifact",
    "resolve_task",
    "search_dirs",
    "strip_canary",
]
