"""The real cluster for the tests: one per session, started the first time a test asks for it.

Loaded from ``tests/conftest.py`` (``pytest_plugins``). ``real_cluster`` starts the pinned Kubernetes control
plane that ``make kube`` builds (``anchorage_devcluster``: etcd, kube-apiserver with TLS, RBAC and Node
authorizers, PodSecurity, controller manager, scheduler) on a bridge of its own, a registry, two **real nodes**
(``node-1``, ``node-2``: kubelet, containerd + runc, CNI, kube-proxy, kube-router as the NetworkPolicy engine,
CoreDNS) and ``simulated-1``, the node agent in simulate mode (pods write what Anchorage's pod programs would,
``simulated_pods``; tainted, so only the load tests' namespaces reach it). Anchorage's images (agent, verifier,
operator, task bundle: ``anchorage.images``, cached by content) are pushed to the registry and pulled by the nodes;
the artifact store is the project's real S3 server running as a pod (``addons.store_manifests``). The chart is
installed as a user installs it (release ``anchorage`` in namespace ``anchorage``, trials namespace
``anchorage-trials`` enforcing PodSecurity ``restricted``): its operator and gateway run as pods from their
images. Releases whose trials go to the simulated node (:meth:`RealCluster.install` with ``simulated``) are
installed the same way (their operator a pod on a real node, the same store), only their trials namespace pinned to
that node; the simulated pods write to the store from this machine. Without the binaries every test using it
skips with the reason (``make kube`` builds them; ``make test`` does that first).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
REAL_NODES = ("node-1", "node-2")
REAL_NODE_LABEL = "anchorage.dev/node"
REAL_SELECTOR = f"{REAL_NODE_LABEL}=real"
SIMULATED_NODES = "anchorage.dev/node-agent=simulated"
SIMULATED_TAINT = "anchorage.dev/simulated"
#: The images the real nodes pull, by the name of their folder under images/.
IMAGES = ("agent-base", "verifier", "operator", "tasks")
RELEASE, OPERATOR_NAMESPACE, TRIALS_NAMESPACE = "anchorage", "anchorage", "anchorage-trials"
#: Namespaces of two teams whose campaigns the session release serves too (``operator.watchNamespaces``).
TEAM_NAMESPACES = ("team-a", "team-b")
#: Kueue's Admission Fair Sharing as the session's Kueue runs it: usage sampled every second, halved every 10 minutes
#: (a test's campaigns last two or three minutes, so what a team used early still counts when its last trials wait;
#: with a half-life as short as one round of trials, the teams take turns whatever their weights).
KUEUE_FAIR_SHARING = {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1s"}
#: Namespaces of the chart's releases whose ServiceAccounts' requests the API server's audit log records
#: (``RealCluster.audited``): the session's release, and the simulated-node one of ``tests/kube/test_real_operator.py``.
AUDITED_NAMESPACES = (OPERATOR_NAMESPACE, "crash")


def _readable_kinds() -> dict[str, tuple[str, str, bool]]:
    """kubectl's names of the kinds :meth:`RealCluster.get` reads in-process → (API path, plural, namespaced): the
    built-in kinds the tests poll, and Anchorage's own (their plural, kind and short name, as their CRDs declare)."""
    from anchorage.manifests import API_GROUP, API_VERSION, PLURALS, SHORT_NAMES

    built_in = {("pods", "pod"): ("/api/v1", True), ("namespaces", "namespace", "ns"): ("/api/v1", False),
                ("nodes", "node"): ("/api/v1", False), ("events", "event"): ("/api/v1", True),
                ("jobs", "job"): ("/apis/batch/v1", True), ("deployments", "deployment"): ("/apis/apps/v1", True),
                ("networkpolicies", "networkpolicy"): ("/apis/networking.k8s.io/v1", True)}
    for kind, plural in PLURALS.items():
        built_in[(plural, kind.lower(), SHORT_NAMES[kind])] = (f"/apis/{API_GROUP}/{API_VERSION}", True)
    return {name: (path, names[0], namespaced) for names, (path, namespaced) in built_in.items() for name in names}


READABLE = _readable_kinds()


@dataclass(frozen=True)
class Query:
    """A ``kubectl get`` that :meth:`RealCluster.get` answers in-process: one kind, one object or a list."""

    kind: str
    name: str | None = None
    namespace: str | None = None
    selector: str | None = None
    field_selector: str | None = None
    all_namespaces: bool = False

    @classmethod
    def parse(cls, args: tuple[str, ...]) -> Query | None:
        """The query of ``kubectl get`` arguments, or None for any it does not take (kubectl answers those)."""
        words: list[str] = []
        options: dict[str, str] = {}
        flags = {"-n": "namespace", "--namespace": "namespace", "-l": "selector", "--selector": "selector",
                 "--field-selector": "field_selector"}
        rest = iter(args)
        all_namespaces = False
        for arg in rest:
            if arg in flags:
                value = next(rest, None)
                if value is None:
                    return None
                options[flags[arg]] = value
            elif arg in ("-A", "--all-namespaces"):
                all_namespaces = True
            elif arg.startswith("-") or "/" in arg or "," in arg:
                return None
            else:
                words.append(arg)
        if not 1 <= len(words) <= 2 or words[0] not in READABLE or (len(words) == 2 and (
                all_namespaces or "selector" in options or "field_selector" in options)):
            return None
        return cls(words[0], words[1] if len(words) == 2 else None, all_namespaces=all_namespaces, **options)

    def path(self) -> str:
        prefix, plural, namespaced = READABLE[self.kind]
        where = f"/namespaces/{self.namespace or 'default'}" if namespaced and not self.all_namespaces else ""
        path = f"{prefix}{where}/{plural}" + (f"/{self.name}" if self.name else "")
        query = {k: v for k, v in (("labelSelector", self.selector), ("fieldSelector", self.field_selector)) if v}
        return path + (f"?{urllib.parse.urlencode(query)}" if query else "")


@dataclass
class Release:
    """An installed release of ``charts/anchorage``: its namespace, trials namespace and operator credentials."""

    name: str
    namespace: str
    trials_namespace: str
    manifest: dict[str, Any]
    operator_kubeconfig: Path

    @property
    def user(self) -> str:
        """The operator's user name as the API server sees it (its ServiceAccount)."""
        return f"system:serviceaccount:{self.namespace}:{operator_account(self.manifest)}"


@dataclass
class RealCluster:
    """The session's control plane, its nodes, the chart's releases and where the store is."""

    local: Any  # anchorage_devcluster.cluster.LocalCluster
    root: Path
    store: Path  # the host folder behind the session release's store (the S3 bucket's folder)
    s3: Any = None  # anchorage_devcluster.addons.Store: the S3 server the session release stores to
    images: dict[str, str] = field(default_factory=dict)  # registry references by images/ folder name
    releases: dict[str, Release] = field(default_factory=dict)
    private: PrivateRegistry | None = None  # the registry that asks for credentials (:meth:`private_registry`)

    @property
    def release(self) -> Release:
        """The session's release ``anchorage`` (namespace ``anchorage``, trials in ``anchorage-trials``)."""
        return self.releases[RELEASE]

    @property
    def registry(self) -> str:
        """The cluster's registry (``host:port``, plain HTTP), which the nodes pull from."""
        return str(self.local.registry.address)

    def private_registry(self) -> PrivateRegistry:
        """A second registry on the bridge that asks for credentials (htpasswd), started once per session and allowed
        on every real node; it shares the first one's storage, so a push to it uploads no layer already pushed."""
        if self.private is None:
            import secrets

            from anchorage_devcluster import addons

            user, password = "puller", secrets.token_urlsafe(12)
            htpasswd = self.root / "private-registry.htpasswd"
            htpasswd.write_text(addons.htpasswd_line(self.local.plane.binaries, user, password) + "\n")
            host = self.registry.rpartition(":")[0]
            registry = addons.Registry.start(self.local.plane.binaries, host, self.root, port=addons.REGISTRY_PORT + 1,
                                             htpasswd=htpasswd, name="private-registry")
            for node in self.local.real_nodes.values():
                node.allow_registry(registry.address)
            self.private = PrivateRegistry(registry, user, password)
        return self.private

    def install(self, name: str, namespace: str, trials_namespace: str, *, simulated: bool = False,
                crds: bool = False, values: dict[str, Any] | None = None, registry_only: bool = False) -> Release:
        """``helm install`` the chart (as the admin, with the Helm library) and mint its operator's token.
        ``registry_only``: no image value but ``global.imageRegistry`` (the cluster's registry): the chart's own
        repositories and tag (its appVersion), as a user installs it after ``anchorage images push``."""
        from anchorage_devcluster import cluster

        # platform failures decided within the tests' patience (the chart's defaults are 600 s and 120 s); the
        # simulated node runs nothing and enforces no NetworkPolicy: nothing for the preflight to confirm there
        trials: dict[str, Any] = {"platformFailures": {"unschedulableSeconds": 45, "containerStartSeconds": 30}}
        if simulated:
            trials["networkPolicies"] = {"requireEnforcement": False}
        else:
            # a lost real node's pods evicted 10 s after the node lifecycle controller marks it (its lease 20 s
            # unrenewed, controlplane), not the chart's 60 s: the same eviction by the taint manager, the same
            # node_lost evidence, sooner (only tests/kube/test_real_node_loss.py loses a node)
            trials["platformFailures"]["nodeLostSeconds"] = 10
        base = cluster.merge_values(cluster.release_values(self.images, self.s3, trials_namespace),
                                    {"operator": {"logFormat": "plain"}, "trials": trials})
        if registry_only:
            base = {key: value for key, value in base.items() if key not in ("image", "tasks")}
            base["operator"] = {"logFormat": "plain"}
            base["global"] = {"imageRegistry": self.registry}
        cluster.store_secret(self.local, self.s3, namespace)
        merged = cluster.merge_values(base, {"crds": {"enabled": crds}, **(values or {})})
        manifest = cluster.install_chart(self.local, REPO / "charts" / "anchorage", release=name, namespace=namespace,
                                         values=merged)
        cluster.store_secret(self.local, self.s3, trials_namespace)
        if simulated:
            self.local.plane.namespace(trials_namespace, pod_security=None, nodes=SIMULATED_NODES,
                                       tolerate=SIMULATED_TAINT)
        else:
            self.local.plane.namespace(trials_namespace, pod_security=None, nodes=REAL_SELECTOR)
        kubeconfig = self.local.operator_kubeconfig(self.root / f"{name}-operator.kubeconfig", namespace=namespace,
                                                    service_account=operator_account(manifest))
        self.releases[name] = Release(name, namespace, trials_namespace, manifest, kubeconfig)
        return self.releases[name]

    @property
    def admin_kubeconfig(self) -> Path:
        return Path(self.local.plane.admin_kubeconfig)

    def env(self, kubeconfig: Path | None = None) -> dict[str, str]:
        """kubectl's environment: this cluster (as the admin unless told), this cluster's kubectl first on PATH."""
        env: dict[str, str] = self.local.plane.env(kubeconfig)
        return env

    def kubectl(self, *args: str, kubeconfig: Path | None = None, stdin: str | None = None,
                check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """This cluster's kubectl; ``timeout`` bounds the process (longer than any ``--timeout=`` it is given)."""
        result: subprocess.CompletedProcess[str] = self.local.plane.kubectl(*args, kubeconfig=kubeconfig, stdin=stdin,
                                                                             check=check, timeout=timeout)
        return result

    def wait_available(self, namespace: str, timeout: float = 300) -> None:
        """Every Deployment of ``namespace`` Available within ``timeout`` s, else an error with the namespace's pods
        and events (what kept them from starting)."""
        done = self.kubectl("wait", "--for=condition=Available", "deployment", "--all", "-n", namespace,
                            f"--timeout={timeout:.0f}s", check=False, timeout=timeout + 30)
        if done.returncode != 0:
            pods = self.kubectl("get", "pods", "-n", namespace, "-o", "wide", check=False).stdout
            events = self.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp", check=False).stdout
            raise AssertionError(f"the Deployments of {namespace} are not Available after {timeout:.0f} s: "
                                 f"{done.stderr.strip()}\n{pods}\n{events[-4000:]}")

    @functools.cached_property
    def api(self) -> Any:
        """An API client of the admin's (``anchorage.controller.kube.Client``: JSON over kept-alive connections)."""
        import kubernetes

        from anchorage.controller.kube import Client

        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=str(self.admin_kubeconfig), client_configuration=configuration)
        return Client(configuration)

    def get(self, *args: str) -> Any:
        """What ``kubectl get ARGS -o json`` prints. The kinds and options the tests poll (:class:`Query`) are read
        in-process, a list as kubectl prints it (a ``List`` whose items carry their kind): a kubectl run costs about
        50 ms of CPU, and the real-cluster tests poll thousands of times a run. Anything else runs kubectl."""
        from anchorage.controller.kube import ApiError

        query = Query.parse(args)
        if query is None:
            return json.loads(self.kubectl("get", *args, "-o", "json").stdout)
        try:
            answer: dict[str, Any] = self.api.request("GET", query.path())
        except ApiError as exc:
            raise RuntimeError(f"kubectl get {' '.join(args)} failed: {exc}") from exc
        if query.name is not None:
            return answer
        kind, version = str(answer.get("kind", "")).removesuffix("List"), answer.get("apiVersion")
        return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                "items": [{"apiVersion": version, "kind": kind, **item} for item in answer.get("items") or []]}

    def status(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        """An object's ``status`` ({} while it has none, or if it does not exist)."""
        from anchorage.controller.kube import ApiError

        query = Query(kind, name, namespace)
        try:
            found: dict[str, Any] = self.api.request("GET", query.path())
        except ApiError as exc:
            if exc.status == 404:
                return {}
            raise
        return dict(found.get("status") or {})

    def namespace(self, name: str, *, simulated: bool = False, pod_security: str | None = "restricted") -> str:
        """A namespace whose pods run on the simulated node (else on the real nodes)."""
        if simulated:
            self.local.plane.namespace(name, pod_security=pod_security, nodes=SIMULATED_NODES, tolerate=SIMULATED_TAINT)
        else:
            self.local.plane.namespace(name, pod_security=pod_security, nodes=REAL_SELECTOR)
        return name

    def s3_env(self) -> dict[str, str]:
        """The AWS_* variables of a client on this machine that reads the session release's store."""
        env: dict[str, str] = self.s3.env()
        return env

    def operator_logs(self, release: str = RELEASE, tail: int = 80) -> str:
        """The last lines of a release's operator pod's log (for failure messages)."""
        installed = self.releases[release]
        deployment = operator_deployment(installed.manifest)["metadata"]["name"]
        out = self.kubectl("logs", "-n", installed.namespace, f"deployment/{deployment}", f"--tail={tail}", check=False)
        return out.stdout + out.stderr

    def operator_pods(self, release: str = RELEASE) -> list[dict[str, Any]]:
        """A release's operator pods (running or terminating)."""
        installed = self.releases[release]
        labels = operator_deployment(installed.manifest)["spec"]["selector"]["matchLabels"]
        selector = ",".join(f"{k}={v}" for k, v in labels.items())
        items: list[dict[str, Any]] = self.get("pods", "-n", installed.namespace, "-l", selector)["items"]
        return items

    def audited(self, release: str) -> list[dict[str, Any]]:
        """The audit log's completed requests of a release's operator (its ServiceAccount), oldest first."""
        user = self.releases[release].user
        path = self.root / "plane" / "audit.log"
        entries = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return [e for e in entries if e.get("stage") == "ResponseComplete" and e["user"]["username"] == user]

    def infrastructure_failures(self, namespace: str) -> list[tuple[str, str, str]]:
        """(name, reason, message) of every Trial of ``namespace`` that ended as an infrastructure failure (for an
        assertion's message: which one, and what the operator said of it)."""
        return [(t["metadata"]["name"], t["status"].get("reason", ""), t["status"].get("message", ""))
                for t in self.get("trials", "-n", namespace)["items"]
                if (t.get("status") or {}).get("phase") == "InfrastructureFailed"]

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str, release: str = RELEASE) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(1)
        tail = self.operator_logs(release) if release in self.releases else ""
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{tail}\n{self.node_log()[-2000:]}")

    def node_log(self, node: str = REAL_NODES[0]) -> str:
        """The tails of a node's programs' logs (a real node's kubelet, runtime, ...; the simulated node's agent)."""
        real = self.local.real_nodes.get(node)
        if real is not None:
            return str(real.log_tails())
        path = self.root / "plane" / "logs" / f"node-{node}.log"
        return path.read_text(errors="replace") if path.exists() else ""


@dataclass
class PrivateRegistry:
    """A registry that asks for credentials: where it is and its one user's."""

    registry: Any  # anchorage_devcluster.addons.Registry
    user: str
    password: str

    @property
    def address(self) -> str:
        return str(self.registry.address)

    def auth_file(self, path: Path) -> Path:
        """A Docker config.json with the user's credentials (``buildah push --authfile``, a pull Secret's content)."""
        import base64

        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        path.write_text(json.dumps({"auths": {self.address: {"auth": token}}}))
        return path


def operator_deployment(manifest: dict[str, Any]) -> dict[str, Any]:
    """The operator's Deployment among an installed release's rendered objects."""
    docs = [d for d in yaml.safe_load_all(manifest["manifest"]) if d]
    found: dict[str, Any] = next(d for d in docs if d["kind"] == "Deployment"
                                 and d["metadata"]["name"].endswith("-operator"))
    return found


def operator_account(manifest: dict[str, Any]) -> str:
    """The operator's ServiceAccount in an installed release, as its Deployment names it (whatever the chart's
    naming of releases, ``fullnameOverride`` or ``operator.serviceAccount.name`` make of it)."""
    return str(operator_deployment(manifest)["spec"]["template"]["spec"]["serviceAccountName"])


def kubectl_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the pinned kubectl (``make kube``) first on PATH, so the fake's tests use it too."""
    from anchorage_devcluster import binaries

    return {**env, "PATH": f"{binaries.kube_dir()}{os.pathsep}{env.get('PATH', '')}"}


@pytest.fixture(scope="session")
def cluster_images() -> dict[str, str]:
    """Anchorage's images built here (``anchorage.images``: buildah on a debootstrap base, cached by content): their
    local names by folder."""
    import imagetool

    tool = imagetool.ready()
    base = tool.build_base()
    built: dict[str, str] = {}
    for name in IMAGES:
        tool.build_image(name, base, {}, built)
    return {name: built[name] for name in IMAGES}


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory, cluster_images: dict[str, str]) -> Iterator[RealCluster]:
    """The control plane with two real nodes and a simulated node, the images in its registry, the store as a pod and
    the chart installed (see above)."""
    from anchorage_devcluster import binaries, cluster, realnode, s3server

    found = binaries.find()
    if isinstance(found, str):
        pytest.skip(found)
    s3_binary = s3server.find()
    for reason in (realnode.missing_requirements(), s3_binary if isinstance(s3_binary, str) else None):
        if reason:
            pytest.skip(reason)
    pytest.importorskip("helm_sdkpy", reason="helm-sdkpy is not installed (pip install --ignore-requires-python "
                        "helm-sdkpy): the chart is installed with it")
    root = tmp_path_factory.mktemp("real-cluster")
    local, images, s3 = cluster.bring_up(root / "plane", found, images=cluster_images, nodes=REAL_NODES,
                                         labels={REAL_NODE_LABEL: "real"}, s3_binary=Path(s3_binary),
                                         audit_groups=tuple(f"system:serviceaccounts:{namespace}"
                                                            for namespace in AUDITED_NAMESPACES))
    real: RealCluster | None = None
    try:
        # the simulated pods write to the store from this machine: its endpoint as seen from here
        local.start_simulated_node("simulated-1", simulate="simulated_pods:anchorage_pod", taint=SIMULATED_TAINT,
                                   capacity={"pods": "5000", "cpu": "100000", "memory": "1000Ti",
                                             "ephemeral-storage": "1000Ti"},
                                   env={**s3.env(), "PYTHONPATH": os.pathsep.join(
                                       p for p in (str(REPO / "tests"), os.environ.get("PYTHONPATH", "")) if p)})
        real = RealCluster(local, root, s3.folder, s3, images)
        for team in TEAM_NAMESPACES:
            local.plane.namespace(team, pod_security="restricted")
        real.install(RELEASE, OPERATOR_NAMESPACE, TRIALS_NAMESPACE, crds=True,
                     values={"operator": {"watchNamespaces": [OPERATOR_NAMESPACE, *TEAM_NAMESPACES]}})
        real.wait_available(OPERATOR_NAMESPACE)
        yield real
    finally:
        if real is not None and real.private is not None:
            real.private.registry.stop()
        with contextlib.suppress(Exception):
            local.stop()


@pytest.fixture(scope="module")
def kueue_cluster(real_cluster: RealCluster) -> Iterator[RealCluster]:
    """The session's cluster with Kueue installed (as ``anchorage_devcluster.kueue`` installs it: its manager as a
    pod, its CRDs and webhooks from its module's manifests, Admission Fair Sharing configured as
    :data:`KUEUE_FAIR_SHARING`) for the tests of one module (``tests/kube/test_real_kueue.py``: once per session), and
    removed after them: Kueue's Job webhook fails Job creation while its pod is down, which the other modules' tests
    (nodes killed, operators restarted) must not meet. Tests add their own ClusterQueues and LocalQueues."""
    from anchorage_devcluster import binaries, kueue

    found = binaries.find_kueue()
    if isinstance(found, str):
        pytest.skip(found)
    kueue.install(real_cluster.local, fair_sharing=KUEUE_FAIR_SHARING)
    try:
        yield real_cluster
    finally:
        kueue.uninstall(real_cluster.local)
