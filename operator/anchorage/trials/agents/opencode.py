"""``opencode``: the opencode CLI (SPEC §2 template; the instruction is the positional prompt after ``--``)."""

from __future__ import annotations

from anchorage.manifests import AgentSpec
from anchorage.tasks import Task
from anchorage.trials.agents.plans import AgentKind, AgentPlan, base_env


def argv(spec: AgentSpec, instruction: str) -> tuple[str, ...]:
    """``opencode --model=M run --format=json --thinking --dangerously-skip-permissions -- PROMPT``."""
    return ("opencode", f"--model={spec.model or ''}", "run", "--format=json", "--thinking",
            "--dangerously-skip-permissions", "--", instruction)


def plan(spec: AgentSpec, task: Task, seed: int) -> AgentPlan:
    env = base_env(spec, task, seed, ANCHORAGE_MODEL=spec.model or "")
    return AgentPlan("opencode", f"opencode ({spec.model})", argv(spec, task.instruction), env, cli=True)


KIND = AgentKind("opencode", plan, "the opencode CLI through the gateway", gateway="always")
