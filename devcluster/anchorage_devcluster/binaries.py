"""Where the pinned Kubernetes binaries are: the versions ``tools/kube/`` builds and the cache they land in.

Used by ``controlplane`` and ``realnode`` (to start them), ``cli`` (``anchorage dev cluster`` falls back to the fake
without them) and the tests' session fixture (which skips with :func:`find`'s reason). The versions
here must equal the ``require`` lines of ``tools/kube/*/go.mod`` (``tests/kube/test_binaries.py`` checks);
``tools/kube/build.sh`` builds into ``<cache>/kube/<KUBE_VERSION>/`` (control plane, kubelet, kube-proxy),
``<cache>/etcd/<ETCD_VERSION>/``, ``<cache>/registry/<REGISTRY_VERSION>/`` and, keyed by their version and a hash of
their build folder (:func:`source_key`, the same as build.sh's ``sources``), ``<cache>/coredns/``,
``<cache>/kube-router/``, ``<cache>/pause/`` and ``<cache>/kueue/`` (Kueue's manager and the manifests of its module's
``config/default``, rendered by ``kubectl kustomize`` at build time: :func:`kueue_paths`).
``<cache>/kube-router/``, ``<cache>/pause/`` and the tests' ``<cache>/kstatus/`` (:func:`kstatus`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

KUBE_VERSION = "v1.34.4"
ETCD_VERSION = "v3.6.16"
COREDNS_VERSION = "v1.14.2"
KUBE_ROUTER_VERSION = "v2.1.0"
REGISTRY_VERSION = "v3.1.2"
KUEUE_VERSION = "v0.17.0"
KSTATUS_VERSION = "v0.37.2"  # sigs.k8s.io/cli-utils: kstatus, which the tests hold the operator's statuses to
KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet", "kube-proxy")
GO_FALLBACK = Path("/usr/local/go/bin/go")
TOOLS = Path(__file__).resolve().parents[1].parent / "tools" / "kube"


def cache_root() -> Path:
    """``$ANCHORAGE_CACHE``, else ``$XDG_CACHE_HOME/anchorage``, else ``~/.cache/anchorage``."""
    if os.environ.get("ANCHORAGE_CACHE"):
        return Path(os.environ["ANCHORAGE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "anchorage"


@dataclass(frozen=True)
class Binaries:
    """Paths of the control plane's programs (all present and executable)."""

    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path
    kubelet: Path
    kube_proxy: Path
    etcd: Path
    kube_router: Path
    coredns: Path
    pause: Path
    registry: Path

    @property
    def folder(self) -> Path:
        """The folder of the Kubernetes commands (put it first on PATH for this kubectl)."""
        return self.kubectl.parent


def kube_dir() -> Path:
    return cache_root() / "kube" / KUBE_VERSION


def etcd_dir() -> Path:
    return cache_root() / "etcd" / ETCD_VERSION


def source_key(module: str) -> str:
    """The hash of a build folder of ``tools/kube`` that keys its cached binary (``sources`` in build.sh)."""
    folder = TOOLS / module
    digest = hashlib.sha256()
    names = sorted(p.name for p in folder.iterdir() if p.name in ("go.mod", "go.sum") or p.suffix == ".go")
    for name in sorted(names, key=lambda n: n.encode()):
        digest.update(name.encode() + b"\n" + (folder / name).read_bytes())
    return digest.hexdigest()[:10]


def node_paths() -> dict[str, Path]:
    """Where the real node's own programs are built to."""
    root = cache_root()
    return {"kube-router": root / "kube-router" / f"{KUBE_ROUTER_VERSION}-{source_key('kube-router')}" / "kube-router",
            "coredns": root / "coredns" / f"{COREDNS_VERSION}-{source_key('coredns')}" / "coredns",
            "pause": root / "pause" / source_key("pause") / "pause",
            "registry": root / "registry" / f"{REGISTRY_VERSION}-{source_key('registry')}" / "registry"}


def kueue_paths() -> dict[str, Path]:
    """Where ``tools/kube/build.sh`` puts Kueue's manager (``kueue``) and its module's rendered manifests
    (``manifests``: CRDs, RBAC, webhooks, the manager's Deployment)."""
    folder = cache_root() / "kueue" / f"{KUEUE_VERSION}-{source_key('kueue')}"
    return {"kueue": folder / "kueue", "manifests": folder / "manifests.yaml"}


def find_kueue() -> dict[str, Path] | str:
    """Kueue's build (:func:`kueue_paths`), or a sentence saying it is missing and how to get it."""
    paths = kueue_paths()
    missing = [str(p) for p in paths.values() if not p.exists()]
    if not missing:
        return paths
    return (f"Kueue {KUEUE_VERSION} is not built ({', '.join(missing)} missing): run `make kube` "
            "(tools/kube/build.sh builds it from its Go module, once)")


def kstatus() -> Path | str:
    """The tests' kstatus program (``tools/kube/kstatus``: cli-utils' status of each object of a list on stdin), or a
    sentence saying how to build it."""
    path = cache_root() / "kstatus" / f"{KSTATUS_VERSION}-{source_key('kstatus')}" / "kstatus"
    if os.access(path, os.X_OK):
        return path
    return f"the kstatus program is not built ({path} missing): run `make kube` (tools/kube/build.sh builds it)"


def find() -> Binaries | str:
    """The binaries, or a sentence saying what is missing and how to get it."""
    paths = {name: kube_dir() / name for name in KUBE_COMMANDS} | {"etcd": etcd_dir() / "etcd"} | node_paths()
    missing = [str(path) for path in paths.values() if not os.access(path, os.X_OK)]
    if not missing:
        return Binaries(*(paths[name] for name in (*KUBE_COMMANDS, "etcd", "kube-router", "coredns", "pause",
                                                   "registry")))
    go = shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.exists() else None)
    how = ("run `make kube` (tools/kube/build.sh builds them with Go and the Go module proxy, a few minutes once)"
           if go else "Go is not installed, so tools/kube/build.sh cannot build them: install Go >= 1.24, then "
           "run `make kube`")
    return f"the Kubernetes {KUBE_VERSION} binaries are not built ({', '.join(missing)} missing): {how}"
