"""The real-cluster harness's in-process reads (``RealCluster.get``, ``RealCluster.status``) answer what kubectl
answers: the tests poll through them instead of a kubectl run each time."""

from __future__ import annotations

import json

import pytest

from kube_cluster import REAL_SELECTOR, Query, RealCluster


@pytest.mark.parametrize(("args", "path"), [
    (("trials", "-n", "ns", "-l", "a=b"), "/apis/anchorage.dev/v1alpha1/namespaces/ns/trials?labelSelector=a%3Db"),
    (("vc", "x", "-n", "ns"), "/apis/anchorage.dev/v1alpha1/namespaces/ns/verificationcampaigns/x"),
    (("job", "x", "--namespace", "t"), "/apis/batch/v1/namespaces/t/jobs/x"),
    (("namespace", "t"), "/api/v1/namespaces/t"),
    (("nodes", "-l", "k=v"), "/api/v1/nodes?labelSelector=k%3Dv"),
    (("pods", "-A"), "/api/v1/pods"),
    (("pod", "p"), "/api/v1/namespaces/default/pods/p"),
    (("events", "-n", "t", "--field-selector", "involvedObject.name=x"),
     "/api/v1/namespaces/t/events?fieldSelector=involvedObject.name%3Dx"),
])
def test_the_queries_read_in_process_and_their_paths(args: tuple[str, ...], path: str) -> None:
    query = Query.parse(args)
    assert query is not None and query.path() == path


@pytest.mark.parametrize("args", [
    ("pods", "-o", "wide"), ("deploy/anchorage-operator",), ("pods,jobs",), ("crd", "x"), ("workloads", "-A"),
    ("pod", "p", "-l", "a=b"), ("pods", "-n"), (), ("pod", "p", "q"),
])
def test_anything_else_is_left_to_kubectl(args: tuple[str, ...]) -> None:
    assert Query.parse(args) is None


@pytest.mark.cluster
def test_the_in_process_reads_equal_kubectls(real_cluster: RealCluster) -> None:
    real = real_cluster
    namespace = real.release.namespace
    for args in (("pods", "-n", namespace), ("nodes", "-l", REAL_SELECTOR), ("deployments", "-n", namespace),
                 ("namespaces",), ("crd",)):
        ours, theirs = real.get(*args), json.loads(real.kubectl("get", *args, "-o", "json").stdout)
        assert theirs["items"], args  # something to compare
        assert [(i["apiVersion"], i["kind"], i["metadata"]["uid"]) for i in ours["items"]] == \
            [(i["apiVersion"], i["kind"], i["metadata"]["uid"]) for i in theirs["items"]], args
        assert (ours["apiVersion"], ours["kind"]) == (theirs["apiVersion"], theirs["kind"])
    one = real.get("namespace", namespace)
    assert one["metadata"]["uid"] == json.loads(real.kubectl("get", "ns", namespace, "-o", "json").stdout)[
        "metadata"]["uid"]
    with pytest.raises(RuntimeError, match="not found"):
        real.get("vc", "no-such-campaign", "-n", namespace)
    assert real.status("vc", namespace, "no-such-campaign") == {}
    deployment = real.get("deployments", "-n", namespace)["items"][0]["metadata"]["name"]
    assert real.status("deployment", namespace, deployment)["replicas"] >= 1
