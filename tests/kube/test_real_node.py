"""The session cluster's nodes are real nodes, and Anchorage runs on them as a user installs it.

``tests/kube_cluster.py`` joins two real nodes (kubelet, containerd + runc, CNI, kube-proxy, kube-router, CoreDNS;
``anchorage_devcluster.realnode``) and installs the chart from images in the cluster's registry. Here:

* the nodes are what ``kubectl get nodes -o wide`` says a real node is: the pinned kubelet, ``containerd://``, and
  this machine's CPUs and memory as capacity;
* the trial of ``examples/trial.yaml`` reaches Succeeded with O-Eval 1 through the operator *pod*, and every pod of
  it (trial, verifier) ran its image on a node: container IDs are the runtime's, ``kubectl logs`` reads them
  (``examples/trial.yaml`` itself, applied with kubectl: ``test_real_cluster.py``);
* a trial over its memory is OOM-killed by its cgroup and recorded as the model's ``oom``; a trial's CPU limit is its
  container's CFS quota, and a busy loop is throttled by it;
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
        status = real.status(kind, namespace, name)
        if status.get("phase") in ("Succeeded", "Failed", "InfrastructureFailed", "Cancelled"):
            return status
        time.sleep(2)
    pods = real.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
    operator = real.kubectl("logs", "-n", real.release.namespace, "deploy/anchorage-operator", "--tail=60",
                            check=False).stdout
    raise AssertionError(f"{kind} {namespace}/{name} did not end within {timeout:.0f} s: {status}\n{pods}\n{operator}")


@pytest.mark.slow  # a trial and its verifier on the real nodes, the agent image pulled on first use
def test_the_example_trial_runs_its_pods_from_their_images(real_cluster: RealCluster) -> None:
    release = real_cluster.release
    doc = yaml.safe_load((REPO / "examples" / "trial.yaml").read_text())
    name = doc["metadata"]["name"] = "images-oracle-s0"  # examples/trial.yaml itself: tests/kube/test_real_cluster.py
    real_cluster.kubectl("apply", "-n", release.namespace, "-f", "-", stdin=yaml.safe_dump(doc))
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


def _trial(real: RealCluster, name: str, command: str, limits: dict[str, Any]) -> None:
    doc = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": name},
           "spec": {"task": "smoke-inventory", "agent": {"kind": "command", "command": ["/bin/sh", "-c", command]},
                    "limits": limits}}
    real.kubectl("apply", "-n", real.release.namespace, "-f", "-", stdin=yaml.safe_dump(doc))


@pytest.mark.slow  # a trial and its verifier on the real nodes
def test_a_trial_over_its_memory_is_oom_killed_by_its_cgroup_and_is_the_models_oom(real_cluster: RealCluster) -> None:
    hog = "python3 -c 'x = bytearray(600 * 1024 * 1024); print(len(x))'"
    _trial(real_cluster, "hogs-memory", hog, {"memoryMB": 128, "cpus": 0.5, "agentTimeoutSec": 300})
    status = _wait_phase(real_cluster, "trial", real_cluster.release.namespace, "hogs-memory", 600)
    assert status["phase"] == "Failed" and status["reason"] == "oom", status  # the model's failure, not the platform's
    record = json.loads((real_cluster.store / "_trials" / real_cluster.release.namespace / "hogs-memory" /
                         "trial.json").read_text())
    assert "OOMKilled" in record["message"], record["message"]


def _container_cgroup(real: RealCluster, controller: str, node: str, container_id: str) -> Path | None:
    """The cgroup folder of a container: the kubelet's cgroupfs layout under its node's cgroup root."""
    ident = container_id.removeprefix("containerd://")
    top = Path("/sys/fs/cgroup", controller, real.local.real_nodes[node].cgroup)
    for folder, children, _ in os.walk(top):
        if ident in children:
            return Path(folder, ident)
    return None


@pytest.mark.slow  # a trial whose agent spins for 1 s of CPU at a fifth of a CPU
def test_a_trials_cpu_limit_is_enforced_by_its_cgroup(real_cluster: RealCluster) -> None:
    """A fifth of a CPU: the agent's container gets a CFS quota of 20 ms per 100 ms, and a busy loop is throttled by it.
    The loop runs for CPU time, not wall time: on a loaded machine it runs longer instead of ending unthrottled. A node
    weighs as one of the machine's sessions (the kernel's autogroups), so a 4 s wall-time loop at half a CPU once saw
    no throttling on the CI (measured here: a top cgroup beside 4 busy sessions got 0.34 CPU, below half a CPU and
    above a fifth)."""
    busy = "python3 -c 'import time\nwhile time.process_time() < 1: pass'; sleep 40"
    _trial(real_cluster, "spins", busy, {"memoryMB": 256, "cpus": 0.2, "agentTimeoutSec": 300})
    namespace = real_cluster.release.trials_namespace
    deadline, cgroup = time.monotonic() + 300, None
    while cgroup is None and time.monotonic() < deadline:
        for pod in real_cluster.get("pods", "-n", namespace, "-l", "anchorage.dev/trial=spins")["items"]:
            for status in pod["status"].get("containerStatuses") or []:
                if status["name"] == "agent" and "running" in (status.get("state") or {}):
                    cgroup = _container_cgroup(real_cluster, "cpu", pod["spec"]["nodeName"], status["containerID"])
        time.sleep(1)
    assert cgroup is not None, "the agent container never ran (or its cgroup was not found)"
    assert int((cgroup / "cpu.cfs_quota_us").read_text()) == 20_000
    assert int((cgroup / "cpu.cfs_period_us").read_text()) == 100_000
    stat: dict[str, str] = {}
    until = time.monotonic() + 60  # 1 s of CPU at 0.2 CPU is 5 s or more
    while time.monotonic() < until and int(stat.get("nr_throttled", 0)) == 0:
        time.sleep(0.5)
        stat = dict(line.split() for line in (cgroup / "cpu.stat").read_text().splitlines())
    assert int(stat["nr_throttled"]) > 0 and int(stat["throttled_time"]) > 0, stat
    real_cluster.kubectl("delete", "trial", "spins", "-n", real_cluster.release.namespace, "--wait=false")
