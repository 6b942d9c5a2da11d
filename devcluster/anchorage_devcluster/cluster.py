"""A whole local cluster: the real control plane, sandbox node agents, Anchorage's CRDs and Helm chart.

Used by ``anchorage dev cluster`` (``cli``) and by the tests' session fixture (``tests/kube_cluster.py``).
:func:`start` starts ``controlplane`` and one node agent (``nodeagent``, a subprocess per node);
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

from anchorage_devcluster import controlplane
from anchorage_devcluster.binaries import Binaries

#: Values that keep the chart's in-cluster Deployments off the sandbox node (it runs no images; the operator
#: runs beside the cluster with the chart's ServiceAccount token instead) and the trials namespace its own.
CHART_VALUES: dict[str, Any] = {
    "operator": {"nodeSelector": {"anchorage.dev/runs-images": "true"}},
    "gateway": {"nodeSelector": {"anchorage.dev/runs-images": "true"}},
}


@dataclass
class LocalCluster:
    """The control plane and its node agents (see the module docstring)."""

    plane: controlplane.ControlPlane
    nodes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return self.plane.root

    def start_node(self, name: str, *, writable: tuple[Path, ...] = (), simulate: str | None = None,
                   capacity: dict[str, str] | None = None, env: dict[str, str] | None = None,
                   image_binds: dict[str, Path] | None = None, image_path: tuple[str, ...] = (),
                   timeout: float = 60) -> subprocess.Popen[bytes]:
        """Start a node agent (``simulate``: ``MODULE:FUNCTION``; ``image_binds``: container path → host folder
        standing in for the images' contents) and wait until its Node is Ready."""
        argv = [sys.executable, "-m", "anchorage_devcluster.nodeagent", "--kubeconfig",
                str(self.plane.node_kubeconfig(name)), "--name", name, "--workdir", str(self.root / "nodes" / name)]
        argv += [item for path in writable for item in ("--writable", str(path))]
        argv += ["--simulate", simulate] if simulate else []
        argv += [item for key, value in (capacity or {}).items() for item in ("--capacity", f"{key}={value}")]
        argv += [item for target, source in (image_binds or {}).items() for item in ("--image-bind", f"{target}={source}")]
        argv += [item for folder in image_path for item in ("--image-path", folder)]
        (self.root / "logs").mkdir(exist_ok=True)
        with (self.root / "logs" / f"node-{name}.log").open("ab") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **(env or {})}, start_new_session=True)
        self.nodes[name] = proc
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = self.plane.kubectl("get", "node", name, "-o",
                                       "jsonpath={.status.conditions[?(@.type=='Ready')].status}", check=False)
            if ready.stdout.strip() == "True":
                return proc
            if proc.poll() is not None:
                break
            time.sleep(0.5)
        raise controlplane.StartError(f"node agent {name} did not become Ready:\n"
                                      f"{(self.root / 'logs' / f'node-{name}.log').read_text()[-3000:]}")

    def stop_node(self, name: str, *, delete: bool = True) -> None:
        """Stop a node agent (its pods' containers die with it) and, with ``delete``, remove its Node."""
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
        self.plane.stop()


def agent_image(tools: Path, mount: str) -> tuple[dict[str, Path], tuple[str, ...]]:
    """What the node agent needs to stand in for Anchorage's agent image: the host's installed agent CLIs
    (``anchorage agents install``, under ``tools``) bound at ``mount``, each CLI's ``bin`` on the PATH."""
    if not tools.is_dir():
        return {}, ()
    return {mount: tools}, tuple(f"{mount}/{d.name}/bin" for d in sorted(tools.glob("*@*")) if (d / "bin").is_dir())


def start(root: Path, binaries: Binaries, *, timeout: float = 180, audit_users: tuple[str, ...] = (),
          audit_groups: tuple[str, ...] = (), throughput: controlplane.Throughput = controlplane.Throughput()
          ) -> LocalCluster:
    """Start the control plane under ``root`` (add nodes with :meth:`LocalCluster.start_node`); the requests of
    ``audit_users`` and members of ``audit_groups`` go to its audit log; ``throughput``: the controllers' and the
    scheduler's rates (:class:`controlplane.Throughput`)."""
    return LocalCluster(controlplane.start(root, binaries, timeout=timeout, audit_users=audit_users,
                                           audit_groups=audit_groups, throughput=throughput))


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
    merged = merge_values(CHART_VALUES, values or {})
    config = helm_sdkpy.Configuration(namespace=namespace, kubeconfig=str(cluster.plane.admin_kubeconfig))
    result: dict[str, Any] = asyncio.run(helm_sdkpy.Install(config).run(release, str(chart), values=merged,
                                                                         wait=False, timeout=120))
    return result


def merge_values(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Helm values: ``extra`` merged into ``base`` (nested mappings merge, anything else replaces)."""
    out = dict(base)
    for key, value in extra.items():
        out[key] = merge_values(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
