"""``anchorage dev cluster``: a local cluster to try the operator on (the product finds this through the
``anchorage.dev`` entry point, so it works only where anchorage-devcluster is installed).

With the pinned Kubernetes binaries built (``make kube``) it starts what a managed cluster is: the real control
plane, ``nodes`` real nodes (kubelet, containerd, CNI, kube-proxy, kube-router as the NetworkPolicy engine, CoreDNS),
a registry holding Anchorage's images (built first by ``tools/images.py``, cached by content) and the project's S3
server as the store; it applies ``crds/`` and installs ``charts/anchorage`` from those images, so the operator and
the gateway run as pods, and prints the kubeconfig. ``kueue=True`` also installs Kueue (``anchorage_devcluster.kueue``:
its manager as a pod, with Admission Fair Sharing) and, with the chart, the chart's simple Kueue setup (a ClusterQueue
of :data:`KUEUE_PODS` pods and the LocalQueue ``anchorage``), so campaigns can name ``queueName: anchorage``.
``kubelet=False`` starts the control plane alone (no node).
Without the binaries — or with ``fake=True`` — it serves the HTTP-level API fake instead and says so.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from anchorage_devcluster import binaries, cluster, serving

TRIALS_NAMESPACE = "anchorage-trials"
REPO = Path(__file__).resolve().parents[2]


def cluster_command(*, port: int, kubeconfig: Path, crds_dir: Path, store: str, kubelet: bool, fake: bool = False,
                    chart: Path | None = None, nodes: int = 1, kueue: bool = False, echo: Any = print) -> None:
    """Run a local cluster until interrupted (see the module docstring)."""
    found = binaries.find()
    if kueue and (fake or isinstance(found, str) or not kubelet):
        raise SystemExit("error: --kueue needs the real control plane with nodes (Kueue's manager runs as a pod)")
    if fake or isinstance(found, str):
        why = "as asked (--fake)" if fake else f"because {found}"
        serving.serve_forever(port=port, kubeconfig=kubeconfig, crds_dir=crds_dir, store=store, kubelet=kubelet,
                              note=f", {why}")
        return
    if kubelet:
        _serve_nodes(found, kubeconfig=kubeconfig.resolve(), crds_dir=crds_dir, chart=chart, nodes=nodes, kueue=kueue,
                     echo=echo)
    else:
        _serve_plane(found, kubeconfig=kubeconfig.resolve(), crds_dir=crds_dir, echo=echo)


def _serve_plane(found: binaries.Binaries, *, kubeconfig: Path, crds_dir: Path, echo: Any) -> None:
    """The control plane alone (no node: nothing runs pods), on loopback."""
    root = kubeconfig.parent / "cluster"
    shutil.rmtree(root, ignore_errors=True)
    local = cluster.start(root, found)
    try:
        echo(f"Kubernetes {binaries.KUBE_VERSION} control plane on {local.plane.url} (etcd, kube-apiserver, "
             f"controller manager, scheduler; no node; logs in {root / 'logs'})")
        kubeconfig.write_text(local.plane.admin_kubeconfig.read_text())
        echo(f"export KUBECONFIG={kubeconfig}")
        if crds_dir.is_dir():
            cluster.apply_crds(local, crds_dir)
        _namespace(local)
        echo(serving.READY)
        _wait_for_signal()
    finally:
        local.stop()


#: The pods the simple Kueue setup of ``--kueue`` admits at once (the chart's ``kueue.clusterQueue.quota.pods``).
KUEUE_PODS = 4
#: Admission Fair Sharing of the dev cluster's Kueue: usage sampled every 10 s, halved every 10 minutes.
KUEUE_FAIR_SHARING = {"usageHalfLifeTime": "10m", "usageSamplingInterval": "10s"}


def _serve_nodes(found: binaries.Binaries, *, kubeconfig: Path, crds_dir: Path, chart: Path | None, nodes: int,
                 kueue: bool, echo: Any) -> None:
    """Real nodes, Anchorage's images in the cluster's registry, the store as a pod and the chart installed."""
    from anchorage_devcluster import realnode, s3server

    s3 = s3server.find()
    problem = realnode.missing_requirements() or (s3 if isinstance(s3, str) else None)
    if problem is not None:
        raise SystemExit(f"error: a cluster with nodes cannot start here: {problem}\n"
                         "(--no-kubelet starts the control plane alone; --fake the API fake)")
    echo("building Anchorage's images (tools/images.py: cached by content, tens of minutes the first time) ...")
    images = build_images()
    root = kubeconfig.parent / "cluster"
    shutil.rmtree(root, ignore_errors=True)
    names = tuple(f"anchorage-node-{i}" for i in range(1, nodes + 1))
    local, pushed, store = cluster.bring_up(root, found, images=images, nodes=names, s3_binary=Path(str(s3)))
    try:
        kubeconfig.write_text(local.plane.admin_kubeconfig.read_text())
        registry = local.registry.address if local.registry is not None else "-"
        echo(f"Kubernetes {binaries.KUBE_VERSION}: control plane on {local.plane.url}, nodes {', '.join(names)} "
             f"(kubelet, containerd, CNI, kube-proxy, kube-router, CoreDNS), registry {registry}; logs in "
             f"{root / 'logs'}")
        echo(f"export KUBECONFIG={kubeconfig}")
        if crds_dir.is_dir():
            cluster.apply_crds(local, crds_dir)
        echo(f"store: {store.uri} on the S3 server in namespace anchorage-store ({store.host_endpoint} from here: "
             f"AWS_ACCESS_KEY_ID={store.access_key} AWS_SECRET_ACCESS_KEY={store.secret_key})")
        if kueue:
            from anchorage_devcluster import kueue as kueue_addon

            image = kueue_addon.install(local, fair_sharing=KUEUE_FAIR_SHARING)
            echo(f"Kueue {binaries.KUEUE_VERSION} installed (its manager {image} in namespace kueue-system)")
        if chart is not None and chart.is_dir():
            cluster.store_secret(local, store, "anchorage")
            queues = {"kueue": {"enabled": True, "clusterQueue": {"quota": {"pods": KUEUE_PODS}, "fairSharing": True}}} \
                if kueue else {}
            cluster.install_chart(local, chart, values=cluster.merge_values(
                cluster.release_values(pushed, store, TRIALS_NAMESPACE), {"crds": {"enabled": False}, **queues}))
            cluster.store_secret(local, store, TRIALS_NAMESPACE)  # the chart made that namespace
            echo("chart installed (release anchorage, namespace anchorage; its operator and gateway run as pods): "
                 "kubectl apply -n anchorage -f examples/trial.yaml")
            if kueue:
                echo(f"Kueue: ClusterQueue anchorage ({KUEUE_PODS} pods), LocalQueue anchorage in {TRIALS_NAMESPACE}: "
                     "a campaign with spec.queueName: anchorage is admitted through it")
        echo(serving.READY)
        _wait_for_signal()
    finally:
        local.stop()


def build_images() -> dict[str, str]:
    """Anchorage's images, built (or found, cached by content) by the repository's ``tools/images.py`` (``anchorage
    images build --json``: progress on stderr, the local tags by ``images/`` folder on stdout)."""
    names = ("agent-base", "verifier", "operator", "tasks")
    done = subprocess.run([sys.executable, str(REPO / "tools" / "images.py"), "build", *names, "--json"],
                          stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"error: tools/images.py could not build the images (exit {done.returncode}); run `make "
                         "images` to see why")
    tags: dict[str, str] = json.loads(done.stdout)
    return tags


def _namespace(local: cluster.LocalCluster) -> None:
    local.plane.kubectl("create", "namespace", TRIALS_NAMESPACE, check=False)
    local.plane.kubectl("label", "namespace", TRIALS_NAMESPACE, "--overwrite",
                        "pod-security.kubernetes.io/enforce=restricted")


def _wait_for_signal() -> None:
    stop = False

    def handler(*_: object) -> None:
        nonlocal stop
        stop = True

    for number in serving.STOP_SIGNALS:
        signal.signal(number, handler)
    while not stop:
        time.sleep(0.5)
