"""``opencode``: the opencode CLI (version pinned in ``anchorage/agentclis/versions.json``) through the gateway.

The template, checked against the pinned version by running it here against the scripted mock model
(``tests/agentclis/test_real_agents.py``)::

    opencode run --model anchorage/M --format json --thinking --auto --pure --print-logs -- PROMPT

with a generated provider in ``OPENCODE_CONFIG_CONTENT``: provider ``anchorage``
(``@ai-sdk/openai-compatible``, i.e. Chat Completions) at ``{env:OPENAI_BASE_URL}`` with the key
``{env:OPENAI_API_KEY}`` — opencode reads both from the agent's environment, which the driver fills —
listing the entry's model (opencode only knows models by ``provider/model``: a bare ``M`` is
``ProviderModelNotFoundError``), and ``small_model`` set to it too (the title and summary calls opencode
makes on its own are then billed at a known price). ``OPENCODE_DISABLE_MODELS_FETCH`` and the other
``OPENCODE_DISABLE_*`` switches keep it from fetching model lists, updates, LSP servers and plugins
(agents have no internet; ``--pure`` skips external plugins). Permissions are granted in the config and
by ``--auto`` (opencode has no ``--dangerously-skip-permissions``), web fetches denied.
``reasoningEffort`` becomes the model's ``reasoningEffort`` option (sent as ``reasoning_effort``).
"""

from __future__ import annotations

import json
from typing import Any

from anchorage.manifests import AgentSpec
from anchorage.tasks import Task
from anchorage.trials.agents.plans import AgentKind, AgentPlan, base_env
from anchorage.trials.agents.templating import escape_references

PROVIDER = "anchorage"
SWITCHES = ("OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_LSP_DOWNLOAD",
            "OPENCODE_DISABLE_SHARE", "OPENCODE_DISABLE_DEFAULT_PLUGINS", "OPENCODE_DISABLE_CLAUDE_CODE")


def config(spec: AgentSpec) -> dict[str, Any]:
    """The ``OPENCODE_CONFIG_CONTENT`` of an entry: the gateway as the only provider, the entry's model."""
    model = spec.model or ""
    entry: dict[str, Any] = {"name": model}
    if spec.reasoning_effort:
        entry["options"] = {"reasoningEffort": spec.reasoning_effort}
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {PROVIDER: {"npm": "@ai-sdk/openai-compatible", "name": "Anchorage gateway",
                                "options": {"baseURL": "{env:OPENAI_BASE_URL}", "apiKey": "{env:OPENAI_API_KEY}"},
                                "models": {model: entry}}},
        "model": f"{PROVIDER}/{model}", "small_model": f"{PROVIDER}/{model}",
        "autoupdate": False, "share": "disabled",
        "permission": {"edit": "allow", "bash": "allow", "external_directory": "allow", "webfetch": "deny"},
    }


def argv(spec: AgentSpec, instruction: str) -> tuple[str, ...]:
    return ("opencode", "run", "--model", f"{PROVIDER}/{spec.model or ''}", "--format", "json", "--thinking",
            "--auto", "--pure", "--print-logs", "--", escape_references(instruction))


def plan(spec: AgentSpec, task: Task, seed: int) -> AgentPlan:
    env = base_env(spec, task, seed, ANCHORAGE_MODEL=spec.model or "",
                   OPENCODE_CONFIG_CONTENT=json.dumps(config(spec), sort_keys=True), **{s: "1" for s in SWITCHES})
    return AgentPlan("opencode", f"opencode ({spec.model})", argv(spec, task.instruction), env, cli="opencode")


KIND = AgentKind("opencode", plan, "the opencode CLI through the gateway", gateway="always",
                 needs_model=True)
