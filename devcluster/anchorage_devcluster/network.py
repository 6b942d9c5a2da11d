"""The dev cluster's network: a bridge on the host, a network namespace per real node, routes between them.

Used by ``cluster`` (the bridge comes first: the API server listens on it) and ``realnode`` (each node's namespace
and veth). Addresses come from a *slot* (0-9), so two clusters on one machine never collide; slot ``s`` gives

======================  ==========================================================================
bridge ``anc<s>``       the host's side, ``10.200.<s>.1/24``: the API server and the registry listen here
node *i* (1, 2, ...)    network namespace ``anchorage-<s>-<name>``, ``eth0`` ``10.200.<s>.<10+i>/24``
pods of node *i*        ``10.<210+s>.<i>.0/24`` (the cluster's pod CIDR ``10.<210+s>.0.0/16``)
Services                ``10.96.0.0/16`` (kube-proxy's rules live in each node's namespace only)
======================  ==========================================================================

Nothing here reaches another network: the host routes the pod CIDRs to the nodes but forwards nothing (two
iptables rules drop what would cross between the bridge and any other interface, whatever the host's
``ip_forward``), there is no NAT, and a node's only route out is the bridge. A pod reaches the host only at
``10.200.<s>.1`` — never the host's loopback, where etcd, the controller manager and the scheduler listen.

A slot is held with a lock file (``/run/anchorage-dev/slot-<s>.lock``) for as long as its cluster runs; a slot whose
lock is free but whose bridge or namespaces remain (a cluster killed with -9) is cleaned before it is reused.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from anchorage_devcluster import nodeprocs

SLOTS = range(10)
RUN_ROOT = Path("/run/anchorage-dev")
SERVICE_CIDR = "10.96.0.0/16"
CLUSTER_DNS = "10.96.0.10"
_COMMENT = "anchorage dev cluster slot {slot}: nothing crosses between its bridge and another interface"


class NetworkError(RuntimeError):
    """A network step failed; the message names the command and what it printed."""


def ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``ip ARGS`` (in ``netns`` when given)."""
    argv = ["ip", *(("-n", netns) if netns else ()), *args]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NetworkError(f"{' '.join(argv)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done


@dataclass(frozen=True)
class Slot:
    """The addresses of one cluster (see the module docstring)."""

    number: int

    @property
    def bridge(self) -> str:
        return f"anc{self.number}"

    @property
    def host_ip(self) -> str:
        return f"10.200.{self.number}.1"

    @property
    def node_subnet(self) -> str:
        return f"10.200.{self.number}.0/24"

    @property
    def cluster_cidr(self) -> str:
        return f"10.{210 + self.number}.0.0/16"

    def node_ip(self, index: int) -> str:
        return f"10.200.{self.number}.{10 + index}"

    def pod_cidr(self, index: int) -> str:
        return f"10.{210 + self.number}.{index}.0/24"

    def pod_gateway(self, index: int) -> str:
        """The node's own address on its pods' bridge (``cni0``)."""
        return str(next(ipaddress.ip_network(self.pod_cidr(index)).hosts()))

    def netns(self, node: str) -> str:
        return f"anchorage-{self.number}-{node}"

    def host_veth(self, index: int) -> str:
        return f"anc{self.number}n{index}"

    @property
    def run_dir(self) -> Path:
        """Short paths for the nodes' sockets (a unix socket path has at most 107 bytes)."""
        return RUN_ROOT / str(self.number)


class Network:
    """A slot's bridge and its nodes' namespaces, set up and torn down (see the module docstring)."""

    def __init__(self, slot: Slot, lock: int) -> None:
        self.slot = slot
        self._lock = lock
        self.nodes: dict[str, int] = {}

    @classmethod
    def acquire(cls) -> Network:
        """The first free slot, cleaned of what a killed cluster left, with its bridge up."""
        RUN_ROOT.mkdir(parents=True, exist_ok=True)
        for number in SLOTS:
            fd = os.open(RUN_ROOT / f"slot-{number}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            network = cls(Slot(number), fd)
            try:
                network.clean()
                network._bridge_up()
            except BaseException:
                network.release()
                raise
            return network
        raise NetworkError(f"every dev cluster slot ({len(SLOTS)}) is in use: stop a running cluster first")

    def _bridge_up(self) -> None:
        slot = self.slot
        ip("link", "add", slot.bridge, "type", "bridge")
        ip("addr", "add", f"{slot.host_ip}/24", "dev", slot.bridge)
        ip("link", "set", slot.bridge, "up")
        for rule in self._forward_rules():
            _iptables("-I", *rule)

    def _forward_rules(self) -> list[list[str]]:
        bridge, comment = self.slot.bridge, _COMMENT.format(slot=self.slot.number)
        return [["FORWARD", "-i", bridge, "!", "-o", bridge, "-m", "comment", "--comment", comment, "-j", "DROP"],
                ["FORWARD", "-o", bridge, "!", "-i", bridge, "-m", "comment", "--comment", comment, "-j", "DROP"]]

    def add_node(self, name: str, index: int) -> str:
        """Node ``name``'s namespace, wired to the bridge, with routes to the other nodes' pods; its namespace."""
        slot, netns = self.slot, self.slot.netns(name)
        ip("netns", "add", netns)
        self.nodes[name] = index
        veth = slot.host_veth(index)
        ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
        ip("link", "set", veth, "master", slot.bridge, "up")
        ip("link", "set", "lo", "up", netns=netns)
        ip("addr", "add", f"{slot.node_ip(index)}/24", "dev", "eth0", netns=netns)
        ip("link", "set", "eth0", "up", netns=netns)
        # Services: kube-proxy rewrites them before they leave the node; the route only lets a connect() begin
        ip("route", "add", SERVICE_CIDR, "via", slot.host_ip, netns=netns)
        ip("route", "replace", slot.pod_cidr(index), "via", slot.node_ip(index))  # the host reaches the pods
        for other, other_index in self.nodes.items():
            if other != name:
                ip("route", "replace", slot.pod_cidr(other_index), "via", slot.node_ip(other_index), netns=netns)
                ip("route", "replace", slot.pod_cidr(index), "via", slot.node_ip(index), netns=slot.netns(other))
        for key, value in (("net.ipv4.ip_forward", "1"), ("net.bridge.bridge-nf-call-iptables", "1"),
                           ("net.ipv4.conf.all.rp_filter", "0")):
            subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-qw", f"{key}={value}"], capture_output=True,
                           check=False)
        return netns

    def remove_node(self, name: str) -> None:
        """Delete the node's namespace (its veth and routes go with it)."""
        index = self.nodes.pop(name, None)
        ip("netns", "del", self.slot.netns(name), check=False)
        if index is not None:
            ip("route", "del", self.slot.pod_cidr(index), check=False)

    def clean(self) -> None:
        """Remove this slot's bridge, namespaces, routes and rules, and kill its nodes' processes (a killed cluster's
        leftovers: containers and their shims outlive the node's programs)."""
        slot = self.slot
        for cgroup in sorted(nodeprocs.CGROUP_ROOT.glob(f"{nodeprocs.SUBSYSTEM_FOR_PROCS}/anchorage-{slot.number}-*")):
            nodeprocs.kill_cgroup(cgroup.name)
            nodeprocs.remove_cgroup(cgroup.name)
        listed = ip("netns", "list", check=False).stdout.split()
        for name in listed:
            if name.startswith(f"anchorage-{slot.number}-"):
                ip("netns", "del", name, check=False)
        for index in range(1, 16):
            ip("route", "del", slot.pod_cidr(index), check=False)
            ip("link", "del", slot.host_veth(index), check=False)
        ip("link", "del", slot.bridge, check=False)
        for rule in self._forward_rules():
            while _iptables("-D", *rule, check=False).returncode == 0:
                pass

    def release(self) -> None:
        """Tear everything down and free the slot."""
        try:
            for name in list(self.nodes):
                self.remove_node(name)
            self.clean()
        finally:
            with contextlib.suppress(OSError):
                os.close(self._lock)


def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["iptables", "-w", "5", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NetworkError(f"iptables {' '.join(args)} failed: {done.stderr.strip()}")
    return done
