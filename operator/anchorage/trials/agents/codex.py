"""``codex``: the Codex CLI (version pinned in ``anchorage/agentclis/versions.json``) through the gateway.

The template, checked against the pinned version by running it here against the scripted mock model
(``tests/agentclis/test_real_agents.py``)::

    codex exec --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check --json --enable unified_exec
      --model M -c model_provider=anchorage -c 'model_providers.anchorage={..., base_url="$(OPENAI_BASE_URL)",
      env_key="OPENAI_API_KEY", wire_api="responses", supports_websockets=false}'
      -c web_search="disabled" -c allow_login_shell=false -c check_for_update_on_startup=false
      -c analytics.enabled=false [-c model_reasoning_effort=E] -- PROMPT

Why each part: codex ignores ``OPENAI_BASE_URL`` for its built-in provider (it would dial the public API
and wait for the network until the timeout), so the gateway is a provider of its own; its URL is
only on the command line, as a ``$(OPENAI_BASE_URL)`` reference both drivers expand from the agent's
environment (``templating.expand_references``); ``supports_websockets=false`` stops the WebSocket
attempts on ``/v1/responses``. The hosted web search would run at the provider — the internet, which
agents must not reach (SPEC §2) — so it is off. A login shell re-reads ``/etc/profile``, which resets
``PATH`` and loses the agent stack's Python, so commands run in a plain shell. No update checks, no
analytics. The sandbox of codex itself is bypassed: the trial's sandbox (or pod) is the sandbox.
"""

from __future__ import annotations

from anchorage.manifests import AgentSpec
from anchorage.tasks import Task
from anchorage.trials.agents.plans import AgentKind, AgentPlan, base_env
from anchorage.trials.agents.templating import escape_references

PROVIDER = "anchorage"
PROVIDER_TABLE = ('{name="Anchorage gateway", base_url="$(OPENAI_BASE_URL)", env_key="OPENAI_API_KEY", '
                  'wire_api="responses", supports_websockets=false}')


def argv(spec: AgentSpec, instruction: str) -> tuple[str, ...]:
    parts = ["codex", "exec", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "--json",
             "--enable", "unified_exec", "--model", spec.model or "",
             "-c", f"model_provider={PROVIDER}", "-c", f"model_providers.{PROVIDER}={PROVIDER_TABLE}",
             "-c", 'web_search="disabled"', "-c", "allow_login_shell=false",
             "-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false"]
    if spec.reasoning_effort:
        parts += ["-c", f"model_reasoning_effort={spec.reasoning_effort}"]
    return (*parts, "--", escape_references(instruction))


def plan(spec: AgentSpec, task: Task, seed: int) -> AgentPlan:
    env = base_env(spec, task, seed, ANCHORAGE_MODEL=spec.model or "")
    return AgentPlan("codex", f"codex ({spec.model})", argv(spec, task.instruction), env, cli="codex")


KIND = AgentKind("codex", plan, "the Codex CLI through the gateway", gateway="always",
                 needs_model=True)
