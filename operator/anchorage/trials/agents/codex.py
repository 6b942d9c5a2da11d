"""``codex``: the Codex CLI (SPEC §2 template; the instruction is the positional prompt after ``--``)."""

from __future__ import annotations

from anchorage.manifests import AgentSpec
from anchorage.tasks import Task
from anchorage.trials.agents.plans import AgentKind, AgentPlan, base_env


def argv(spec: AgentSpec, instruction: str) -> tuple[str, ...]:
    """``codex exec ... --model M --json --enable unified_exec [-c model_reasoning_effort=E] -- PROMPT``."""
    parts = ["codex", "exec", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check",
             "--model", spec.model or "", "--json", "--enable", "unified_exec"]
    if spec.reasoning_effort:
        parts += ["-c", f"model_reasoning_effort={spec.reasoning_effort}"]
    return (*parts, "--", instruction)


def plan(spec: AgentSpec, task: Task, seed: int) -> AgentPlan:
    env = base_env(spec, task, seed, ANCHORAGE_MODEL=spec.model or "")
    return AgentPlan("codex", f"codex ({spec.model})", argv(spec, task.instruction), env, cli=True)


KIND = AgentKind("codex", plan, "the Codex CLI through the gateway", gateway="always")
