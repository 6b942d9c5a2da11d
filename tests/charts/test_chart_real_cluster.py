"""The chart composes on the real control plane (``real_cluster``: the pinned kube-apiserver with RBAC and
PodSecurity admission, the session's release ``anchorage`` in namespace ``anchorage`` already installed): a
second release in a namespace of its own beside it, and the chart as a subchart of a parent chart with
``global`` values — both accepted by the real API server (schema, admission, Helm's ownership checks), each
with its own trials namespace enforcing the restricted Pod Security Standard. Skips, saying why, where the
control plane is not built (``make kube``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from charts.conftest import CHART
from charts.test_chart_composition import PARENT_VALUES, parent_chart

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def _install(real_cluster: Any, chart: Path, release: str, namespace: str, values: dict[str, Any]) -> None:
    from anchorage_devcluster import cluster

    cluster.install_chart(real_cluster.local, chart, release=release, namespace=namespace, values=values)


def _uninstall(real_cluster: Any, release: str, namespace: str) -> None:
    import helm_sdkpy

    config = helm_sdkpy.Configuration(namespace=namespace, kubeconfig=str(real_cluster.admin_kubeconfig))
    with contextlib.suppress(Exception):
        asyncio.run(helm_sdkpy.Uninstall(config).run(release))


@pytest.fixture(scope="module")
def installed(real_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Release ``side`` of the chart in namespace ``side`` and the parent chart ``platform`` in ``platform``."""
    store = {"store": {"uri": f"file://{real_cluster.store}"}}
    _install(real_cluster, CHART, "side", "side", {**store, "crds": {"enabled": False}})
    parent = parent_chart(tmp_path_factory.mktemp("parent"))
    values = json.loads(json.dumps(PARENT_VALUES))
    values["anchorage"].update({"crds": {"enabled": False}, **store})
    _install(real_cluster, parent, "platform", "platform", values)
    try:
        yield real_cluster
    finally:
        _uninstall(real_cluster, "platform", "platform")
        _uninstall(real_cluster, "side", "side")


def test_a_second_release_runs_beside_the_first(installed: Any) -> None:
    namespaces = {n["metadata"]["name"]: n["metadata"].get("labels", {})
                  for n in installed.get("namespaces")["items"]}
    for trials in ("anchorage-trials", "side-side-anchorage-trials"):
        assert namespaces[trials]["pod-security.kubernetes.io/enforce"] == "restricted", trials
    roles = {r["metadata"]["name"] for r in installed.get("clusterroles")["items"]}
    assert {"anchorage-operator-framework-anchorage", "side-anchorage-operator-framework-side"} <= roles
    deployment = installed.get("deployment", "-n", "side", "side-anchorage-operator")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--trials-namespace=side-side-anchorage-trials" in args
    assert installed.get("deployment", "-n", "anchorage", "anchorage-operator")["metadata"]["name"]  # still there


def test_the_chart_installs_as_a_subchart_with_global_values(installed: Any) -> None:
    deployment = installed.get("deployment", "-n", "platform", "platform-anchorage-gateway")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "mirror.example:5000/anchorage/operator:0.1.0"
    assert {"name": "mirror-pull"} in pod["imagePullSecrets"]
    trials = installed.get("namespace", "platform-platform-anchorage-trials")
    assert trials["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    policies = {p["metadata"]["name"] for p in installed.get("networkpolicies", "-n",
                                                             "platform-platform-anchorage-trials")["items"]}
    assert "anchorage-default-deny" in policies
