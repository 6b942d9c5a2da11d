"""``oracle``: the task's own reproduction (``solution/solve.sh``, bound read-only at ``/solution``).

A task whose anchor is only imported (``[metadata] anchor = "imported"``) has nothing to run: its
committed ``tests/expected_result.json`` is replayed instead, labelled as such everywhere.
"""

from __future__ import annotations

from anchorage.manifests import AgentSpec
from anchorage.tasks import Task
from anchorage.trials.agents.plans import AgentKind, AgentPlan, Replay, base_env

SOLUTION_MOUNT = "/solution"
IMPORTED_ANCHOR_LABEL = "imported anchor — replayed expected_result, labelled"


def anchor_is_imported(task: Task) -> bool:
    """True when the task says its anchor is only imported (``[metadata] anchor = "imported"``)."""
    marker = str(task.config.metadata.get("anchor", "")).lower()
    if marker == "imported":
        return True
    readme = task.solution_dir / "README.md"
    return readme.is_file() and "anchor: imported" in readme.read_text(encoding="utf-8", errors="replace").lower()


def plan(spec: AgentSpec, task: Task, seed: int) -> AgentPlan:
    if anchor_is_imported(task):
        relative = task.expected_result_path.relative_to(task.root).as_posix()
        return AgentPlan("oracle", IMPORTED_ANCHOR_LABEL, replay=Replay(relative, in_task=True))
    if not (task.solution_dir / "solve.sh").is_file():
        return AgentPlan("oracle", "oracle", problem=f"{task.solution_dir / 'solve.sh'} is missing: the task has no "
                         "runnable anchor (mark it [metadata] anchor = \"imported\" to replay expected_result.json)")
    env = base_env(spec, task, seed, **task.config.solution.env, ANCHORAGE_SOLUTION_DIR=SOLUTION_MOUNT)
    return AgentPlan("oracle", "oracle (task's runnable reproduction)", ("/bin/bash", f"{SOLUTION_MOUNT}/solve.sh"),
                     env, binds={SOLUTION_MOUNT: task.solution_dir.relative_to(task.root).as_posix()})


KIND = AgentKind("oracle", plan, "the task's runnable reproduction (solution/solve.sh)")
