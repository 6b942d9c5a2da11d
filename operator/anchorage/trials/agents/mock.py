"""``mock``: Anchorage's built-in agent (``runtime/local/inside/mock_agent.py``) asking the gateway's
deterministic mock model for an artifact — labelled mock everywhere. Local engine only."""

from __future__ import annotations

from anchorage.manifests import AgentSpec
from anchorage.tasks import Task
from anchorage.trials.agents.plans import LOCAL, AgentKind, AgentPlan, base_env
from anchorage.trials.agents.templating import escape_references


def plan(spec: AgentSpec, task: Task, seed: int) -> AgentPlan:
    env = base_env(spec, task, seed, ANCHORAGE_ARTIFACT=f"/root/results/{task.artifact_name}",
                   ANCHORAGE_MODEL=spec.model or "mock")
    return AgentPlan("mock", "mock (built-in agent, deterministic mock model)", (escape_references(task.instruction),), env,
                     builtin="mock_agent")


KIND = AgentKind("mock", plan, "the built-in mock agent (deterministic mock model)", gateway="always",
                 drivers=frozenset({LOCAL}),
                 refusal="use kind 'command' with a mock-agent image on the cluster")
