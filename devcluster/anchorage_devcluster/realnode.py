"""A real Kubernetes node on this machine: the kubelet, containerd + runc, CNI, kube-proxy and kube-router.

Used by ``cluster`` (``LocalCluster.add_real_node``) for ``anchorage dev cluster`` and the tests' session cluster. Each
node is what a cloud node is, minus the machine: its own network namespace on the cluster's bridge (``network``), its
own containerd (Debian's ``containerd`` and ``runc``; images pulled from the cluster's registry over plain HTTP, the
sandbox image the project's own ``pause``), CNI ``bridge`` + ``host-local`` + ``portmap`` (Debian's
``containernetworking-plugins``) on the node's pod CIDR, the kubelet built from the pinned ``k8s.io/kubernetes``
(cgroupfs driver under ``/<cgroup>``, x509 + webhook authentication and authorisation of its API, serving certificate
from the cluster's CA), kube-proxy (iptables mode) and kube-router's firewall controller (the NetworkPolicy engine; no
routing, no service proxy). ``nodeprocs`` supervises them inside the node's namespaces.

The kubelet measures the machine: capacity is this machine's CPUs and memory (two nodes on one machine both report
all of it; the scheduler's requests still bound what runs on each). State lives under ``/var/lib/anchorage-dev/<slot>/
<node>`` and sockets under ``/run/anchorage-dev/<slot>/<node>`` (short paths), containerd's images in the cache
(:attr:`RealNode.images`: pulled and unpacked once, kept across clusters); logs under the cluster's ``logs``. That
store is bounded: :meth:`RealNode.prune_images` (at a node's start, by ``cluster``) leaves only the cluster's own
images, so it never holds more than one session's; a store over :data:`STORE_LIMIT` when the node is prepared (what
pruning cannot remove) is wiped, and containerd pulls again from the cluster's registry.
:meth:`RealNode.lose` kills the node's every process (kubelet, runtime, shims, containers) as a failed machine would;
:meth:`RealNode.stop` stops it cleanly and removes what it made.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from anchorage_devcluster import nodeprocs
from anchorage_devcluster.binaries import Binaries, cache_root
from anchorage_devcluster.lifetimes import die_with_parent
from anchorage_devcluster.network import CLUSTER_DNS, SERVICE_CIDR, Network

STATE_ROOT = Path("/var/lib/anchorage-dev")
CNI_BIN = Path("/usr/lib/cni")
#: Node status heartbeats: a lease renewed every 2.5 s, so the node lifecycle controller's grace (controlplane) can
#: be short and a lost node is noticed within seconds, not minutes.
LEASE_SECONDS = 10
#: The most a node's image store (:attr:`RealNode.images`) may hold when the node is prepared; a larger one is wiped.
#: One session's images, unpacked (containerd keeps no layer once unpacked: ``discard_unpacked_layers``), are about
#: 5 GB: the agent image 2.7 GB, the operator's, the task bundle's and the verifier's 0.4-0.9 GB each.
STORE_LIMIT = 8 * 1024 ** 3
#: Debian packages a real node needs: the runtime, the CNI plugins, and what kube-proxy and kube-router run.
PACKAGES = ("containerd", "runc", "containernetworking-plugins", "iptables", "ipset", "conntrack", "iproute2")


def missing_requirements() -> str | None:
    """Why a real node cannot run here (a sentence naming what to install), or None."""
    if os.geteuid() != 0:
        return "a real node needs root (network namespaces, cgroups, mounts)"
    programs = {"containerd": "containerd", "runc": "runc", "iptables": "iptables", "ipset": "ipset",
                "conntrack": "conntrack", "ip": "iproute2"}
    absent = sorted({package for program, package in programs.items() if shutil.which(program) is None})
    if not (CNI_BIN / "bridge").exists():
        absent.append("containernetworking-plugins")
    if absent:
        return f"a real node needs the Debian packages {' '.join(absent)} (apt-get install {' '.join(absent)})"
    if not (nodeprocs.CGROUP_ROOT / "freezer").is_dir() or not (nodeprocs.CGROUP_ROOT / "pids").is_dir():
        return "a real node needs the cgroup v1 freezer and pids hierarchies under /sys/fs/cgroup"
    return None


@dataclass
class RealNode:
    """One node (see the module docstring): its configuration on disk and its supervisor process."""

    name: str
    index: int
    network: Network
    binaries: Binaries
    logs: Path
    labels: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def slot(self) -> Any:
        return self.network.slot

    @property
    def ip(self) -> str:
        return str(self.network.slot.node_ip(self.index))

    @property
    def state(self) -> Path:
        return STATE_ROOT / str(self.slot.number) / self.name

    @property
    def run(self) -> Path:
        return Path(self.slot.run_dir) / self.name

    @property
    def images(self) -> Path:
        """containerd's root (content store, unpacked snapshots): kept in the cache across clusters, per slot and
        node name, so a node pulls and unpacks an image once, not once per cluster (bounded: see the module
        docstring)."""
        return cache_root() / "nodes" / f"{self.slot.number}-{self.name}" / "containerd"

    @property
    def cgroup(self) -> str:
        return f"anchorage-{self.slot.number}-{self.name}"

    @property
    def netns(self) -> str:
        return str(self.slot.netns(self.name))

    @property
    def containerd_socket(self) -> Path:
        return self.run / "containerd.sock"

    def prepare(self, plane: Any, *, registry: str | None, pause_image: str) -> Path:
        """Write the node's certificates and configuration, register its Node (with its pod CIDR) and set up its
        network namespace and cgroup; the supervisor's configuration file. An image store over :data:`STORE_LIMIT` is
        wiped first (nothing of this node runs yet)."""
        self.bound_store()
        shutil.rmtree(self.state, ignore_errors=True)
        shutil.rmtree(self.run, ignore_errors=True)
        for folder in (self.state, self.run, self.logs):
            folder.mkdir(parents=True, exist_ok=True)
        pki = self.state / "pki"
        pki.mkdir()
        authority = plane.authority
        kubelet = authority.issue(f"kubelet-{self.name}", f"system:node:{self.name}", groups=("system:nodes",))
        serving = authority.issue(f"kubelet-serving-{self.name}", f"system:node:{self.name}", server=True,
                                  hosts=(self.ip, self.name))
        proxy = authority.issue(f"kube-proxy-{self.name}", "system:kube-proxy")
        router = authority.issue(f"kube-router-{self.name}", "system:kube-router")
        kubeconfigs = {name: self._kubeconfig(plane, name, pair) for name, pair in
                       (("kubelet", kubelet), ("kube-proxy", proxy), ("kube-router", router))}
        self.network.add_node(self.name, self.index)
        nodeprocs.make_cgroup(f"{self.cgroup}/system")
        self._register(plane)
        config = {
            "name": self.name, "logs": str(self.logs), "cgroup": self.cgroup,
            "cgroup_mounts": nodeprocs.cgroup_mounts(),
            "containerd_socket": str(self.containerd_socket),
            "containerd": ["containerd", "--config", str(self._containerd_config(registry, pause_image))],
            "kubelet": [str(self.binaries.kubelet), f"--config={self._kubelet_config(plane, serving)}",
                        f"--kubeconfig={kubeconfigs['kubelet']}", f"--hostname-override={self.name}",
                        f"--node-ip={self.ip}", f"--root-dir={self.state / 'kubelet'}",
                        f"--cert-dir={self.state / 'kubelet-pki'}", "--v=1",
                        *([f"--node-labels={','.join(f'{k}={v}' for k, v in sorted(self.labels.items()))}"]
                          if self.labels else [])],
            "kube_proxy": [str(self.binaries.kube_proxy), f"--config={self._proxy_config(kubeconfigs['kube-proxy'])}",
                           "--v=1"],
            "kube_router": [str(self.binaries.kube_router), f"--kubeconfig={kubeconfigs['kube-router']}",
                            "--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
                            "--enable-cni=false", f"--hostname-override={self.name}", "--metrics-port=0",
                            "--health-port=0", f"--service-cluster-ip-range={SERVICE_CIDR}",
                            "--iptables-sync-period=5m", "--v=1"],
        }
        path = self.state / "node.json"
        path.write_text(json.dumps(config, indent=1))
        return path

    def _kubeconfig(self, plane: Any, name: str, pair: Any) -> Path:
        from anchorage_devcluster.controlplane import kubeconfig

        path = self.state / f"{name}.kubeconfig"
        path.write_text(kubeconfig(plane.url, plane.ca, user={"client-certificate": str(pair.cert),
                                                               "client-key": str(pair.key)}))
        return path

    def _register(self, plane: Any) -> None:
        """Create the Node with its pod CIDR before the kubelet registers it (the kubelet cannot set ``podCIDR``;
        kube-proxy and kube-router read it), unless it exists."""
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.name, "labels": {"kubernetes.io/hostname": self.name, **self.labels}},
                "spec": {"podCIDR": self.slot.pod_cidr(self.index), "podCIDRs": [self.slot.pod_cidr(self.index)]}}
        plane.kubectl("create", "-f", "-", stdin=json.dumps(body), check=False)

    def allow_registry(self, address: str) -> None:
        """Let containerd pull from the plain-HTTP registry at ``address`` (its hosts.toml, which containerd reads at
        every pull: no restart)."""
        folder = self.state / "containerd" / "certs.d" / address
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "hosts.toml").write_text(
            f'server = "http://{address}"\n\n[host."http://{address}"]\n  capabilities = ["pull", "resolve"]\n')

    def _containerd_config(self, registry: str | None, pause_image: str) -> Path:
        folder = self.state / "containerd"
        cni = self.state / "cni"
        (cni / "net.d").mkdir(parents=True, exist_ok=True)
        (cni / "net.d" / "10-anchorage.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0", "name": "anchorage", "plugins": [
                {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
                 "ipam": {"type": "host-local", "ranges": [[{"subnet": self.slot.pod_cidr(self.index),
                                                             "gateway": self.slot.pod_gateway(self.index)}]],
                          "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(cni / "ipam")}},
                {"type": "portmap", "capabilities": {"portMappings": True}}]}, indent=1))
        hosts = folder / "certs.d"
        if registry:
            self.allow_registry(registry)
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        text = f"""version = 2
root = "{self.images}"
state = "{self.run / 'containerd-state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
                    "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{self.containerd_socket}"

[ttrpc]
  address = "{self.run / 'containerd.sock.ttrpc'}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{folder / 'opt'}"

[{cri}]
  sandbox_image = "{pause_image}"
  enable_selinux = false
  netns_mounts_under_state_dir = true
  # this machine withholds CAP_SYS_RESOURCE even from root (`echo -998 > /proc/self/oom_score_adj`: Permission
  # denied), so no process may lower its OOM score below containerd's: the sandbox's -998 and a Guaranteed pod's
  # -997 become 0 (the kubelet's own adjustment fails the same way, which it logs and survives)
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  max_container_log_line_size = 16384

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
  # an image's layers are unpacked into snapshots once: the compressed copies would double the store (the registry
  # on this machine has them)
  discard_unpacked_layers = true

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false

[{cri}.cni]
  bin_dir = "{CNI_BIN}"
  conf_dir = "{cni / 'net.d'}"

[{cri}.registry]
  config_path = "{hosts}"
"""
        path = folder / "config.toml"
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def _kubelet_config(self, plane: Any, serving: Any) -> Path:
        resolv = self.state / "resolv.conf"
        resolv.write_text("# pods resolve through the cluster DNS only; nothing outside the cluster\n")
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": self.ip, "port": 10250, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                               "x509": {"clientCAFile": str(plane.ca)}},
            "authorization": {"mode": "Webhook"},
            "tlsCertFile": str(serving.cert), "tlsPrivateKeyFile": str(serving.key),
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "cgroupDriver": "cgroupfs", "cgroupRoot": f"/{self.cgroup}", "failCgroupV1": False,
            "failSwapOn": False, "clusterDNS": [CLUSTER_DNS], "clusterDomain": "cluster.local",
            "resolvConf": str(resolv), "podLogsDir": str(self.state / "pod-logs"),
            "nodeLeaseDurationSeconds": LEASE_SECONDS, "nodeStatusUpdateFrequency": "4s",
            "nodeStatusReportFrequency": "1m",
            # the images come from the cluster's registry once: never collect them, whatever the disk's use
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                             "nodefs.inodesFree": "1%"},
            # a pressure condition (the host's disk briefly full: the nodes share it) lifts 30 s after it ends, not
            # the default 5 minutes of a tainted node that schedules nothing
            "evictionPressureTransitionPeriod": "30s",
            "serializeImagePulls": False, "podPidsLimit": 4096, "maxPods": 110,
            "rotateCertificates": False, "serverTLSBootstrap": False,
            "shutdownGracePeriod": "0s", "registerNode": True,
        }
        path = self.state / "kubelet.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def _proxy_config(self, kubeconfig: Path) -> Path:
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)}, "hostnameOverride": self.name,
            "mode": "iptables", "clusterCIDR": self.slot.cluster_cidr,
            "healthzBindAddress": "127.0.0.1:10256", "metricsBindAddress": "127.0.0.1:10249",
            # conntrack's table sizes are the host's (read-only in a network namespace): left as they are
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        }
        path = self.state / "kube-proxy.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def start(self, config: Path) -> None:
        """Start the node's supervisor in its namespaces (see ``nodeprocs``)."""
        argv = ["ip", "netns", "exec", self.netns, sys.executable, "-m", "anchorage_devcluster.nodeprocs", str(config)]
        with (self.logs / f"{self.name}-supervisor.log").open("ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, env={**os.environ, "PATH": _path()},
                                         preexec_fn=die_with_parent)

    def wait_ready(self, plane: Any, timeout: float = 180) -> None:
        """Until the Node is Ready (its kubelet reports to the API); a clear error with the logs' tails otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = plane.kubectl("get", "node", self.name, "-o",
                                  "jsonpath={.status.conditions[?(@.type=='Ready')].status}", check=False)
            if ready.stdout.strip() == "True":
                return
            if self.proc is not None and self.proc.poll() is not None:
                break
            time.sleep(0.5)
        raise RuntimeError(f"node {self.name} did not become Ready within {timeout:.0f} s:\n{self.log_tails()}")

    def store_size(self) -> int:
        """Bytes the node's image store takes on disk (``du``: hard-linked files once)."""
        if not self.images.exists():
            return 0
        done = subprocess.run(["du", "-sx", "--block-size=1", str(self.images)], capture_output=True, text=True,
                              check=False)
        return int(done.stdout.split()[0]) if done.stdout.strip() else 0

    def bound_store(self, limit: int = STORE_LIMIT) -> int | None:
        """Wipe the node's image store when it takes more than ``limit`` bytes (only while the node is down: from
        :meth:`prepare`); its size when wiped, else None."""
        size = self.store_size()
        if size <= limit:
            return None
        print(f"{self.name}: image store {self.images} holds {size / 1024 ** 3:.1f} GiB (over "
              f"{limit / 1024 ** 3:.0f} GiB): wiped, images are pulled again", file=sys.stderr, flush=True)
        subprocess.run(["rm", "-rf", "--one-file-system", str(self.images)], check=False, capture_output=True)
        return size

    def prune_images(self, keep: set[str]) -> list[str]:
        """Remove from the node's runtime every image but those ``keep`` names (references): the node's image store
        lives in the cache across clusters (:attr:`images`) and its kubelet never collects images, so whatever an
        earlier cluster pulled — earlier builds, images of other registries, test-built ones — would pile up.
        Called when the node has started, with the cluster's own images (``cluster``), so the store holds at most one
        session's. The removed references (:func:`stale_images`); containerd drops their content and snapshots
        before this returns, but not what a container still uses."""
        def ctr(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["ctr", "--address", str(self.containerd_socket), "-n", "k8s.io", *args],
                                  capture_output=True, text=True, check=False, timeout=300)

        stale = stale_images(ctr("images", "ls").stdout, keep)
        if stale:
            ctr("images", "rm", "--sync", *stale)
        return stale

    def log_tails(self, size: int = 1500) -> str:
        parts = []
        for program in ("supervisor", "containerd", "kubelet", "kube-proxy", "kube-router"):
            path = self.logs / f"{self.name}-{program}.log"
            if path.exists():
                parts.append(f"--- {path}\n{path.read_text(errors='replace')[-size:]}")
        return "\n".join(parts)

    def lose(self) -> None:
        """The node fails as a machine does: every process of it (kubelet, containerd, shims, containers) killed
        at once, nothing cleaned up, the Node left to the node lifecycle controller."""
        nodeprocs.kill_cgroup(self.cgroup)
        if self.proc is not None:
            self.proc.wait(30)

    def stop(self) -> None:
        """Stop the node's programs and containers and remove its namespace, cgroup and state."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(60)
        nodeprocs.kill_cgroup(self.cgroup)
        nodeprocs.remove_cgroup(self.cgroup)
        self.network.remove_node(self.name)
        shutil.rmtree(self.run, ignore_errors=True)
        subprocess.run(["rm", "-rf", "--one-file-system", str(self.state)], check=False, capture_output=True)


def stale_images(listing: str, keep: set[str]) -> list[str]:
    """The references of ``ctr images ls`` output ``listing`` that :meth:`RealNode.prune_images` removes: all but the
    images ``keep`` names — an image's every reference (its tag, its digest reference, the runtime's ``sha256:`` ID)
    shares its target digest, so all of them stay with a kept one — and the runtime's pinned ones (the sandbox
    image)."""
    rows = [row for row in (line.split() for line in listing.splitlines()[1:]) if len(row) >= 3]  # REF TYPE DIGEST ...
    kept = {row[2] for row in rows if row[0] in keep or "io.cri-containerd.pinned=pinned" in row[-1]}
    return [row[0] for row in rows if row[2] not in kept]


def _path() -> str:
    """PATH for the node's programs: the system's (containerd, runc, iptables, ipset, conntrack), CNI plugins."""
    return f"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:{CNI_BIN}"
