"""The chart's kopf peering (``operator.peering``): kopf's KopfPeering CRD from the chart's ``crds/``, a
KopfPeering ``anchorage`` in every namespace the operator watches, ``--priority`` instead of ``--standalone``;
off: ``--standalone`` and no peering objects. RBAC: ``test_chart_rbac.py``; validity and the CRD copy:
``test_chart_render.py``.

The install goes into the chart tests' fake API, which serves a CRD's kind only once the CRD was created
there, as a cluster does: a KopfPeering whose CRD Helm did not create first fails the install.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from charts.conftest import CHART, NAMESPACE, Rendered, parse_release
from charts.fakeapi import FakeApi
from charts.test_chart_render import cli_params, container

Render = Callable[..., Rendered]
PEERING_CRD = "kopfpeerings.kopf.dev"
CLUSTER_PEERING_CRD = "clusterkopfpeerings.kopf.dev"


def install_recording(helm: Any, values: dict[str, Any]) -> tuple[Rendered, list[tuple[str, str, str]]]:
    """Install into a fresh fake; the release's objects and what the fake stored, as (plural, namespace, name)
    in creation order (Helm's release Secrets left out)."""
    api = FakeApi()
    try:
        config = helm.Configuration(namespace=NAMESPACE, kubeconfig=api.kubeconfig(NAMESPACE))
        result = asyncio.run(helm.Install(config).run("anchorage", str(CHART), values=values, wait=False, timeout=60))
    finally:
        api.stop()
    return parse_release(result), [key for key in api.store.objects if key[0] != "secrets"]


def operator_params(rendered: Rendered) -> dict[str, Any]:
    return cli_params("operator", container(rendered, "anchorage-operator")["args"][1:])


@pytest.mark.parametrize("watch", [[], ["team-a", "team-b"]], ids=["release-namespace", "watch-namespaces"])
def test_peering_is_a_kopfpeering_in_each_watched_namespace_and_priority(render: Render, watch: list[str]) -> None:
    rendered = render({"operator": {"watchNamespaces": watch, "peering": {"priority": 42}}} if watch else {})
    params = operator_params(rendered)
    assert params["standalone"] is False
    assert params["priority"] == (42 if watch else 100)
    peerings = rendered.of_kind("KopfPeering")
    # kopf's namespaced peering keeps alive in, and pauses on, the KopfPeering of every namespace it serves
    assert sorted(p["metadata"]["namespace"] for p in peerings) == sorted(params["namespace"])
    assert {p["metadata"]["name"] for p in peerings} == {"anchorage"}  # settings.peering.name of the operator
    deployment = rendered.one("Deployment", "anchorage-operator")["spec"]
    assert deployment["replicas"] == 1 and deployment["strategy"] == {"type": "Recreate"}


def test_a_cluster_wide_operator_peers_through_the_clusterkopfpeering(helm: Any, repo_root: Path) -> None:
    """operator.clusterWide: --all-namespaces, one ClusterKopfPeering "anchorage" (kopf's cluster-wide peering, which
    kopf.run(clusterwide=True) selects), no KopfPeering; Helm creates its CRD (crds/) before it."""
    rendered, created = install_recording(helm, {"operator": {"clusterWide": True, "watchNamespaces": ["ignored"]}})
    params = operator_params(rendered)
    assert params["all_namespaces"] is True and params["standalone"] is False
    assert rendered.of_kind("KopfPeering") == []
    cluster = rendered.of_kind("ClusterKopfPeering")
    assert [p["metadata"]["name"] for p in cluster] == ["anchorage"] and "namespace" not in cluster[0]["metadata"]
    crd_at = created.index(("customresourcedefinitions", "", CLUSTER_PEERING_CRD))
    assert crd_at < created.index(("clusterkopfpeerings", "", "anchorage"))
    source = yaml.safe_load((repo_root / "crds" / "peering" / "kopf.dev_clusterkopfpeerings.yaml").read_text())
    assert source["spec"]["scope"] == "Cluster" and source["spec"]["names"]["kind"] == "ClusterKopfPeering"


def test_standalone_has_no_peering_objects(render: Render) -> None:
    rendered = render({"operator": {"peering": {"enabled": False}}})
    assert operator_params(rendered)["standalone"] is True
    assert rendered.of_kind("KopfPeering") == []
    assert rendered.one("Deployment", "anchorage-operator")["spec"]["strategy"] == {"type": "Recreate"}


class MockThread:
    """Stands in for threading.Thread while the operator's startup settings run (nothing is started)."""

    def __init__(self, **_: Any) -> None:
        pass

    def start(self) -> None:
        pass


def test_the_kopfpeering_is_the_one_the_operator_looks_for(render: Render, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its name and scope are what the operator's kopf startup settings say (namespaced peering)."""
    import kopf

    operator_settings = importlib.import_module("anchorage.controller.settings")  # the package re-exports a name
    monkeypatch.setattr(threading, "Thread", MockThread)  # in case the startup starts a background thread
    monkeypatch.setattr(logging.getLogger("kopf.objects"), "filters", [])
    configured = kopf.OperatorSettings()
    operator_settings.configure(settings=configured)
    assert configured.peering.clusterwide is False
    assert {p["metadata"]["name"] for p in render({}).of_kind("KopfPeering")} == {configured.peering.name}


def test_helm_creates_the_peering_crd_before_the_kopfpeerings(helm: Any, repo_root: Path) -> None:
    rendered, created = install_recording(helm, {})
    crd_at = created.index(("customresourcedefinitions", "", PEERING_CRD))
    peerings = [i for i, (plural, _, _) in enumerate(created) if plural == "kopfpeerings"]
    assert len(peerings) == len(rendered.of_kind("KopfPeering")) == 2 and crd_at < min(peerings)
    source = yaml.safe_load((repo_root / "crds" / "peering" / "kopf.dev_kopfpeerings.yaml").read_text())
    assert source["spec"]["scope"] == "Namespaced" and source["metadata"]["name"] == PEERING_CRD
    # no status subresource: kopf's keep-alive PATCHes go to kopfpeerings itself (no kopfpeerings/status rule)
    assert all("status" not in v.get("subresources", {}) for v in source["spec"]["versions"])


def test_peering_crd_is_helms_crds_dir_even_with_crds_disabled(helm: Any) -> None:
    """crds.enabled gates the chart's own CRDs only: Helm installs crds/ (kopf's CRD, shared by every kopf
    operator of the cluster) when absent and never upgrades or deletes it (`--skip-crds` leaves it out)."""
    rendered, created = install_recording(helm, {"crds": {"enabled": False}})
    crds = [name for plural, _, name in created if plural == "customresourcedefinitions"]
    assert sorted(crds) == [CLUSTER_PEERING_CRD, PEERING_CRD]
    assert rendered.of_kind("CustomResourceDefinition") == []  # not a release object: Helm never deletes it
    assert len(rendered.of_kind("KopfPeering")) == 2
