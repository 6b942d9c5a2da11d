"""The agent CLIs' templates: what each pinned CLI is given (checked against the real CLIs in
``tests/agentclis/test_real_agents.py``), and the ``$(NAME)`` references both drivers expand alike."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from anchorage import agentclis
from anchorage.manifests import AgentSpec
from anchorage.runtime.local import sandbox
from anchorage.tasks import Task, load_task, resolve_task
from anchorage.trials import plan_agent
from anchorage.trials.agents.templating import escape_references, expand_references


@pytest.fixture(scope="module")
def task() -> Task:
    return load_task(resolve_task("smoke-inventory"))


def plan(task: Task, **agent: Any) -> Any:
    return plan_agent(AgentSpec.model_validate(agent), task, 0)


def test_codex_talks_to_the_gateway_as_its_own_provider(task: Task) -> None:
    argv = plan(task, kind="codex", model="gpt-5.5", reasoningEffort="xhigh").argv
    pairs = {argv[i + 1] for i, part in enumerate(argv) if part == "-c"}
    assert "model_provider=anchorage" in pairs
    table = next(p for p in pairs if p.startswith("model_providers.anchorage="))
    for part in ('base_url="$(OPENAI_BASE_URL)"', 'env_key="OPENAI_API_KEY"', 'wire_api="responses"',
                 "supports_websockets=false"):
        assert part in table
    assert {'web_search="disabled"', "allow_login_shell=false", "model_reasoning_effort=xhigh",
            "analytics.enabled=false", "check_for_update_on_startup=false"} <= pairs
    assert argv[:2] == ("codex", "exec") and argv[argv.index("--model") + 1] == "gpt-5.5"


def test_claude_code_bills_every_alias_at_the_entry_model_and_maps_effort(task: Task) -> None:
    planned = plan(task, kind="claude-code", model="claude-sonnet-4", reasoningEffort="minimal")
    assert planned.cli == "claude-code" and planned.problem is None
    assert planned.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert planned.env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == planned.env["ANTHROPIC_SMALL_FAST_MODEL"] == "claude-sonnet-4"
    argv = planned.argv
    assert argv[argv.index("--effort") + 1] == "low" and "--dangerously-skip-permissions" in argv
    assert argv[argv.index("--disallowedTools") + 1] == "WebSearch,WebFetch"
    bad = plan(task, kind="claude-code", model="m", reasoningEffort="extreme")
    assert bad.problem is not None and "not 'extreme'" in bad.problem


def test_opencode_gets_a_generated_provider_with_the_model_listed(task: Task) -> None:
    planned = plan(task, kind="opencode", model="deepseek-flash", reasoningEffort="high")
    argv = planned.argv
    assert argv[argv.index("--model") + 1] == "anchorage/deepseek-flash"
    assert "--dangerously-skip-permissions" not in argv and "--auto" in argv
    config = json.loads(planned.env["OPENCODE_CONFIG_CONTENT"])
    provider = config["provider"]["anchorage"]
    assert provider["options"] == {"baseURL": "{env:OPENAI_BASE_URL}", "apiKey": "{env:OPENAI_API_KEY}"}
    assert provider["models"] == {"deepseek-flash": {"name": "deepseek-flash", "options": {"reasoningEffort": "high"}}}
    assert config["model"] == config["small_model"] == "anchorage/deepseek-flash"
    assert planned.env["OPENCODE_DISABLE_MODELS_FETCH"] == "1"


@pytest.mark.parametrize("kind", ["codex", "claude-code", "opencode"])
def test_each_cli_is_a_pinned_tool(kind: str, task: Task) -> None:
    planned = plan(task, kind=kind, model="m")
    assert planned.cli == kind and planned.argv[0] == agentclis.pins()[kind].command


@pytest.mark.parametrize("text", ["$(A)", "$$", "$$(A)", "$5 and $x", "a$", "$$$", "$(HOME)/x $(NOPE)", "${HOME}",
                                  "$((1+2))", "$$$(A)", "plain"])
def test_escaped_text_survives_the_expansion(text: str) -> None:
    assert expand_references(escape_references(text), {"A": "1", "HOME": "/h"}) == text


def test_expansion_is_the_kubelets() -> None:
    assert expand_references("$(A)-$(NOPE)-$$-$(A)$", {"A": "1"}) == "1-$(NOPE)-$-1$"


def test_a_prompt_with_references_reaches_the_agent_as_written(task: Task, mechanism: Any, tmp_path: Path) -> None:
    """The local sandbox expands an agent's argv against the agent's environment, as the kubelet does."""
    results, logs = tmp_path / "results", tmp_path / "logs"
    results.mkdir()
    logs.mkdir()
    prompt = "keep $(HOME) and $$ as they are"
    spec = sandbox.SandboxSpec(
        argv=["/bin/sh", "-c", 'printf "%s|%s" "$0" "$1" > /root/results/out', "$(ANCHORAGE_RESULTS_DIR)",
              escape_references(prompt)],
        results_dir=results, logs_dir=logs, limits=sandbox.SandboxLimits(timeout_sec=60), expand_references=True)
    result = sandbox.run(spec, mechanism=mechanism)
    assert result.exit_code == 0, (logs / "stderr.log").read_text()
    assert (results / "out").read_text() == f"/root/results|{prompt}"


@pytest.mark.parametrize("kind", ["codex", "claude-code", "opencode"])
def test_the_cluster_job_gives_the_agent_the_images_cli_home_and_gateway(kind: str, task: Task) -> None:
    """The same plan in a pod: the CLI's folder first on PATH (as in the sandbox), HOME on an emptyDir, the
    image checked for the CLI before the agent starts, ``$(OPENAI_BASE_URL)`` defined for the kubelet."""
    from anchorage.manifests import TrialSpec
    from anchorage.runtime.kube import jobs
    from anchorage.trials.limits import resolve_limits

    spec = TrialSpec(task=task.slug, agent=AgentSpec(kind=kind, model="m"))  # type: ignore[arg-type]
    planned = plan_agent(spec.agent, task, 0)
    config = jobs.OperatorConfig()
    job = jobs.trial_job({"metadata": {"name": "t", "namespace": "n", "uid": "u"}, "kind": "Trial"}, spec,
                         plan=planned, limits=resolve_limits(task), config=config, job_name="t-a0", campaign=None)
    pod = job["spec"]["template"]["spec"]
    agent = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in agent["env"]}
    assert env["PATH"].split(":")[0] == agentclis.bin_dir(kind) and env["HOME"] == jobs.AGENT_HOME
    assert {"name": "home", "mountPath": jobs.AGENT_HOME} in agent["volumeMounts"]
    assert any(v["name"] == "home" and "emptyDir" in v for v in pod["volumes"])
    assert pod["securityContext"]["runAsUser"] == 65532  # the agent image's user (images/agent-base)
    names = [c["name"] for c in pod["initContainers"]]
    assert names.index("check-agent") < names.index("upload")
    check = pod["initContainers"][names.index("check-agent")]
    assert check["image"] == agent["image"] == config.agent_image
    assert f"command -v {planned.argv[0]}" in check["command"][2]
    references = {name for part in agent["command"] for name in re.findall(r"\$\((\w+)\)", part)}
    assert references <= set(env) | {"OPENAI_BASE_URL"} and "OPENAI_BASE_URL" in env
