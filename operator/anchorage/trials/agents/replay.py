"""``replay``: copy a committed artifact into the results (``agent.artifact``; ``{task}``/``{seed}``
filled in). Nothing runs; the trial is labelled a replay."""

from __future__ import annotations

from anchorage.manifests import AgentSpec
from anchorage.tasks import Task
from anchorage.trials.agents.plans import AgentKind, AgentPlan, Replay, values
from anchorage.trials.agents.templating import fill


def plan(spec: AgentSpec, task: Task, seed: int) -> AgentPlan:
    source = fill(spec.artifact or "", values(spec, task, seed))
    return AgentPlan("replay", "replay", replay=Replay(source))


KIND = AgentKind("replay", plan, "a committed artifact, copied (labelled a replay)")
