"""The chart's disruption budgets and its check that monitoring CRDs exist before monitors are asked for.

* a PodDisruptionBudget each for the operator and the gateway (one replica, Recreate): ``maxUnavailable`` 1 by default
  (a drain may evict the pod), 0 on request (evictions refused), never blocking on an unready pod, selecting exactly
  the Deployment's pods; off: none;
* ``metrics.serviceMonitor`` / ``metrics.podMonitor`` / ``prometheusRule`` on a cluster that does not serve
  ``monitoring.coreos.com/v1``: ``helm install`` fails before creating anything, naming the value and the fix; on a
  cluster that serves it the objects render (the chart tests' fake API, with and without that group in discovery).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from charts.conftest import Rendered, install, parse_release

Render = Callable[..., Rendered]
MONITORS = [("metrics.serviceMonitor.enabled", {"metrics": {"serviceMonitor": {"enabled": True}}}, "ServiceMonitor"),
            ("metrics.podMonitor.enabled", {"metrics": {"podMonitor": {"enabled": True}}}, "PodMonitor"),
            ("prometheusRule.enabled", {"prometheusRule": {"enabled": True}}, "PrometheusRule")]


def _pods_of(rendered: Rendered, name: str) -> dict[str, str]:
    labels: dict[str, str] = rendered.one("Deployment", name)["spec"]["template"]["metadata"]["labels"]
    return labels


def test_operator_and_gateway_have_a_budget_that_lets_drains_through(render: Render) -> None:
    rendered = render({})
    budgets = {b["metadata"]["name"]: b for b in rendered.of_kind("PodDisruptionBudget")}
    assert sorted(budgets) == ["anchorage-gateway", "anchorage-operator"]
    for name, budget in budgets.items():
        spec = budget["spec"]
        assert spec["maxUnavailable"] == 1 and "minAvailable" not in spec
        assert spec["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
        pods = _pods_of(rendered, name)
        assert spec["selector"]["matchLabels"].items() <= pods.items()
        # it selects this Deployment's pods only (the operator's budget never counts the gateway's pod)
        other = _pods_of(rendered, "anchorage-gateway" if name == "anchorage-operator" else "anchorage-operator")
        assert not spec["selector"]["matchLabels"].items() <= other.items()


def test_budgets_follow_their_values(render: Render) -> None:
    held = render({"gateway": {"podDisruptionBudget": {"maxUnavailable": 0}}})
    assert held.one("PodDisruptionBudget", "anchorage-gateway")["spec"]["maxUnavailable"] == 0
    assert held.one("PodDisruptionBudget", "anchorage-operator")["spec"]["maxUnavailable"] == 1
    off = render({"operator": {"podDisruptionBudget": {"enabled": False}}, "gateway": {"enabled": False}})
    assert off.of_kind("PodDisruptionBudget") == []


@pytest.mark.parametrize("value, values, kind", MONITORS, ids=[m[2] for m in MONITORS])
def test_monitors_without_the_monitoring_crds_fail_the_install_with_the_fix(helm: Any, value: str,
                                                                            values: dict[str, Any], kind: str) -> None:
    with pytest.raises(helm.InstallError) as failed:
        install(helm, values, absent=("monitoring.coreos.com",))
    text = str(failed.value)
    assert f"{value}=true asks for a {kind}" in text, text
    assert "monitoring.coreos.com/v1" in text and "Prometheus Operator's CRDs" in text and f"{value}=false" in text
    # with the CRDs served the same values install, and the monitor is there
    assert parse_release(install(helm, values)).of_kind(kind)


def test_without_monitors_a_cluster_without_the_monitoring_crds_installs(helm: Any) -> None:
    rendered = parse_release(install(helm, {}, absent=("monitoring.coreos.com",)))
    assert rendered.one("Deployment", "anchorage-operator")
    assert not [o for o in rendered.objects if o["apiVersion"].startswith("monitoring.coreos.com/")]


def test_notes_show_the_served_namespaces_and_kubectl_with_n(render: Render) -> None:
    """The NOTES' commands carry ``-n`` with a served namespace (a bare ``kubectl apply`` lands in ``default``, which
    the operator does not serve), and say where objects are served."""
    notes = render({}).notes
    assert "serves Trials, ScoringRuns and campaigns in anchorage, anchorage-trials only" in notes
    assert "kubectl apply -n anchorage -f examples/campaign.yaml" in notes and "kubectl get vc,tr,sr -n anchorage" in notes
    assert "NotServed" in notes
    team = render({"operator": {"watchNamespaces": ["team-a"]}}).notes
    assert "kubectl apply -n team-a -f examples/campaign.yaml" in team  # the release's own namespace is not served
    assert "in every namespace" in render({"operator": {"clusterWide": True}}).notes
    assert "kubectl apply -f" not in notes
