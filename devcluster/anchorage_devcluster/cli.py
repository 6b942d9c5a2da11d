"""``anchorage dev cluster``: a local cluster to try the operator on (the product finds this through the
``anchorage.dev`` entry point, so it works only where anchorage-devcluster is installed).

With the pinned Kubernetes binaries built (``make kube``) it starts the real control plane, one sandbox
node agent, applies ``crds/``, creates the trials namespace (PodSecurity ``restricted`` enforced), installs
``charts/anchorage`` when the Helm library is there, and prints two kubeconfigs: the admin's and one with
a token of the chart's operator ServiceAccount (run ``anchorage operator`` with it and the chart's RBAC is
what it gets). Without the binaries — or with ``fake=True`` — it serves the HTTP-level API fake instead and
says so.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from anchorage_devcluster import binaries, cluster, serving

TRIALS_NAMESPACE = "anchorage-trials"


def cluster_command(*, port: int, kubeconfig: Path, crds_dir: Path, store: str, kubelet: bool, fake: bool = False,
                    chart: Path | None = None, echo: Any = print) -> None:
    """Run a local cluster until interrupted (see the module docstring)."""
    found = binaries.find()
    if fake or isinstance(found, str):
        why = "as asked (--fake)" if fake else f"because {found}"
        serving.serve_forever(port=port, kubeconfig=kubeconfig, crds_dir=crds_dir, store=store, kubelet=kubelet,
                              note=f", {why}")
        return
    _serve_real(found, kubeconfig=kubeconfig.resolve(), crds_dir=crds_dir, store=store, kubelet=kubelet,
                chart=chart, echo=echo)


def _serve_real(found: binaries.Binaries, *, kubeconfig: Path, crds_dir: Path, store: str, kubelet: bool,
                chart: Path | None, echo: Any) -> None:
    root = kubeconfig.parent / "cluster"
    shutil.rmtree(root, ignore_errors=True)
    writable = (Path(store.removeprefix("file://")).resolve(),) if store.startswith("file://") else ()
    for path in writable:
        path.mkdir(parents=True, exist_ok=True)
    local = cluster.start(root, found)
    try:
        echo(f"Kubernetes {binaries.KUBE_VERSION} control plane on {local.plane.url} (etcd, kube-apiserver, "
             f"controller manager, scheduler; logs in {root / 'logs'})")
        kubeconfig.write_text(local.plane.admin_kubeconfig.read_text())
        echo(f"export KUBECONFIG={kubeconfig}")
        if kubelet:
            from anchorage import agents

            binds, bins = cluster.agent_image(agents.tools_root(), agents.AGENTS_MOUNT)
            local.start_node("anchorage-node-1", writable=writable, image_binds=binds, image_path=bins)
            echo("node anchorage-node-1: the sandbox node agent (runs pods under bubblewrap; images are not used)")
        if crds_dir.is_dir():
            cluster.apply_crds(local, crds_dir)
        operator = kubeconfig.with_name("operator.kubeconfig")
        echo(_chart(local, chart, operator))
        echo(serving.READY)
        _wait_for_signal()
    finally:
        local.stop()


def _namespace(local: cluster.LocalCluster) -> None:
    local.plane.kubectl("create", "namespace", TRIALS_NAMESPACE, check=False)
    local.plane.kubectl("label", "namespace", TRIALS_NAMESPACE, "--overwrite",
                        "pod-security.kubernetes.io/enforce=restricted")


def _chart(local: cluster.LocalCluster, chart: Path | None, operator: Path) -> str:
    if chart is None or not chart.is_dir():
        _namespace(local)
        return "no chart installed (pass --chart charts/anchorage to install it and get the operator's kubeconfig)"
    try:
        import helm_sdkpy  # noqa: F401
    except ImportError:
        _namespace(local)
        return ("no chart installed: the Helm library is missing (pip install --ignore-requires-python helm-sdkpy); "
                "the admin kubeconfig above works for everything")
    cluster.install_chart(local, chart, values={"crds": {"enabled": False}})
    local.operator_kubeconfig(operator)
    return (f"chart installed (release anchorage, namespace anchorage); the operator's ServiceAccount:\n"
            f"  KUBECONFIG={operator} anchorage operator -n anchorage --trials-namespace {TRIALS_NAMESPACE} ...")


def _wait_for_signal() -> None:
    stop = False

    def handler(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, handler)
    with contextlib.suppress(KeyboardInterrupt):
        while not stop:
            time.sleep(0.5)
