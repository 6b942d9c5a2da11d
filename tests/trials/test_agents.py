"""The agent-kind registry: one list of kinds, one plan for both drivers, templates that leave braces alone."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from anchorage.errors import InputError
from anchorage.manifests import AgentKind, AgentSpec, TrialSpec
from anchorage.runtime.kube import jobs
from anchorage.tasks import Task, load_task, resolve_task
from anchorage.trials import plan_agent
from anchorage.trials.agents import KINDS, LOCAL, OPERATOR, fill, kind_of, needs_gateway, refusal
from anchorage.trials.agents.oracle import SOLUTION_MOUNT
from anchorage.trials.limits import resolve_limits

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "anchorage" / "trials" / "agents"
EXAMPLES: dict[str, dict[str, typing.Any]] = {
    "oracle": {"kind": "oracle"},
    "replay": {"kind": "replay", "artifact": "runs/{task}/s{seed}.json"},
    "codex": {"kind": "codex", "model": "gpt-5.5", "reasoningEffort": "xhigh"},
    "opencode": {"kind": "opencode", "model": "deepseek-flash"},
    "claude-code": {"kind": "claude-code", "model": "claude-x"},
    "command": {"kind": "command", "command": ["sh", "-c", "echo {x: 1} > /root/results/{task}.json", "{instruction}"]},
    "mock": {"kind": "mock", "model": "mock-1"},
}


@pytest.fixture(scope="module")
def task() -> Task:
    return load_task(resolve_task("smoke-inventory"))


def test_the_manifest_kinds_are_the_registry_kinds() -> None:
    """The CRD's enum (manifests.AgentKind) and the registry cannot drift apart."""
    assert set(typing.get_args(AgentKind)) == set(KINDS) == set(EXAMPLES)


def test_each_kind_lives_in_its_own_module() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "plans", "templating"}
    assert {name.replace("-", "_") for name in KINDS} == modules


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_plans(kind: str, task: Task) -> None:
    spec = AgentSpec.model_validate(EXAMPLES[kind])
    plan = plan_agent(spec, task, 3)
    assert plan.kind == kind and plan.label
    assert plan.needs_gateway == needs_gateway(spec) == kind_of(kind).needs_gateway(spec)
    if plan.replay is None and plan.problem is None:
        assert plan.argv and plan.env["ANCHORAGE_SEED"] == "3"
    if kind in ("codex", "opencode", "claude-code"):
        assert plan.argv[-2:] == ("--", task.instruction) and plan.cli and plan.needs_gateway


def test_unknown_kind_is_an_error_never_another_cli() -> None:
    spec = AgentSpec.model_construct(kind="gemini", model="g", env={})  # bypasses the manifest's enum on purpose
    with pytest.raises(InputError, match="unknown agent kind 'gemini'"):
        kind_of("gemini")
    with pytest.raises(InputError, match="unknown agent kind"):
        needs_gateway(spec)


def test_command_templates_replace_only_the_four_placeholders(task: Task) -> None:
    spec = AgentSpec.model_validate({"kind": "command", "model": "m",
                                     "command": ["python3", "-c", "import json; json.dump({}, open('x','w'))",
                                                 "{x: 1}", "${HOME}", "{instruction}", "{task}-{seed}-{model}", "{seeds}"]})
    argv = plan_agent(spec, task, 7).argv
    assert argv[:5] == ("python3", "-c", "import json; json.dump({}, open('x','w'))", "{x: 1}", "${HOME}")
    assert argv[5:] == (task.instruction, "smoke-inventory-7-m", "{seeds}")


def test_substituted_text_is_not_substituted_again() -> None:
    assert fill("{instruction} {task}", {"instruction": "write {task}", "task": "T"}) == "write {task} T"


def test_replay_paths_are_templated_the_same_way(task: Task) -> None:
    plan = plan_agent(AgentSpec.model_validate(EXAMPLES["replay"]), task, 2)
    assert plan.replay is not None and plan.replay.source == "runs/smoke-inventory/s2.json"


def test_oracle_binds_the_solution_read_only(task: Task) -> None:
    plan = plan_agent(AgentSpec(kind="oracle"), task, 0)
    assert plan.binds == {SOLUTION_MOUNT: "solution"} and plan.argv == ("/bin/bash", f"{SOLUTION_MOUNT}/solve.sh")
    assert not plan.delivers_prompt


def test_drivers_refuse_kinds_they_cannot_run() -> None:
    mock = AgentSpec.model_validate(EXAMPLES["mock"])
    assert refusal(mock, LOCAL) is None
    message = refusal(mock, OPERATOR)
    assert message is not None and "local driver only" in message and "command" in message
    assert all(refusal(AgentSpec.model_validate(EXAMPLES[k]), OPERATOR) is None for k in KINDS if k != "mock")


@pytest.mark.parametrize("kind", sorted(set(KINDS) - {"mock"}))
def test_both_drivers_get_the_same_argv_and_env(kind: str, task: Task) -> None:
    """The operator's agent container runs exactly the plan's argv with the plan's environment."""
    spec = AgentSpec.model_validate(EXAMPLES[kind])
    plan = plan_agent(spec, task, 1)
    trial_spec = TrialSpec(task=task.slug, agent=spec, seed=1)
    job = jobs.trial_job({"metadata": {"name": "t", "namespace": "n", "uid": "u"}, "kind": "Trial"}, trial_spec,
                         plan=plan, limits=resolve_limits(task), config=jobs.OperatorConfig(), job_name="t-a0",
                         campaign=None)
    agent = job["spec"]["template"]["spec"]["containers"][0]
    assert agent["command"][4:] == (["true"] if plan.replay else list(plan.argv))
    env = {e["name"]: e.get("value") for e in agent["env"]}
    assert all(env[k] == v for k, v in plan.env.items())
