"""Trial pods get the local sandbox's seccomp profile where the nodes have it installed, RuntimeDefault otherwise."""

from __future__ import annotations

from typing import Any

import kubernetes_validate

from anchorage.manifests import TrialSpec
from anchorage.runtime.kube import jobs
from anchorage.runtime.kube.jobs import OperatorConfig
from anchorage.tasks import load_task, resolve_task
from anchorage.trials import plan_agent
from anchorage.trials.limits import resolve_limits

TRIAL = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial",
         "metadata": {"name": "t1", "namespace": "evals", "uid": "0000-1111"}}


def _pod(config: OperatorConfig) -> dict[str, Any]:
    spec = TrialSpec.model_validate({"task": "smoke-inventory", "agent": {"kind": "codex", "model": "gpt-5.5"}})
    task = load_task(resolve_task("smoke-inventory"))
    job = jobs.trial_job(TRIAL, spec, plan=plan_agent(spec.agent, task, spec.seed),
                         limits=resolve_limits(task, spec.limits), config=config, job_name="t1-a0",
                         campaign="c1")
    kubernetes_validate.validate(job, "1.30.0", strict=True)
    pod: dict[str, Any] = job["spec"]["template"]["spec"]
    return pod


def test_agent_containers_get_the_localhost_profile_when_configured() -> None:
    pod = _pod(OperatorConfig(agent_seccomp_profile="anchorage/agent.json"))
    agent = next(c for c in pod["containers"] if c["name"] == "agent")
    assert agent["securityContext"]["seccompProfile"] == {"type": "Localhost", "localhostProfile": "anchorage/agent.json"}
    # the platform's own containers (fetch, upload, CLI check) keep the runtime's default profile
    for container in pod["initContainers"]:
        assert container["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, container["name"]


def test_runtime_default_without_a_profile() -> None:
    pod = _pod(OperatorConfig())
    for container in pod["containers"] + pod["initContainers"]:
        assert container["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_the_operator_flag_sets_the_profile_and_refuses_paths_out_of_the_kubelets_root() -> None:
    import pytest
    import typer

    from anchorage.commands.operator import operator_config

    config = operator_config(store="file:///runs", gateway_selector=[], agent_seccomp_profile="anchorage/agent.json")
    assert config.agent_seccomp_profile == "anchorage/agent.json"
    assert operator_config(store="file:///runs", gateway_selector=[], agent_seccomp_profile="").agent_seccomp_profile is None
    for bad in ("/var/lib/kubelet/seccomp/agent.json", "../agent.json", "anchorage/../../agent.json"):
        with pytest.raises(typer.BadParameter, match="relative to the kubelet's seccomp root"):
            operator_config(store="file:///runs", gateway_selector=[], agent_seccomp_profile=bad)
