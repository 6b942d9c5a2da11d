"""What a cluster has beside its nodes: an image registry, cluster DNS, and the NetworkPolicy engine's rights.

Used by ``cluster`` when real nodes join (``LocalCluster.start_real_nodes``):

* :class:`Registry` — CNCF Distribution (``tools/kube/registry``) on the host's bridge address, port 5000, plain HTTP,
  its storage in the cache (``<cache>/registry-data``), so an image pushed once is there for every later cluster.
  The nodes' containerd pulls from it, as a managed cluster's nodes pull from theirs; :func:`push` puts a locally
  built image there with buildah (the storage ``tools/images.py`` builds into).
* :func:`system_images` — the two images of the node's own making, each a single static binary on ``scratch``: the
  pod sandbox's ``pause`` and CoreDNS (``tools/kube/coredns``), tagged by the binary's hash.
* :func:`manifests` — CoreDNS (Deployment, Service ``kube-dns`` at ``10.96.0.10``, its RBAC; it answers for
  ``cluster.local`` only and forwards nothing) and the ClusterRole kube-router's firewall controller runs with
  (user ``system:kube-router``: it reads pods, namespaces, nodes and NetworkPolicies).
* :func:`store_manifests` — the artifact store a managed cluster would have in its cloud: the project's real S3
  server (versitygw, ``anchorage_devcluster.s3server``) as a pod in namespace ``anchorage-store``, its data in a host
  folder (so the tests read what the pods stored), Service ``s3`` (ClusterIP for the pods, a NodePort on every node for
  the host's own clients) and the root credentials in a Secret.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from anchorage_devcluster.binaries import Binaries, cache_root
from anchorage_devcluster.lifetimes import die_with_parent
from anchorage_devcluster.network import CLUSTER_DNS

REGISTRY_PORT = 5000
DNS_PORT = 53  # in the pod too, as in every cluster: NetworkPolicies name the pod's port (53), not the Service's
STORE_NAMESPACE = "anchorage-store"
STORE_PORT = 7070
STORE_NODE_PORT = 30070
STORE_LABELS = {"app.kubernetes.io/name": "anchorage-s3"}
STORE_HEALTH = "/_anchorage_health"
STORE_UID = 65532


def buildah(*args: str, timeout: float = 1800) -> str:
    """buildah on the image storage of ``tools/images.py`` (vfs under ``<cache>/images``)."""
    root = cache_root() / "images"
    argv = ["buildah", "--root", str(root / "storage"), "--runroot", str(root / "run"), "--storage-driver", "vfs",
            *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {(done.stdout + done.stderr).strip()[-2000:]}")
    return done.stdout


@dataclass
class Registry:
    """A running registry (see the module docstring)."""

    address: str  # host:port
    proc: subprocess.Popen[bytes]

    @classmethod
    def start(cls, binaries: Binaries, host: str, root: Path, *, port: int = REGISTRY_PORT,
              htpasswd: Path | None = None, name: str = "registry") -> Registry:
        """Start it on ``host:port``; with ``htpasswd`` (lines of :func:`htpasswd_line`) every request needs one of
        its users' credentials (HTTP basic), as a private registry does. All share the storage in the cache, so an
        image pushed to one is there in every one (a push elsewhere then uploads no layer)."""
        data = cache_root() / "registry-data"
        data.mkdir(parents=True, exist_ok=True)
        address = f"{host}:{port}"
        config = root / f"{name}.yaml"
        settings: dict[str, Any] = {
            "version": 0.1, "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(data)}, "delete": {"enabled": True}},
            "http": {"addr": address, "secret": secrets.token_hex(16)}}
        if htpasswd is not None:
            settings["auth"] = {"htpasswd": {"realm": "anchorage-dev-cluster", "path": str(htpasswd)}}
        config.write_text(yaml.safe_dump(settings))
        (root / "logs").mkdir(exist_ok=True)
        with (root / "logs" / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen([str(binaries.registry), "serve", str(config)], stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                    preexec_fn=die_with_parent)
        registry = cls(address, proc)
        deadline = time.monotonic() + 30
        while not registry.answers():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the registry did not start on {address}:\n"
                                   f"{(root / 'logs' / f'{name}.log').read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
        return registry

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.address}/v2/", timeout=2) as response:
                return bool(response.status == 200)
        except urllib.error.HTTPError as exc:
            return exc.code == 401  # it answers, and asks for credentials
        except (urllib.error.URLError, OSError):
            return False

    def has(self, repository: str, tag: str) -> bool:
        request = urllib.request.Request(f"http://{self.address}/v2/{repository}/manifests/{tag}", method="HEAD",
                                         headers={"Accept": "application/vnd.oci.image.manifest.v1+json, "
                                                            "application/vnd.docker.distribution.manifest.v2+json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def push(self, local: str, repository: str, tag: str) -> str:
        """Push the locally built image ``local`` as ``<registry>/<repository>:<tag>`` (skipped when the registry has
        it already: tags here are content hashes); the reference pods use."""
        reference = f"{self.address}/{repository}:{tag}"
        if not self.has(repository, tag):
            # layers uncompressed: the nodes are on this machine, so gzip would cost CPU and save nothing
            buildah("push", "--tls-verify=false", "--disable-compression", "--format", "oci", local,
                    f"docker://{reference}")
        return reference

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def htpasswd_line(binaries: Binaries, user: str, password: str) -> str:
    """``user``'s line of an htpasswd file (bcrypt, made by the registry binary itself: ``registry htpasswd``)."""
    done = subprocess.run([str(binaries.registry), "htpasswd", user], input=password, capture_output=True, text=True,
                          timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"registry htpasswd failed: {done.stderr.strip()[-500:]}")
    return done.stdout.strip()


def binary_image(name: str, binary: Path, entrypoint: list[str], user: str, *, path: str | None = None) -> str:
    """A local image of ``binary`` alone on scratch (``localhost/anchorage/<name>:<hash>``) at ``path`` (default:
    ``/<its file name>``), built once."""
    path = path or f"/{binary.name}"
    digest = hashlib.sha256(binary.read_bytes() + json.dumps([entrypoint, user, path]).encode()).hexdigest()[:12]
    local = f"localhost/anchorage/{name}:{digest}"
    listed = json.loads(buildah("images", "--json") or "[]")
    if any(local in (image.get("names") or []) for image in listed):
        return local
    container = buildah("from", "scratch").strip()
    try:
        buildah("copy", "--chmod", "0755", container, str(binary), path)
        buildah("config", "--entrypoint", json.dumps(entrypoint), "--user", user, "--label",
                f"org.opencontainers.image.title=anchorage-{name}", container)
        buildah("commit", "--rm", container, local)
    except BaseException:
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False)
        raise
    return local


def system_images(binaries: Binaries, registry: Registry, s3: Path | None = None) -> dict[str, str]:
    """The pause and CoreDNS images (and the S3 server's, given its binary ``s3``), built once and pushed; their
    references by name."""
    found = {}
    programs = [("pause", binaries.pause, ["/pause"]), ("coredns", binaries.coredns, ["/coredns"])]
    programs += [("s3", s3, ["/versitygw"])] if s3 is not None else []
    for name, binary, entrypoint in programs:
        local = binary_image(name, binary, entrypoint, "65532:65532")
        found[name] = registry.push(local, f"anchorage/{name}", local.rpartition(":")[2])
    return found


COREFILE = f""".:{DNS_PORT} {{
    errors
    health :8080
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 30
    loadbalance
}}
"""


def manifests(coredns_image: str) -> list[dict[str, Any]]:
    """CoreDNS and kube-router's RBAC (see the module docstring)."""
    labels = {"k8s-app": "kube-dns"}
    restricted = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                  "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    probe = {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 2}
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "kube-router"},
         "rules": [{"apiGroups": [""], "resources": ["pods", "namespaces", "nodes", "services", "endpoints"],
                    "verbs": ["get", "list", "watch"]},
                   {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
                    "verbs": ["get", "list", "watch"]},
                   {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                    "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "kube-router"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kube-router"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-router"}]},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", "namespace": "kube-system"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "system:coredns"},
         "rules": [{"apiGroups": [""], "resources": ["services", "pods", "namespaces"], "verbs": ["list", "watch"]},
                   {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "system:coredns"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
         "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "coredns", "namespace": "kube-system"},
         "data": {"Corefile": COREFILE}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "coredns", "namespace": "kube-system", "labels": labels},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
             "metadata": {"labels": labels},
             "spec": {"serviceAccountName": "coredns", "priorityClassName": "system-cluster-critical",
                      # port 53 without root or a capability: a safe sysctl of the pod's own network namespace
                      "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                          "seccompProfile": {"type": "RuntimeDefault"},
                                          "sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]},
                      "containers": [{
                          "name": "coredns", "image": coredns_image, "imagePullPolicy": "IfNotPresent",
                          "args": ["-conf", "/etc/coredns/Corefile"],
                          "securityContext": restricted,
                          "ports": [{"name": "dns", "containerPort": DNS_PORT, "protocol": "UDP"},
                                    {"name": "dns-tcp", "containerPort": DNS_PORT, "protocol": "TCP"}],
                          "readinessProbe": probe,
                          "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                                        "limits": {"memory": "170Mi"}},
                          "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": True}]}],
                      "volumes": [{"name": "config", "configMap": {"name": "coredns"}}]}}}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": labels},
         "spec": {"clusterIP": CLUSTER_DNS, "selector": labels, "ports": [
             {"name": "dns", "port": 53, "targetPort": DNS_PORT, "protocol": "UDP"},
             {"name": "dns-tcp", "port": 53, "targetPort": DNS_PORT, "protocol": "TCP"}]}},
    ]


@dataclass(frozen=True)
class Store:
    """The dev cluster's S3 endpoint: for the pods (the Service's name), for this machine (a node's NodePort), the
    bucket the runs go to, its root credentials and the host folder behind the bucket."""

    endpoint: str
    host_endpoint: str
    bucket: str
    access_key: str
    secret_key: str
    folder: Path

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}"

    def env(self) -> dict[str, str]:
        """The AWS_* variables of a client on this machine."""
        return {"AWS_ENDPOINT_URL": self.host_endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_DEFAULT_REGION": "us-east-1"}

    def egress(self) -> list[dict[str, Any]]:
        """The NetworkPolicy egress rule that lets a pod reach this store (the chart's ``store.egress``)."""
        return [{"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": STORE_NAMESPACE}},
                         "podSelector": {"matchLabels": dict(STORE_LABELS)}}],
                 "ports": [{"protocol": "TCP", "port": STORE_PORT}]}]


def store_manifests(image: str, data: Path, access_key: str, secret_key: str) -> list[dict[str, Any]]:
    """The S3 server's namespace, Secret, Deployment and Service (see the module docstring); ``data`` must exist and
    belong to :data:`STORE_UID`, the server's user."""
    restricted = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                  "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    meta = {"namespace": STORE_NAMESPACE, "labels": dict(STORE_LABELS)}
    return [
        # the host folder needs a hostPath volume, which only the privileged Pod Security level allows
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": STORE_NAMESPACE, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-root", **meta},
         "stringData": {"ROOT_ACCESS_KEY": access_key, "ROOT_SECRET_KEY": secret_key}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "s3", **meta},
         "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": dict(STORE_LABELS)},
                  "template": {"metadata": {"labels": dict(STORE_LABELS)}, "spec": {
                      "automountServiceAccountToken": False,
                      "securityContext": {"runAsUser": STORE_UID, "runAsGroup": STORE_UID,
                                          "seccompProfile": {"type": "RuntimeDefault"}},
                      "containers": [{
                          "name": "s3", "image": image, "imagePullPolicy": "IfNotPresent",
                          "args": ["--port", f":{STORE_PORT}", "--health", STORE_HEALTH, "--quiet", "posix", "/data"],
                          "envFrom": [{"secretRef": {"name": "s3-root"}}],
                          "securityContext": restricted,
                          "ports": [{"name": "s3", "containerPort": STORE_PORT}],
                          "readinessProbe": {"httpGet": {"path": STORE_HEALTH, "port": STORE_PORT},
                                             "periodSeconds": 2},
                          "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}},
                          "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                      "volumes": [{"name": "data", "hostPath": {"path": str(data), "type": "Directory"}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s3", **meta},
         "spec": {"type": "NodePort", "selector": dict(STORE_LABELS), "ports": [
             {"name": "s3", "port": STORE_PORT, "targetPort": STORE_PORT, "nodePort": STORE_NODE_PORT}]}},
    ]
