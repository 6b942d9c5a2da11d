"""``claude-code``: the Claude Code CLI (``claude``, version pinned in ``anchorage/agentclis/versions.json``).

The template, checked against the pinned version by running it here against the scripted mock model
(``tests/agentclis/test_real_agents.py``)::

    claude --print --model M --output-format=stream-json --verbose --dangerously-skip-permissions
      --disallowedTools WebSearch,WebFetch [--effort E] -- PROMPT

with ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY`` from the driver (the gateway and the trial's
token). It must run as an unprivileged user: claude refuses ``--dangerously-skip-permissions`` as root
(the sandbox's agent user, the pod's ``runAsUser``). ``stream-json`` puts every turn and tool call in
the trial's ``agent/stdout.log``. Web search and fetch are disallowed (the provider would search the
internet for the agent). ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`` turns off telemetry, error
reports and update checks; the model aliases claude uses on its own (a small fast model for titles
and summaries, sub-agents' ``haiku``/``sonnet``/``opus``) all name the entry's model, so every request
is billed at a price the snapshot knows. ``reasoningEffort`` becomes ``--effort`` (``minimal`` → ``low``).
"""

from __future__ import annotations

from anchorage.manifests import AgentSpec
from anchorage.tasks import Task
from anchorage.trials.agents.plans import AgentKind, AgentPlan, base_env
from anchorage.trials.agents.templating import escape_references

EFFORTS = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "max"}
MODEL_ALIASES = ("ANTHROPIC_SMALL_FAST_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL",
                 "ANTHROPIC_DEFAULT_OPUS_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL")


def argv(spec: AgentSpec, instruction: str) -> tuple[str, ...]:
    parts = ["claude", "--print", "--model", spec.model or "", "--output-format=stream-json", "--verbose",
             "--dangerously-skip-permissions", "--disallowedTools", "WebSearch,WebFetch"]
    if spec.reasoning_effort:
        parts += ["--effort", EFFORTS.get(spec.reasoning_effort, spec.reasoning_effort)]
    return (*parts, "--", escape_references(instruction))


def plan(spec: AgentSpec, task: Task, seed: int) -> AgentPlan:
    model = spec.model or ""
    env = base_env(spec, task, seed, ANCHORAGE_MODEL=model, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                   **{name: model for name in MODEL_ALIASES})
    problem = None
    if spec.reasoning_effort and spec.reasoning_effort not in EFFORTS:
        problem = (f"claude-code takes reasoningEffort {', '.join(sorted(set(EFFORTS.values())))} (minimal is read "
                   f"as low), not {spec.reasoning_effort!r}")
    return AgentPlan("claude-code", f"claude-code ({model})", argv(spec, task.instruction), env, cli="claude-code",
                     problem=problem)


KIND = AgentKind("claude-code", plan, "the Claude Code CLI through the gateway", gateway="always",
                 needs_model=True)
