"""``claude-code``: the Claude Code CLI (``claude``; the instruction is the positional prompt after ``--``)."""

from __future__ import annotations

from anchorage.manifests import AgentSpec
from anchorage.tasks import Task
from anchorage.trials.agents.plans import AgentKind, AgentPlan, base_env


def argv(spec: AgentSpec, instruction: str) -> tuple[str, ...]:
    """``claude --print --model M --output-format=json --dangerously-skip-permissions -- PROMPT``."""
    return ("claude", "--print", "--model", spec.model or "", "--output-format=json",
            "--dangerously-skip-permissions", "--", instruction)


def plan(spec: AgentSpec, task: Task, seed: int) -> AgentPlan:
    env = base_env(spec, task, seed, ANCHORAGE_MODEL=spec.model or "")
    return AgentPlan("claude-code", f"claude-code ({spec.model})", argv(spec, task.instruction), env, cli=True)


KIND = AgentKind("claude-code", plan, "the Claude Code CLI through the gateway", gateway="always")
