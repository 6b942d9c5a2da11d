"""A permissive in-memory Kubernetes API on loopback that records what a client creates.

Used by ``tests/charts`` to render the chart with the Helm library: helm-sdkpy exposes ``install`` but no
``template``, so the chart is installed into this fake (no waiting) and the objects Helm sent are the
rendered manifests. The fake serves discovery for the built-in kinds the chart may create and, as an API
server does once a CRD is established, for the kinds of the CRDs created in it (so a custom resource whose
CRD comes in the same manifest fails as it would on a cluster); it answers 404 to reads of unknown objects,
stores creates and updates, and validates nothing itself: the tests validate the recorded objects with
``kubernetes-validate``.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

import yaml

# group, version, plural, kind, namespaced
KINDS: list[tuple[str, str, str, str, bool]] = [
    ("", "v1", "namespaces", "Namespace", False),
    ("", "v1", "secrets", "Secret", True),
    ("", "v1", "configmaps", "ConfigMap", True),
    ("", "v1", "services", "Service", True),
    ("", "v1", "serviceaccounts", "ServiceAccount", True),
    ("", "v1", "pods", "Pod", True),
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    ("apps", "v1", "deployments", "Deployment", True),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False),
    ("monitoring.coreos.com", "v1", "servicemonitors", "ServiceMonitor", True),
    ("monitoring.coreos.com", "v1", "podmonitors", "PodMonitor", True),
    ("monitoring.coreos.com", "v1", "prometheusrules", "PrometheusRule", True),
    # Kueue's (installed before the chart, as the chart's kueue.* values require)
    ("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", False),
    ("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", False),
    ("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue", True),
    ("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", "WorkloadPriorityClass", False),
]
PATH = re.compile(r"^/(?:api/(?P<cv>v1)|apis/(?P<g>[^/]+)/(?P<v>[^/]+))"
                  r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?$")


@dataclass
class Store:
    """Objects by (plural, namespace, name), in creation order."""

    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    absent: frozenset[str] = frozenset()  # API groups this cluster does not serve (e.g. monitoring.coreos.com)

    def created(self) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(o) for o in self.objects.values()]

    def kinds(self) -> list[tuple[str, str, str, str, bool]]:
        """The built-in :data:`KINDS` and those of the stored CRDs (their served versions)."""
        with self.lock:
            crds = [o for (plural, _, _), o in self.objects.items() if plural == "customresourcedefinitions"]
        served = [k for k in KINDS if k[0] not in self.absent]
        return served + [(crd["spec"]["group"], version["name"], crd["spec"]["names"]["plural"],
                          crd["spec"]["names"]["kind"], crd["spec"]["scope"] == "Namespaced")
                         for crd in crds for version in crd["spec"]["versions"] if version.get("served")]


def _discovery(path: str, kinds: list[tuple[str, str, str, str, bool]]) -> Any:
    if path == "/version":
        return {"major": "1", "minor": "31", "gitVersion": "v1.31.0", "platform": "linux/amd64"}
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    groups = sorted({(g, v) for g, v, *_ in kinds if g})
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
             "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v}} for g, v in groups]}
    for g, v in [("", "v1"), *groups]:
        gv = f"{g}/{v}" if g else v
        if path == ("/api/v1" if not g else f"/apis/{g}/{v}"):
            return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": [
                {"name": plural, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind,
                 "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}
                for gg, vv, plural, kind, namespaced in kinds if (gg, vv) == (g, v)]}
    return None


def _handler(store: Store) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _not_found(self, what: str) -> None:
            self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                             "code": 404, "message": f"{what} not found"})

        def _body(self) -> dict[str, Any]:
            """The request's object. Typed clients (Helm's release storage) send protobuf: those bodies are
            kept as an opaque object named after the Helm release secret they carry."""
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) or b"{}"
            if "protobuf" in (self.headers.get("Content-Type") or ""):
                name = re.search(rb"sh\.helm\.release\.v1\.[a-z0-9.-]+", raw)
                return {"apiVersion": "v1", "kind": "Secret", "metadata": {
                    "name": name.group().decode() if name else "opaque"}, "opaque": True}
            body: dict[str, Any] = json.loads(raw)
            return body

        def do_GET(self) -> None:
            path = urlparse(self.path).path
            found = _discovery(path, store.kinds())
            if found is not None:
                return self._send(200, found)
            match = PATH.match(path)
            if match is None:
                return self._not_found(path)
            plural, ns, name = match["plural"], match["ns"] or "", match["name"]
            with store.lock:
                if name is None:
                    items = [o for (p, n, _), o in store.objects.items() if p == plural and (not ns or n == ns)]
                    return self._send(200, {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": items})
                obj = store.objects.get((plural, ns, name))
            return self._send(200, obj) if obj is not None else self._not_found(f"{plural}/{name}")

        def do_POST(self) -> None:
            match = PATH.match(urlparse(self.path).path)
            if match is None:
                return self._not_found(self.path)
            body = self._body()
            meta = body.setdefault("metadata", {})
            key = (match["plural"], match["ns"] or "", meta["name"])
            meta.setdefault("resourceVersion", "1")
            meta.setdefault("uid", f"uid-{len(store.objects)}")
            if match["plural"] == "customresourcedefinitions":  # established at once (Helm waits for it)
                body["status"] = {"acceptedNames": body["spec"]["names"], "conditions": [
                    {"type": t, "status": "True"} for t in ("NamesAccepted", "Established")]}
            with store.lock:
                store.objects[key] = body
            self._send(201, body)

        def do_PUT(self) -> None:
            match = PATH.match(urlparse(self.path).path)
            if match is None or match["name"] is None:
                return self._not_found(self.path)
            body = self._body()
            with store.lock:
                store.objects[(match["plural"], match["ns"] or "", match["name"])] = body
            self._send(200, body)

        def do_PATCH(self) -> None:
            match = PATH.match(urlparse(self.path).path)
            key = (match["plural"], match["ns"] or "", match["name"] or "") if match else ("", "", "")
            with store.lock:
                obj = store.objects.get(key)
            self._body()
            return self._send(200, obj) if obj is not None else self._not_found(self.path)

        def do_DELETE(self) -> None:
            match = PATH.match(urlparse(self.path).path)
            key = (match["plural"], match["ns"] or "", match["name"] or "") if match else ("", "", "")
            with store.lock:
                obj = store.objects.pop(key, None)
            return self._send(200, obj) if obj is not None else self._not_found(self.path)

    return Handler


class FakeApi:
    """The fake on 127.0.0.1 (``url``), serving from a background thread until :meth:`stop`."""

    def __init__(self, absent: tuple[str, ...] = ()) -> None:
        """``absent``: API groups the fake does not serve (as a cluster without their CRDs)."""
        self.store = Store(absent=frozenset(absent))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.store))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="fake-kube-api", daemon=True)
        self.thread.start()

    def kubeconfig(self, namespace: str) -> str:
        """A kubeconfig (YAML text: helm-sdkpy takes YAML text or a path) pointing at the fake."""
        return yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake"}}],
            "contexts": [{"name": "fake",
                          "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}],
        }, sort_keys=False)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
