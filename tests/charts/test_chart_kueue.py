"""The chart's optional Kueue objects (``kueue.*``): a ResourceFlavor, a ClusterQueue fed only by the trials
namespace with the quotas, preemption and fair sharing asked, LocalQueues where the trial Jobs run, and
WorkloadPriorityClasses; each valid against Kueue's own CRDs (those of the pinned module, ``make kube``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from charts.conftest import Rendered
from charts.customobjects import custom_object_errors

Render = Callable[..., Rendered]
K8S = "1.30.0"
VALUES: dict[str, Any] = {"kueue": {
    "enabled": True, "clusterQueue": {"name": "evals", "quota": {"pods": 4}, "fairSharing": True},
    "localQueues": [{"name": "team-a", "weight": 3}, {"name": "team-b"}],
    "priorityClasses": [{"name": "urgent", "value": 1000, "description": "deadline work"}]}}
KINDS = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass")


def test_no_kueue_object_unless_enabled(render: Render) -> None:
    assert not {o["kind"] for o in render({}).objects} & set(KINDS)


def test_the_simple_setup_feeds_one_cluster_queue_from_the_trials_namespace(render: Render) -> None:
    rendered = render(VALUES)
    flavor, = rendered.of_kind("ResourceFlavor")
    queue, = rendered.of_kind("ClusterQueue")
    assert queue["metadata"]["name"] == "evals"
    spec = queue["spec"]
    assert spec["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "anchorage-trials"}}
    assert spec["preemption"] == {"withinClusterQueue": "LowerPriority"}
    assert spec["admissionScope"] == {"admissionMode": "UsageBasedAdmissionFairSharing"}
    group, = spec["resourceGroups"]
    # the default quotas merged with the values': every resource a trial pod requests is covered
    assert group["coveredResources"] == ["cpu", "ephemeral-storage", "memory", "pods"]
    resources = {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]}
    assert resources["pods"] == "4" and group["flavors"][0]["name"] == flavor["metadata"]["name"]
    local = {q["metadata"]["name"]: q for q in rendered.of_kind("LocalQueue")}
    assert sorted(local) == ["team-a", "team-b"]
    assert {q["metadata"]["namespace"] for q in local.values()} == {"anchorage-trials"}
    assert {n: q["spec"]["fairSharing"]["weight"] for n, q in local.items()} == {"team-a": "3", "team-b": "1"}
    assert all(q["spec"]["clusterQueue"] == "evals" for q in local.values())
    priority, = rendered.of_kind("WorkloadPriorityClass")
    assert (priority["metadata"]["name"], priority["value"]) == ("urgent", 1000)


def test_without_fair_sharing_the_queues_carry_no_weights(render: Render) -> None:
    rendered = render({"kueue": {"enabled": True}})
    queue, = rendered.of_kind("ClusterQueue")
    assert "admissionScope" not in queue["spec"]
    assert all("fairSharing" not in q["spec"] for q in rendered.of_kind("LocalQueue"))


def test_the_objects_are_valid_against_kueues_crds(render: Render) -> None:
    from anchorage_devcluster import binaries

    found = binaries.find_kueue()
    if isinstance(found, str):
        pytest.skip(found)
    crds = {d["spec"]["names"]["kind"]: d for d in yaml.safe_load_all(found["manifests"].read_text())
            if d and d["kind"] == "CustomResourceDefinition"}
    for obj in render(VALUES).objects:
        if obj["apiVersion"].startswith("kueue.x-k8s.io/"):
            assert custom_object_errors(obj, crds[obj["kind"]], K8S) == [], f"{obj['kind']}/{obj['metadata']['name']}"
