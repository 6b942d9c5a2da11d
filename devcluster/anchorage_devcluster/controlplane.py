"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager, kube-scheduler.

Started by ``anchorage dev cluster`` (when :func:`binaries.find` finds the pinned binaries) and by the
tests' session fixture. Run as a real cluster is run, on 127.0.0.1 only:

* etcd with one member (``--unsafe-no-fsync``: a throw-away cluster, so nothing is fsynced);
* kube-apiserver with TLS, client-certificate and ServiceAccount-token authentication (anonymous
  requests get only what RBAC gives ``system:anonymous``), the ``Node,RBAC`` authorizers, the default
  admission plugins (``PodSecurity`` enforces a namespace's ``pod-security.kubernetes.io/enforce`` label)
  plus ``NodeRestriction`` and ``PodNodeSelector`` (a namespace annotation pins its pods to nodes), CRD
  structural-schema and CEL validation by the server;
  ``--endpoint-reconciler-type=none`` because the ``kubernetes`` Service cannot point at a loopback address;
* kube-controller-manager (Job controller, garbage collector, TTL-after-finished, ServiceAccount, token
  and root-CA controllers, node lifecycle, ...) with per-controller ServiceAccount credentials;
* kube-scheduler.

:class:`Throughput` sets the controllers' and the scheduler's API rates, the Job controller's workers and where
etcd keeps its data: Kubernetes' defaults unless a caller (the load bench) asks for :data:`BATCH`, the settings
an operator of a batch cluster would raise.

Nodes are added separately (``realnode``, ``simulatednode``). Each component logs to ``<root>/logs/<name>.log``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from anchorage_devcluster import pki
from anchorage_devcluster.binaries import Binaries
from anchorage_devcluster.lifetimes import die_with_parent
from anchorage_devcluster.ports import free_port

SERVICE_CIDR = "10.96.0.0/16"  # addresses of Services (never routed here: no kube-proxy)
ISSUER = "https://kubernetes.default.svc.cluster.local"


class StartError(RuntimeError):
    """A component exited or did not become ready; the message ends with its log's tail."""


@dataclass(frozen=True)
class Throughput:
    """How fast the control plane's own clients may go (defaults: Kubernetes' own)."""

    controller_qps: float = 20.0  # kube-controller-manager --kube-api-qps: every controller's requests share it
    controller_burst: int = 30
    job_syncs: int = 5  # --concurrent-job-syncs: Jobs the Job controller syncs at once
    scheduler_qps: float = 50.0  # KubeSchedulerConfiguration clientConnection.qps (pod bindings)
    scheduler_burst: int = 100
    etcd_dir: Path | None = None  # etcd's data folder (default ``<root>/etcd``); e.g. a tmpfs folder for a bench

    def describe(self) -> str:
        """The settings in the components' own terms (for a bench's report)."""
        return (f"kube-controller-manager --kube-api-qps={self.controller_qps:g} --kube-api-burst="
                f"{self.controller_burst} --concurrent-job-syncs={self.job_syncs}; kube-scheduler clientConnection "
                f"qps {self.scheduler_qps:g} burst {self.scheduler_burst}; etcd --unsafe-no-fsync, data in "
                f"{self.etcd_dir or '<root>/etcd'}")


#: A batch cluster's settings: thousands of short Jobs need the Job controller's pod creations, status updates and
#: finalizer removals (several requests per Job) and the scheduler's bindings well above the defaults of 20 and 50
#: requests/s. etcd stays unsynced (a throw-away cluster); the caller may put its data on tmpfs (``etcd_dir``).
BATCH = Throughput(controller_qps=500.0, controller_burst=1000, job_syncs=50, scheduler_qps=500.0, scheduler_burst=1000)


def kubeconfig(server: str, ca: Path, *, user: dict[str, str], namespace: str = "default", name: str = "anchorage-dev"
               ) -> str:
    """A kubeconfig for ``server`` whose user is ``user`` (``client-certificate``/``client-key`` or ``token``)."""
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": name,
           "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority": str(ca)}}],
           "users": [{"name": name, "user": user}],
           "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}]}
    return yaml.safe_dump(doc, sort_keys=False)


@dataclass
class ControlPlane:
    """A running control plane (see the module docstring); :meth:`stop` ends every process it started."""

    root: Path
    binaries: Binaries
    url: str
    authority: pki.Authority
    admin_kubeconfig: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def ca(self) -> Path:
        return self.authority.pair.cert

    def env(self, kubeconfig: Path | None = None) -> dict[str, str]:
        """The environment for kubectl and clients: this cluster's kubeconfig, this kubectl first on PATH."""
        path = f"{self.binaries.folder}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        return {**os.environ, "KUBECONFIG": str(kubeconfig or self.admin_kubeconfig), "PATH": path}

    def kubectl(self, *args: str, kubeconfig: Path | None = None, stdin: str | None = None,
                check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run this cluster's kubectl (as the admin unless ``kubeconfig`` says otherwise)."""
        result = subprocess.run([str(self.binaries.kubectl), *args], env=self.env(kubeconfig), input=stdin,
                                capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def user_kubeconfig(self, user: str, *, groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig authenticating with a client certificate as ``user`` (in ``groups``)."""
        pair = self.authority.issue(f"user-{user}", user, groups=groups)
        path = self.root / f"user-{user}.kubeconfig"
        path.write_text(kubeconfig(self.url, self.ca, user={"client-certificate": str(pair.cert),
                                                            "client-key": str(pair.key)}))
        return path

    def node_kubeconfig(self, node: str) -> Path:
        """A kubeconfig authenticating as the kubelet of ``node`` (``system:node:<node>`` in ``system:nodes``)."""
        pair = self.authority.issue(f"node-{node}", f"system:node:{node}", groups=("system:nodes",))
        path = self.root / f"node-{node}.kubeconfig"
        path.write_text(kubeconfig(self.url, self.ca, user={"client-certificate": str(pair.cert),
                                                            "client-key": str(pair.key)}))
        return path

    def namespace(self, name: str, *, pod_security: str | None = "restricted", nodes: str | None = None,
                  tolerate: str | None = None) -> None:
        """Create namespace ``name`` (if absent) enforcing PodSecurity ``pod_security``; ``nodes``: a node label
        selector (``key=value``) its pods are pinned to (``PodNodeSelector``); ``tolerate``: a taint key its pods
        tolerate (``PodTolerationRestriction``'s default tolerations)."""
        self.kubectl("create", "namespace", name, check=False)
        if pod_security:
            self.kubectl("label", "namespace", name, "--overwrite", f"pod-security.kubernetes.io/enforce={pod_security}")
        if nodes:
            self.kubectl("annotate", "namespace", name, "--overwrite", f"scheduler.alpha.kubernetes.io/node-selector={nodes}")
        if tolerate:
            toleration = json.dumps([{"key": tolerate, "operator": "Exists"}])
            self.kubectl("annotate", "namespace", name, "--overwrite",
                         f"scheduler.alpha.kubernetes.io/defaultTolerations={toleration}")

    def service_account_kubeconfig(self, namespace: str, name: str, path: Path, *, hours: int = 48) -> Path:
        """A kubeconfig with a bound token of ServiceAccount ``namespace/name`` (TokenRequest, as a pod gets)."""
        token = self.kubectl("create", "token", name, "-n", namespace, f"--duration={hours}h").stdout.strip()
        path.write_text(kubeconfig(self.url, self.ca, user={"token": token}, namespace=namespace,
                                   name=f"{namespace}-{name}"))
        return path

    def alive(self) -> dict[str, int | None]:
        """Each component's exit code (None while it runs)."""
        return {name: proc.poll() for name, proc in self.procs.items()}

    def stop(self) -> None:
        """Stop the components (scheduler and controller manager first, etcd last)."""
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(15)
        self.procs.clear()


def _tail(path: Path, size: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return ""


def _spawn(plane: ControlPlane, name: str, argv: list[str]) -> None:
    logs = plane.root / "logs"
    logs.mkdir(exist_ok=True)
    with (logs / f"{name}.log").open("ab") as log:
        plane.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             start_new_session=True, cwd=plane.root, preexec_fn=die_with_parent)


def _wait(plane: ControlPlane, name: str, ready: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = plane.procs[name].poll()
        if code is not None:
            raise StartError(f"{name} exited with {code}:\n{_tail(plane.root / 'logs' / f'{name}.log')}")
        if ready():
            return
        time.sleep(0.3)
    raise StartError(f"{name} was not ready within {timeout:.0f} s:\n{_tail(plane.root / 'logs' / f'{name}.log')}")


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _https_ok(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _audit_flags(root: Path, users: tuple[str, ...], groups: tuple[str, ...] = ()) -> list[str]:
    """Audit logging (JSON lines, ``<root>/audit.log``) of every request of ``users`` or of members of ``groups``
    at Metadata level."""
    if not users and not groups:
        return []
    rules: list[dict[str, object]] = [{"level": "Metadata", "users": list(users)}] if users else []
    rules += [{"level": "Metadata", "userGroups": list(groups)}] if groups else []
    policy = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
              "rules": [*rules, {"level": "None"}]}
    (root / "audit-policy.yaml").write_text(yaml.safe_dump(policy))
    return [f"--audit-policy-file={root / 'audit-policy.yaml'}", f"--audit-log-path={root / 'audit.log'}",
            "--audit-log-maxsize=0", "--audit-log-mode=batch"]


def start(root: Path, binaries: Binaries, *, timeout: float = 180.0, audit_users: tuple[str, ...] = (),
          audit_groups: tuple[str, ...] = (), throughput: Throughput = Throughput(),
          address: str = "127.0.0.1") -> ControlPlane:
    """Start a control plane under ``root`` (certificates, etcd data, kubeconfigs, logs); ready when it returns.

    ``address``: where the API server listens (``127.0.0.1``, or the host's address on the cluster's bridge when real
    nodes join: ``network``); etcd, the controller manager and the scheduler stay on loopback, which no pod reaches.
    ``audit_users``, ``audit_groups``: users, and groups of users (e.g. ``system:serviceaccounts:<namespace>``,
    every ServiceAccount of a namespace), whose requests the API server records in ``<root>/audit.log`` (the load
    bench and the kill -9 test count the operator's requests there); ``throughput``: see :class:`Throughput`."""
    root.mkdir(parents=True, exist_ok=True)
    pki_dir = root / "pki"
    authority = pki.Authority(pki_dir)
    port, etcd_port, peer_port = free_port(), free_port(), free_port()
    serving = authority.issue("apiserver", "kube-apiserver", server=True, hosts=(
        address, "127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local", "10.96.0.1"))
    admin = authority.issue("admin", "anchorage-admin", groups=("system:masters",))
    sa = pki.service_account_keys(pki_dir)
    url = f"https://{address}:{port}"
    admin_kubeconfig = root / "admin.kubeconfig"
    admin_kubeconfig.write_text(kubeconfig(url, authority.pair.cert, user={"client-certificate": str(admin.cert),
                                                                             "client-key": str(admin.key)}))
    plane = ControlPlane(root, binaries, url, authority, admin_kubeconfig)
    try:
        _start_all(plane, serving, admin, sa, port, etcd_port, peer_port, timeout,
                   _audit_flags(root, audit_users, audit_groups), throughput, address)
    except BaseException:
        plane.stop()
        raise
    return plane


def _start_all(plane: ControlPlane, serving: pki.Pair, admin: pki.Pair, sa: pki.Pair, port: int, etcd_port: int,
               peer_port: int, timeout: float, extra: list[str], throughput: Throughput, address: str) -> None:
    root, binaries, ca = plane.root, plane.binaries, plane.ca
    etcd_url, peer_url = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{peer_port}"
    _spawn(plane, "etcd", [
        str(binaries.etcd), "--name=default", f"--data-dir={throughput.etcd_dir or root / 'etcd'}",
        f"--listen-client-urls={etcd_url}",
        f"--advertise-client-urls={etcd_url}", f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}", f"--initial-cluster=default={peer_url}",
        "--unsafe-no-fsync", "--log-level=warn", f"--quota-backend-bytes={8 * 1024 ** 3}"])
    _wait(plane, "etcd", lambda: _port_open(etcd_port), timeout)
    # the kubelets' API: the API server proves itself with a client certificate, and checks theirs against the CA
    kubelet_client = plane.authority.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                                           groups=("system:masters",))
    # aggregated APIs (e.g. Kueue's visibility API) learn the caller from the front proxy's headers, trusted only from
    # a client certificate of a CA of its own (as kubeadm sets it up)
    front_proxy = pki.Authority(plane.root / "pki" / "front-proxy", name="anchorage-front-proxy-ca")
    proxy_client = front_proxy.issue("front-proxy-client", "front-proxy-client")
    loopback = address == "127.0.0.1"
    _spawn(plane, "kube-apiserver", [
        str(binaries.kube_apiserver), f"--etcd-servers={etcd_url}", f"--bind-address={address}",
        f"--advertise-address={address}", f"--secure-port={port}", f"--tls-cert-file={serving.cert}",
        f"--tls-private-key-file={serving.key}", f"--client-ca-file={ca}",
        f"--service-account-issuer={ISSUER}", f"--service-account-key-file={sa.cert}",
        f"--service-account-signing-key-file={sa.key}", "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction,PodNodeSelector,PodTolerationRestriction",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # on loopback the ``kubernetes`` Service cannot point at the server; on the bridge its pods reach it there
        f"--endpoint-reconciler-type={'none' if loopback else 'lease'}",
        f"--kubelet-client-certificate={kubelet_client.cert}", f"--kubelet-client-key={kubelet_client.key}",
        f"--kubelet-certificate-authority={ca}", "--kubelet-preferred-address-types=InternalIP",
        # webhooks and aggregated APIs are reached at their pods' addresses (the host routes the pod CIDRs; it
        # runs no kube-proxy for Service addresses), as a control plane without a node of its own does
        "--enable-aggregator-routing=true",
        f"--requestheader-client-ca-file={front_proxy.pair.cert}", "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-", f"--proxy-client-cert-file={proxy_client.cert}",
        f"--proxy-client-key-file={proxy_client.key}",
        # a pod of a lost node is evicted after 15 s, not 5 minutes (NotReady within 20 s, see the controllers)
        "--default-not-ready-toleration-seconds=15", "--default-unreachable-toleration-seconds=15",
        "--allow-privileged=false", "--profiling=false", "--event-ttl=2h",
        *extra])
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(str(admin.cert), str(admin.key))
    _wait(plane, "kube-apiserver", lambda: _https_ok(f"{plane.url}/readyz", context), timeout)
    for component, user in (("kube-controller-manager", "system:kube-controller-manager"),
                            ("kube-scheduler", "system:kube-scheduler")):
        pair = plane.authority.issue(component, user)
        (root / f"{component}.kubeconfig").write_text(kubeconfig(plane.url, ca, user={
            "client-certificate": str(pair.cert), "client-key": str(pair.key)}))
    manager_config = root / "kube-controller-manager.kubeconfig"
    _spawn(plane, "kube-controller-manager", [
        str(binaries.kube_controller_manager), f"--kubeconfig={manager_config}",
        f"--authentication-kubeconfig={manager_config}", f"--authorization-kubeconfig={manager_config}",
        "--bind-address=127.0.0.1", f"--secure-port={free_port()}", "--leader-elect=false",
        f"--service-account-private-key-file={sa.key}", f"--root-ca-file={ca}",
        f"--cluster-signing-cert-file={ca}", f"--cluster-signing-key-file={plane.authority.pair.key}",
        "--use-service-account-credentials", f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--controllers=*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle-controller",
        f"--kube-api-qps={throughput.controller_qps:g}", f"--kube-api-burst={throughput.controller_burst}",
        f"--concurrent-job-syncs={throughput.job_syncs}",
        # a node whose kubelet stopped renewing its lease (every 2.5 s) is NotReady after 20 s
        "--node-monitor-period=2s", "--node-monitor-grace-period=20s"])
    scheduler_config = root / "kube-scheduler.kubeconfig"
    (root / "kube-scheduler.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(scheduler_config), "qps": throughput.scheduler_qps,
                             "burst": throughput.scheduler_burst},
        "leaderElection": {"leaderElect": False}}))
    _spawn(plane, "kube-scheduler", [
        str(binaries.kube_scheduler), f"--config={root / 'kube-scheduler.yaml'}",
        f"--authentication-kubeconfig={scheduler_config}", f"--authorization-kubeconfig={scheduler_config}",
        "--bind-address=127.0.0.1", f"--secure-port={free_port()}"])
    # Ready when the controller manager's ServiceAccount controller made the default namespace's account.
    _wait(plane, "kube-controller-manager", lambda: plane.kubectl(
        "get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0, timeout)
    for name in ("kube-scheduler", "kube-controller-manager"):
        if plane.procs[name].poll() is not None:
            raise StartError(f"{name} exited:\n{_tail(root / 'logs' / f'{name}.log')}")


@contextlib.contextmanager
def running(root: Path, binaries: Binaries, *, timeout: float = 180.0) -> Iterator[ControlPlane]:
    """``with running(root, binaries) as plane:`` — started, then stopped at the end of the block."""
    plane = start(root, binaries, timeout=timeout)
    try:
        yield plane
    finally:
        plane.stop()
