"""The session cluster's nodes are real nodes, and Anchorage runs on them as a user installs it.

``tests/kube_cluster.py`` joins two real nodes (kubelet, containerd + runc, CNI, kube-proxy, kube-router, CoreDNS;
``anchorage_devcluster.realnode``) and installs the chart from images in the cluster's registry. Here:

* the nodes are what ``kubectl get nodes -o wide`` says a real node is: the pinned kubelet, ``containerd://``, and
  this machine's CPUs and memory as capacity;
* ``examples/trial.yaml`` applied with kubectl reaches Succeeded with O-Eval 1 through the operator *pod*, and every
  pod of it (trial, verifier) ran its image on a node: container IDs are the runtime's, ``kubectl logs`` reads them;
* the task reached the pods from the task bundle image (the operator's own pod copies it in, nothing of the checkout
  is mounted anywhere).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_cluster import REAL_NODES, REAL_SELECTOR, RealCluster

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]


def _meminfo_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    raise AssertionError("no MemTotal in /proc/meminfo")


def test_the_nodes_run_the_pinned_kubelet_on_containerd_with_the_machines_capacity(real_cluster: RealCluster) -> None:
    from anchorage_devcluster import binaries

    nodes = real_cluster.get("nodes", "-l", REAL_SELECTOR)["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == sorted(REAL_NODES)
    for node in nodes:
        info, capacity = node["status"]["nodeInfo"], node["status"]["capacity"]
        assert info["kubeletVersion"] == binaries.KUBE_VERSION
        assert info["kubeProxyVersion"] in ("", binaries.KUBE_VERSION)
        assert info["containerRuntimeVersion"].startswith("containerd://1.")
        assert capacity["cpu"] == str(os.cpu_count())
        assert capacity["memory"] == f"{_meminfo_kib()}Ki"
    wide = real_cluster.kubectl("get", "nodes", "-o", "wide", "-l", REAL_SELECTOR).stdout
    assert binaries.KUBE_VERSION in wide and "containerd://" in wide, wide


def _wait_phase(real: RealCluster, kind: str, namespace: str, name: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        out = real.kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
        status = (json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}
        if status.get("phase") in ("Succeeded", "Failed", "InfrastructureFailed", "Cancelled"):
            return status
        time.sleep(2)
    pods = real.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
    operator = real.kubectl("logs", "-n", real.release.namespace, "deploy/anchorage-operator", "--tail=60",
                            check=False).stdout
    raise AssertionError(f"{kind} {namespace}/{name} did not end within {timeout:.0f} s: {status}\n{pods}\n{operator}")


def test_the_example_trial_runs_its_pods_from_their_images(real_cluster: RealCluster) -> None:
    release = real_cluster.release
    doc = yaml.safe_load((REPO / "examples" / "trial.yaml").read_text())
    real_cluster.kubectl("apply", "-n", release.namespace, "-f", str(REPO / "examples" / "trial.yaml"))
    name = doc["metadata"]["name"]
    status = _wait_phase(real_cluster, "trial", release.namespace, name, 600)
    assert status["phase"] == "Succeeded" and status["oEval"] == 1.0, status
    pods = real_cluster.get("pods", "-n", release.trials_namespace)["items"]
    ours = [p for p in pods if name in json.dumps(p["metadata"].get("labels") or {}) + json.dumps(
        p["metadata"].get("annotations") or {})]
    roles = {p["metadata"]["labels"].get("anchorage.dev/role") for p in ours}
    assert {"trial", "verifier"} <= roles, roles
    pushed = set(real_cluster.images.values())
    for pod in ours:
        assert pod["spec"]["nodeName"] in REAL_NODES
        statuses = [*(pod["status"].get("initContainerStatuses") or []), *(pod["status"].get("containerStatuses") or [])]
        assert statuses
        for container in statuses:
            assert container["containerID"].startswith("containerd://"), container
            assert container["image"] in pushed, (container["image"], pushed)
            assert container["imageID"], container
        logs = real_cluster.kubectl("logs", "-n", release.trials_namespace, pod["metadata"]["name"], "--all-containers",
                                    check=False)
        assert logs.returncode == 0, logs.stderr
    record = json.loads((real_cluster.store / "_trials" / release.namespace / name / "trial.json").read_text())
    assert record["phase"] == "Succeeded" and record["sandbox"]["mechanism"] == "kubernetes-pod"


def test_the_tasks_reach_the_pods_from_the_task_bundle_image(real_cluster: RealCluster) -> None:
    release = real_cluster.release
    deployment = real_cluster.get("deployment", "-n", release.namespace, "anchorage-operator")
    spec = deployment["spec"]["template"]["spec"]
    init = {c["name"]: c for c in spec.get("initContainers") or []}
    assert init["tasks"]["image"] == real_cluster.images["tasks"]
    assert not [v for v in spec.get("volumes") or [] if "hostPath" in v], "the operator pod mounts a host folder"
    operator = spec["containers"][0]
    assert f"--task-image={real_cluster.images['tasks']}" in operator["args"]
    assert not any(str(REPO) in arg for arg in operator["args"]), "the operator is pointed at the checkout"
