"""``command``: any argv template (``agent.command``); only ``{instruction}``, ``{task}``, ``{seed}`` and
``{model}`` are replaced (:mod:`.templating`). With ``agent.model`` it calls models through the gateway."""

from __future__ import annotations

from anchorage.manifests import AgentSpec
from anchorage.tasks import Task
from anchorage.trials.agents.plans import AgentKind, AgentPlan, base_env, values
from anchorage.trials.agents.templating import fill_all


def plan(spec: AgentSpec, task: Task, seed: int) -> AgentPlan:
    argv = fill_all(spec.command or [], values(spec, task, seed))
    return AgentPlan("command", "command", argv, base_env(spec, task, seed))


KIND = AgentKind("command", plan, "an argv template of your own", gateway="with_model")
