"""The chart composes: installed as a subchart of a parent chart with ``global`` values (and left out by the
parent's condition), and as two releases side by side in two namespaces — each with its own names, trials
namespace and RBAC, nothing cluster-scoped shared but the CRDs one release owns. Rendered by the Helm library
(helm-sdkpy) into the recording fake API; tests/charts/test_chart_real_cluster.py installs the same into the
real control plane.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from charts.conftest import CHART, Rendered, parse_release
from charts.fakeapi import FakeApi

PARENT_VALUES: dict[str, Any] = {
    "global": {"imageRegistry": "mirror.example:5000", "imagePullSecrets": [{"name": "mirror-pull"}]},
    "anchorage": {"store": {"uri": "s3://platform-runs/runs"}, "imagePullSecrets": ["own-pull"]},
}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}


def parent_chart(root: Path) -> Path:
    """A parent chart "platform" with this chart as a dependency (condition ``anchorage.enabled``), vendored
    in its charts/ as ``helm dependency build`` would."""
    parent = root / "platform"
    (parent / "charts").mkdir(parents=True)
    shutil.copytree(CHART, parent / "charts" / "anchorage")
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    (parent / "Chart.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v2", "name": "platform", "version": "1.0.0", "type": "application",
        "dependencies": [{"name": "anchorage", "version": chart["version"], "repository": "file://../anchorage",
                          "condition": "anchorage.enabled"}]}))
    (parent / "values.yaml").write_text(yaml.safe_dump({"global": {}, "anchorage": {"enabled": True}}))
    return parent


def install_into(api: FakeApi, helm: Any, chart: Path, release: str, namespace: str,
                 values: dict[str, Any]) -> Rendered:
    config = helm.Configuration(namespace=namespace, kubeconfig=api.kubeconfig(namespace))
    result: dict[str, Any] = asyncio.run(
        helm.Install(config).run(release, str(chart), values=values, wait=False, timeout=60))
    return parse_release(result)


@pytest.fixture(scope="module")
def parent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return parent_chart(tmp_path_factory.mktemp("parent"))


@pytest.fixture(scope="module")
def as_subchart(helm: Any, parent: Path) -> Rendered:
    api = FakeApi()
    try:
        return install_into(api, helm, parent, "platform", "platform", PARENT_VALUES)
    finally:
        api.stop()


def containers(rendered: Rendered) -> list[dict[str, Any]]:
    pods = [d["spec"]["template"]["spec"] for d in rendered.of_kind("Deployment")] + \
        [p["spec"] for p in rendered.of_kind("Pod")]
    return [c for pod in pods for c in pod["containers"]]


def test_the_subchart_takes_the_parents_global_values(as_subchart: Rendered) -> None:
    images = {c["image"] for c in containers(as_subchart)}
    assert images == {"mirror.example:5000/anchorage/operator:0.1.0"}, images  # global.imageRegistry
    for deployment in as_subchart.of_kind("Deployment"):
        secrets = deployment["spec"]["template"]["spec"]["imagePullSecrets"]
        assert secrets == [{"name": "own-pull"}, {"name": "mirror-pull"}], deployment["metadata"]["name"]
    operator = as_subchart.one("Deployment", "platform-anchorage-operator")
    args = operator["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--store=s3://platform-runs/runs" in args  # the parent's values for the subchart reach it
    assert "--trials-namespace=platform-platform-anchorage-trials" in args
    assert "--operator-image=mirror.example:5000/anchorage/operator:0.1.0" in args


def test_the_subchart_is_named_after_the_parents_release(as_subchart: Rendered) -> None:
    names = {(o["kind"], o["metadata"]["name"]) for o in as_subchart.objects}
    assert ("Deployment", "platform-anchorage-gateway") in names
    assert ("Namespace", "platform-platform-anchorage-trials") in names
    assert ("ClusterRole", "platform-anchorage-operator-framework-platform") in names
    unprefixed = {n for k, n in names if k not in {"CustomResourceDefinition", "NetworkPolicy", "KopfPeering"}
                  and not n.startswith("platform-")}
    assert unprefixed == set()


def test_the_parents_condition_leaves_the_chart_out(helm: Any, parent: Path) -> None:
    api = FakeApi()
    try:
        rendered = install_into(api, helm, parent, "platform", "platform", {"anchorage": {"enabled": False}})
    finally:
        api.stop()
    assert rendered.objects == []


def test_enabled_false_renders_nothing_standalone(render: Callable[..., Rendered]) -> None:
    assert render({"enabled": False}).objects == []


def test_two_releases_in_two_namespaces_side_by_side(helm: Any) -> None:
    """Installed one after the other into one API (Helm refuses an object another release owns): the second
    release with crds.enabled=false, as the README says; nothing else they create has the same name."""
    api = FakeApi()
    try:
        first = install_into(api, helm, CHART, "anchorage", "team-a", {})
        second = install_into(api, helm, CHART, "anchorage", "team-b", {"crds": {"enabled": False}})
        stored = api.store.created()
        with pytest.raises(helm.InstallError, match="CustomResourceDefinition"):  # the CRDs are the first release's
            install_into(api, helm, CHART, "third", "team-c", {})
    finally:
        api.stop()

    def identities(rendered: Rendered) -> set[tuple[str, str, str]]:
        return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in rendered.objects}

    assert identities(first) & identities(second) == set()
    trials = [next(o["metadata"]["name"] for o in r.of_kind("Namespace")) for r in (first, second)]
    assert trials == ["team-a-anchorage-trials", "team-b-anchorage-trials"]
    for rendered, home, own_trials in ((first, "team-a", trials[0]), (second, "team-b", trials[1])):
        namespaced = {o["metadata"]["namespace"] for o in rendered.objects
                      if o["kind"] not in CLUSTER_SCOPED and "namespace" in o["metadata"]}
        assert namespaced <= {home, own_trials}, namespaced  # each release stays in its own namespaces
        operator = rendered.one("Deployment", "anchorage-operator")["spec"]["template"]["spec"]["containers"][0]
        assert f"--trials-namespace={own_trials}" in operator["args"]
        watched = {a.split("=", 1)[1] for a in operator["args"] if a.startswith("--namespace=")}
        assert watched == {home, own_trials}
    assert len([o for o in stored if o.get("kind") == "Namespace"]) == 2


def test_security_contexts_are_values(render: Callable[..., Rendered]) -> None:
    """The chart's pods take podSecurityContext / containerSecurityContext; a null key is left out (platforms
    that assign user ids), and nothing hard-codes a user id."""
    rendered = render({"podSecurityContext": {"runAsUser": None, "fsGroup": None, "runAsGroup": None},
                       "containerSecurityContext": {"readOnlyRootFilesystem": True, "runAsUser": 1000700000}})
    for deployment in rendered.of_kind("Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
        assert pod["containers"][0]["securityContext"]["runAsUser"] == 1000700000
    for template in (CHART / "templates").rglob("*"):
        if template.is_file():
            assert "10004" not in template.read_text(), template


def test_trial_scheduling_values_reach_the_operators_pods(render: Callable[..., Rendered]) -> None:
    """trials.* placement values become operator flags, and the operator's own builders put them on trial,
    verifier and protocol pods."""
    from anchorage.commands.operator import operator_config
    from anchorage.manifests import TrialSpec
    from anchorage.runtime.kube import jobs
    from anchorage.tasks import load_task, resolve_task
    from anchorage.trials.agents import plan_agent
    from anchorage.trials.limits import resolve_limits

    toleration = {"key": "anchorage.dev/untrusted", "operator": "Exists", "effect": "NoSchedule"}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["agents"]}]}]}}}
    rendered = render({"trials": {"runtimeClassName": "gvisor", "nodeSelector": {"pool": "agents"},
                                  "tolerations": [toleration], "affinity": affinity,
                                  "priorityClassName": "batch-low"}})
    args = rendered.one("Deployment", "anchorage-operator")["spec"]["template"]["spec"]["containers"][0]["args"]
    from charts.test_chart_render import cli_params

    params = cli_params("operator", args[1:])
    config = operator_config(store=params["store"], gateway_selector=params["gateway_selector"],
                             node_selector=params["node_selector"], tolerations=params["tolerations"],
                             affinity=params["affinity"], priority_class_name=params["priority_class_name"],
                             runtime_class_name=params["runtime_class_name"])
    trial = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial",
             "metadata": {"name": "t", "namespace": "anchorage", "uid": "u1"},
             "spec": {"task": "smoke-inventory", "agent": {"kind": "oracle"}}}
    spec = TrialSpec.model_validate(trial["spec"])
    task = load_task(resolve_task("smoke-inventory"))
    pods = [jobs.trial_job(trial, spec, plan=plan_agent(spec.agent, task, 0), limits=resolve_limits(task), config=config,
                           job_name="t-a1", campaign=None)["spec"]["template"]["spec"],
            jobs.protocol_job(trial, step="panel", task="smoke-inventory", settings={}, artifact=None,
                              config=config, campaign=None)["spec"]["template"]["spec"]]
    for pod in pods:
        # the user's toleration, then the lost-node taints tolerated only trials.platformFailures.nodeLostSeconds
        lost = [{"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
                for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]
        assert pod["nodeSelector"] == {"pool": "agents"} and pod["tolerations"] == [toleration, *lost]
        assert pod["affinity"] == affinity and pod["priorityClassName"] == "batch-low"
    assert pods[0]["runtimeClassName"] == "gvisor"
    plain = render({})
    assert not any(a.startswith(("--node-selector", "--tolerations", "--affinity", "--priority-class-name"))
                   for a in plain.one("Deployment", "anchorage-operator")["spec"]["template"]["spec"]["containers"][0]
                   ["args"])
