"""A whole local cluster: the real control plane, real nodes, simulated nodes, Anchorage's CRDs and Helm chart.

Used by ``anchorage dev cluster`` (``cli``) and by the tests' session fixture (``tests/kube_cluster.py``).
:func:`start` starts ``controlplane`` — with ``real_nodes``, on the host's address of a bridge of its own
(``network``) beside a registry (``addons``), so that :meth:`LocalCluster.add_real_node` can join real nodes
(``realnode``: kubelet, containerd, CNI, kube-proxy, kube-router) and the first of them brings the cluster DNS;
:meth:`LocalCluster.start_simulated_node` adds a *simulated* node (``simulatednode``: load tests only);
:func:`apply_crds` applies ``crds/``; :func:`install_chart` installs ``charts/anchorage`` with the Helm
library (helm-sdkpy) as the admin, then :meth:`LocalCluster.operator_kubeconfig` gives a kubeconfig with a
token of the chart's operator ServiceAccount, so an operator started with it has exactly the chart's RBAC.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from anchorage_devcluster import addons, controlplane, realnode
from anchorage_devcluster.binaries import Binaries
from anchorage_devcluster.lifetimes import die_with_parent
from anchorage_devcluster.network import Network


@dataclass
class LocalCluster:
    """The control plane and its node agents (see the module docstring)."""

    plane: controlplane.ControlPlane
    nodes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    network: Network | None = None
    registry: addons.Registry | None = None
    real_nodes: dict[str, realnode.RealNode] = field(default_factory=dict)
    system_images: dict[str, str] = field(default_factory=dict)
    #: References of the images this cluster runs beside the system ones (``bring_up``: Anchorage's and the store's):
    #: what a real node keeps of its image store when it joins (:meth:`add_real_node`).
    session_images: set[str] = field(default_factory=set)

    @property
    def root(self) -> Path:
        return self.plane.root

    def start_store(self, s3_binary: Path, *, bucket: str = "runs", timeout: float = 120) -> addons.Store:
        """The S3 server as a pod (``addons.store_manifests``) with ``bucket`` made, once a real node is Ready."""
        if self.registry is None or self.network is None or not self.real_nodes:
            raise controlplane.StartError("the store runs on a real node: add one first")
        import secrets

        import boto3

        image = addons.system_images(self.plane.binaries, self.registry, s3=s3_binary)["s3"]
        data = self.root / "s3-data"
        data.mkdir(exist_ok=True)
        os.chown(data, addons.STORE_UID, addons.STORE_UID)
        access, secret = "anchorage" + secrets.token_hex(4), secrets.token_urlsafe(24)
        self.plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(addons.store_manifests(image, data, access,
                                                                                                secret)))
        self.plane.kubectl("rollout", "status", "-n", addons.STORE_NAMESPACE, "deployment/s3", f"--timeout={timeout:.0f}s",
                           timeout=timeout + 10)
        first = next(iter(self.real_nodes.values()))
        store = addons.Store(f"http://s3.{addons.STORE_NAMESPACE}.svc.cluster.local:{addons.STORE_PORT}",
                             f"http://{first.ip}:{addons.STORE_NODE_PORT}", bucket, access, secret, data / bucket)
        boto3.client("s3", endpoint_url=store.host_endpoint, aws_access_key_id=access, aws_secret_access_key=secret,
                     region_name="us-east-1").create_bucket(Bucket=bucket)
        return store

    def add_real_node(self, name: str, *, labels: dict[str, str] | None = None, timeout: float = 240) -> realnode.RealNode:
        """Join a real node (``realnode``) and wait until it is Ready, then remove from its image store (kept in the
        cache across clusters) every image but the system ones and :attr:`session_images`: a node holds at most one
        session's images. The first node also brings the system images (pause, CoreDNS) and the cluster's add-ons
        (``addons.manifests``)."""
        if self.network is None or self.registry is None:
            raise controlplane.StartError("real nodes need a cluster started with real_nodes=True")
        if not self.system_images:
            self.system_images = addons.system_images(self.plane.binaries, self.registry)
            self.plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(
                addons.manifests(self.system_images["coredns"])))
        node = realnode.RealNode(name, len(self.real_nodes) + 1, self.network, self.plane.binaries,
                                 self.root / "logs", labels=dict(labels or {}))
        self.real_nodes[name] = node
        node.start(node.prepare(self.plane, registry=self.registry.address, pause_image=self.system_images["pause"]))
        node.wait_ready(self.plane, timeout)
        node.prune_images(set(self.system_images.values()) | self.session_images)
        return node

    def start_simulated_node(self, name: str, *, simulate: str, capacity: dict[str, str] | None = None,
                             env: dict[str, str] | None = None, taint: str | None = None,
                             timeout: float = 60) -> subprocess.Popen[bytes]:
        """Start a simulated node (``simulatednode``: ``simulate`` is ``MODULE:FUNCTION``; ``env`` its process's extra
        environment, e.g. the store's endpoint as seen from this machine), wait until its Node is Ready, and give it
        the NoSchedule ``taint`` (``key``) so only pods that tolerate it land there."""
        argv = [sys.executable, "-m", "anchorage_devcluster.simulatednode", "--kubeconfig",
                str(self.plane.node_kubeconfig(name)), "--name", name, "--workdir", str(self.root / "nodes" / name),
                "--simulate", simulate]
        argv += [item for key, value in (capacity or {}).items() for item in ("--capacity", f"{key}={value}")]
        (self.root / "logs").mkdir(exist_ok=True)
        with (self.root / "logs" / f"node-{name}.log").open("ab") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **(env or {})}, start_new_session=True,
                                    preexec_fn=die_with_parent)
        self.nodes[name] = proc
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = self.plane.kubectl("get", "node", name, "-o",
                                       "jsonpath={.status.conditions[?(@.type=='Ready')].status}", check=False)
            if ready.stdout.strip() == "True":
                if taint:
                    self.plane.kubectl("taint", "node", name, f"{taint}=true:NoSchedule", "--overwrite")
                return proc
            if proc.poll() is not None:
                break
            time.sleep(0.5)
        raise controlplane.StartError(f"simulated node {name} did not become Ready:\n"
                                      f"{(self.root / 'logs' / f'node-{name}.log').read_text()[-3000:]}")

    def stop_node(self, name: str, *, delete: bool = True) -> None:
        """Stop a simulated node and, with ``delete``, remove its Node."""
        proc = self.nodes.pop(name, None)
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        if delete:
            self.plane.kubectl("delete", "node", name, "--wait=false", check=False)

    def operator_kubeconfig(self, path: Path, *, namespace: str = "anchorage",
                            service_account: str = "anchorage-operator") -> Path:
        """A kubeconfig with a token of the chart's operator ServiceAccount (after :func:`install_chart`)."""
        return self.plane.service_account_kubeconfig(namespace, service_account, path)

    def stop(self) -> None:
        for name in list(self.nodes):
            self.stop_node(name, delete=False)
        for node in list(self.real_nodes.values()):
            with contextlib.suppress(Exception):
                node.stop()
        self.real_nodes.clear()
        if self.registry is not None:
            self.registry.stop()
        self.plane.stop()
        if self.network is not None:
            self.network.release()


def start(root: Path, binaries: Binaries, *, timeout: float = 180, audit_users: tuple[str, ...] = (),
          audit_groups: tuple[str, ...] = (), throughput: controlplane.Throughput = controlplane.Throughput(),
          real_nodes: bool = False) -> LocalCluster:
    """Start the control plane under ``root`` (add nodes with :meth:`LocalCluster.add_real_node` — with
    ``real_nodes`` — or :meth:`LocalCluster.start_simulated_node`); the requests of ``audit_users`` and members of
    ``audit_groups`` go to its audit log; ``throughput``: the controllers' and the scheduler's rates
    (:class:`controlplane.Throughput`)."""
    network = Network.acquire() if real_nodes else None
    try:
        address = network.slot.host_ip if network is not None else "127.0.0.1"
        plane = controlplane.start(root, binaries, timeout=timeout, audit_users=audit_users,
                                   audit_groups=audit_groups, throughput=throughput, address=address)
        local = LocalCluster(plane, network=network)
        if network is not None:
            try:
                local.registry = addons.Registry.start(binaries, address, root)
            except BaseException:
                plane.stop()
                raise
    except BaseException:
        if network is not None:
            network.release()
        raise
    return local


@contextlib.contextmanager
def running(root: Path, binaries: Binaries) -> Iterator[LocalCluster]:
    cluster = start(root, binaries)
    try:
        yield cluster
    finally:
        cluster.stop()


def apply_crds(cluster: LocalCluster, crds_dir: Path) -> None:
    """``kubectl apply`` Anchorage's CRDs (and kopf's peering CRD) and wait until they are Established."""
    cluster.plane.kubectl("apply", "-f", str(crds_dir))
    if (crds_dir / "peering").is_dir():
        cluster.plane.kubectl("apply", "-f", str(crds_dir / "peering"))
    cluster.plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")


def install_chart(cluster: LocalCluster, chart: Path, *, release: str = "anchorage", namespace: str = "anchorage",
                  values: dict[str, Any] | None = None) -> dict[str, Any]:
    """``helm install`` the chart as the admin through the Helm library (helm-sdkpy); returns the release."""
    import helm_sdkpy  # a dev dependency: pip install --ignore-requires-python helm-sdkpy

    cluster.plane.kubectl("create", "namespace", namespace, check=False)
    merged = values or {}
    config = helm_sdkpy.Configuration(namespace=namespace, kubeconfig=str(cluster.plane.admin_kubeconfig))
    result: dict[str, Any] = asyncio.run(helm_sdkpy.Install(config).run(release, str(chart), values=merged,
                                                                         wait=False, timeout=120))
    return result


#: The Secret holding the store's credentials in a release's namespace (the chart's ``store.credentialsSecret``).
STORE_SECRET = "anchorage-store-credentials"


def bring_up(root: Path, binaries: Binaries, *, images: dict[str, str], nodes: tuple[str, ...], s3_binary: Path,
             labels: dict[str, str] | None = None, audit_groups: tuple[str, ...] = ()
             ) -> tuple[LocalCluster, dict[str, str], addons.Store]:
    """A cluster as a managed one is: the control plane, the registry with Anchorage's ``images`` (local name by
    ``images/`` folder) pushed to it, real ``nodes`` (Ready; each keeps of its cached image store only these images,
    the store's and the system ones) and the S3 store as a pod; the cluster, the images' references by folder, the
    store. Stopped again when anything fails."""
    local = start(root, binaries, real_nodes=True, audit_groups=audit_groups)
    try:
        assert local.registry is not None
        pushed = {name: local.registry.push(tag, f"anchorage/{name}", tag.rpartition(":")[2])
                  for name, tag in images.items()}
        local.session_images = {*pushed.values(), addons.system_images(binaries, local.registry, s3=s3_binary)["s3"]}
        for name in nodes:
            local.add_real_node(name, labels=labels)
        store = local.start_store(s3_binary)
    except BaseException:
        local.stop()
        raise
    return local, pushed, store


def release_values(images: dict[str, str], store: addons.Store, trials_namespace: str) -> dict[str, Any]:
    """The chart's values as a user sets them for a cluster whose registry holds ``images`` and whose store is
    ``store``: the images by reference, the store (its credentials in :data:`STORE_SECRET`, the trials' egress to its
    pods). Nothing of the checkout reaches the pods."""

    def image(reference: str) -> dict[str, str]:
        repository, _, tag = reference.rpartition(":")
        return {"repository": repository, "tag": tag}

    return {"image": {**image(images["operator"]), "pullPolicy": "IfNotPresent"},
            "tasks": {"image": image(images["tasks"])},
            "store": {"uri": store.uri, "endpointUrl": store.endpoint, "credentialsSecret": STORE_SECRET,
                      "region": "us-east-1"},
            # a trial reserves half its CPUs: a task's 2 CPUs then fit a two-core development node
            "trials": {"namespace": trials_namespace, "networkPolicies": {"storeEgress": store.egress()},
                       "cpuRequestRatio": 0.5},
            "operator": {"agentImage": image(images["agent-base"]), "verifierImage": image(images["verifier"])}}


def store_secret(local: LocalCluster, store: addons.Store, *namespaces: str) -> None:
    """The store's credentials as :data:`STORE_SECRET` in each of ``namespaces`` (created if absent): the release's
    (the operator reads the store), before the chart is installed, and the trials' (the upload sidecars and
    verifiers write it), after (the chart makes that namespace)."""
    for namespace in namespaces:
        local.plane.kubectl("create", "namespace", namespace, check=False)
        local.plane.kubectl("create", "secret", "generic", STORE_SECRET, "-n", namespace,
                            f"--from-literal=AWS_ACCESS_KEY_ID={store.access_key}",
                            f"--from-literal=AWS_SECRET_ACCESS_KEY={store.secret_key}", check=False)


def merge_values(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Helm values: ``extra`` merged into ``base`` (nested mappings merge, anything else replaces)."""
    out = dict(base)
    for key, value in extra.items():
        out[key] = merge_values(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
