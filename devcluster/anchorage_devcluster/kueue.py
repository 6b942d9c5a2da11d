"""Kueue in the dev cluster, installed as a real cluster installs it.

Used by the tests' session fixture (``tests/kube_cluster.py``) and by ``anchorage dev cluster --kueue`` (``cli``).
:func:`install` puts Kueue's manager (``tools/kube/kueue``: ``sigs.k8s.io/kueue/cmd/kueue`` built from its Go
module, :func:`anchorage_devcluster.binaries.kueue_paths`) alone on ``scratch`` in an image, pushes it to the
cluster's registry and applies the module's own manifests (``config/default`` as ``kubectl kustomize`` renders it at
build time: the CRDs with their conversion webhooks, RBAC, the admission webhooks, the visibility API's APIServices,
the manager's Deployment in ``kueue-system``) with two changes: the image, and the manager's configuration
(:func:`manager_config`: only the ``batch/job`` integration — the others' CRDs are not installed — and, given
``fair_sharing``, Admission Fair Sharing's usage sampling). Kueue makes its own webhook certificates (its internal
cert management) and writes their CA into the webhook configurations.

The API server reaches the webhooks and the aggregated visibility API at the manager pod's address:
``--enable-aggregator-routing`` resolves a Service to its endpoints, and the host routes the pod CIDRs
(``controlplane``). :func:`install` returns once a server-side dry run of a Kueue object passes the webhooks, so
callers can use Kueue right away.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import yaml

from anchorage_devcluster import addons
from anchorage_devcluster.binaries import KUEUE_VERSION, find_kueue

NAMESPACE = "kueue-system"
DEPLOYMENT = "kueue-controller-manager"
CONFIG_MAP = "kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"
#: The manager's path in its image (the Deployment of the module's manifests runs ``/manager``).
MANAGER = "/manager"
#: What ``kubectl get crd`` lists once Kueue is installed (the operator asks for these).
CRDS = ("workloads.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io",
        "resourceflavors.kueue.x-k8s.io", "workloadpriorityclasses.kueue.x-k8s.io")


def manager_config(module_config: str, *, fair_sharing: dict[str, str] | None = None) -> str:
    """The manager's configuration: the module's own (``module_config``) with the ``batch/job`` integration only and,
    given ``fair_sharing`` (``usageHalfLifeTime``, ``usageSamplingInterval``), Admission Fair Sharing on, counting
    pods only (a trial's CPU and memory are the task's: a campaign of large tasks is not penalised per pod)."""
    config: dict[str, Any] = yaml.safe_load(module_config)
    config["integrations"] = {"frameworks": ["batch/job"]}
    if fair_sharing:
        config["admissionFairSharing"] = {
            **fair_sharing,
            "resourceWeights": {"cpu": 0, "memory": 0, "ephemeral-storage": 0, "pods": 1}}
    return yaml.safe_dump(config, sort_keys=False)


def manifests(rendered: str, image: str, *, fair_sharing: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The module's rendered manifests (``rendered``) with the manager's ``image`` and configuration
    (:func:`manager_config`); its requests fitted to a development node."""
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    for doc in docs:
        kind, name = doc["kind"], doc["metadata"]["name"]
        if kind == "ConfigMap" and name == CONFIG_MAP:
            doc["data"][CONFIG_KEY] = manager_config(doc["data"][CONFIG_KEY], fair_sharing=fair_sharing)
        if kind == "Deployment" and name == DEPLOYMENT:
            pod = doc["spec"]["template"]["spec"]
            for container in pod["containers"]:
                if container["name"] == "manager":
                    container["image"], container["imagePullPolicy"] = image, "IfNotPresent"
                    container["resources"] = {"requests": {"cpu": "100m", "memory": "256Mi"},
                                              "limits": {"memory": "512Mi"}}
            # the configuration is read at start: a changed one restarts the manager
            digest = hashlib.sha256(json.dumps(fair_sharing, sort_keys=True).encode()).hexdigest()[:12]
            doc["spec"]["template"]["metadata"].setdefault("annotations", {})["anchorage.dev/kueue-config"] = digest
    return docs


def install(local: Any, *, fair_sharing: dict[str, str] | None = None, timeout: float = 300) -> str:
    """Install Kueue into ``local`` (an ``anchorage_devcluster.cluster.LocalCluster`` with real nodes and a
    registry) and wait until its webhooks answer; the manager's image reference. See the module docstring."""
    found = find_kueue()
    if isinstance(found, str):
        raise RuntimeError(found)
    if local.registry is None:
        raise RuntimeError("Kueue runs as a pod: start the cluster with real nodes (and so a registry)")
    built = addons.binary_image("kueue", found["kueue"], [MANAGER], "65532:65532", path=MANAGER)
    image = local.registry.push(built, "anchorage/kueue", built.rpartition(":")[2])
    docs = manifests(found["manifests"].read_text(), image, fair_sharing=fair_sharing)
    # server-side: the CRDs are larger than client-side apply's last-applied annotation may be
    local.plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump_all(docs),
                        timeout=timeout)
    local.plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", *CRDS, timeout=90)
    local.plane.kubectl("rollout", "status", "-n", NAMESPACE, f"deployment/{DEPLOYMENT}",
                        f"--timeout={timeout:.0f}s", timeout=timeout + 10)
    wait_for_webhooks(local, timeout)
    return str(image)


PROBE = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
         "metadata": {"name": "anchorage-webhook-probe"}}


def wait_for_webhooks(local: Any, timeout: float) -> None:
    """Until a server-side dry run of a ResourceFlavor passes Kueue's webhooks (the API server reaches the manager
    pod, its certificate is in the webhook configurations) and the visibility API answers."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        probe = local.plane.kubectl("create", "--dry-run=server", "-f", "-", stdin=json.dumps(PROBE), check=False)
        visible = local.plane.kubectl("get", "--raw", "/apis/visibility.kueue.x-k8s.io/v1beta2", check=False)
        if probe.returncode == 0 and visible.returncode == 0:
            return
        last = (probe.stderr + visible.stderr).strip()
        time.sleep(2)
    logs = local.plane.kubectl("logs", "-n", NAMESPACE, f"deployment/{DEPLOYMENT}", "--tail=40", check=False)
    raise RuntimeError(f"Kueue {KUEUE_VERSION}'s webhooks or visibility API did not answer within {timeout:.0f} s: "
                       f"{last}\n{logs.stdout[-3000:]}")


def uninstall(local: Any, *, timeout: float = 180) -> None:
    """Remove what :func:`install` applied: first the queued Jobs and every Kueue object while the manager still runs
    (it removes their finalizers), then the manifests (webhooks, APIServices, the manager, the CRDs). Afterwards no
    Job creation waits on Kueue's webhook."""
    found = find_kueue()
    if isinstance(found, str):
        return
    # the queued Jobs first: for a Job with a queue label left, Kueue would make its Workload again
    local.plane.kubectl("delete", "jobs", "-A", "-l", "kueue.x-k8s.io/queue-name", "--ignore-not-found",
                        f"--timeout={timeout:.0f}s", timeout=timeout + 20, check=False)
    for scope, kinds in (("-A", "workloads.kueue.x-k8s.io,localqueues.kueue.x-k8s.io"),
                         ("", "clusterqueues.kueue.x-k8s.io,resourceflavors.kueue.x-k8s.io,"
                              "workloadpriorityclasses.kueue.x-k8s.io")):
        local.plane.kubectl("delete", kinds, "--all", *([scope] if scope else []), "--ignore-not-found",
                            f"--timeout={timeout:.0f}s", timeout=timeout + 20, check=False)
    docs = [d for d in yaml.safe_load_all(Path(found["manifests"]).read_text()) if d]
    local.plane.kubectl("delete", "--ignore-not-found", "--wait=true", f"--timeout={timeout:.0f}s", "-f", "-",
                        stdin=yaml.safe_dump_all(docs), timeout=timeout + 20, check=False)
