"""Where the pinned Kubernetes binaries are: the versions ``tools/kube/`` builds and the cache they land in.

Used by ``controlplane`` (to start them), ``cli`` (``anchorage dev cluster`` falls back to the fake
without them) and the tests' session fixture (which skips with :func:`find`'s reason). The versions
here must equal the ``require`` lines of ``tools/kube/*/go.mod`` (``tests/kube/test_binaries.py`` checks);
``tools/kube/build.sh`` builds into ``<cache>/kube/<KUBE_VERSION>/`` and ``<cache>/etcd/<ETCD_VERSION>/``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

KUBE_VERSION = "v1.34.4"
ETCD_VERSION = "v3.6.16"
KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
GO_FALLBACK = Path("/usr/local/go/bin/go")


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
    etcd: Path

    @property
    def folder(self) -> Path:
        """The folder of the Kubernetes commands (put it first on PATH for this kubectl)."""
        return self.kubectl.parent


def kube_dir() -> Path:
    return cache_root() / "kube" / KUBE_VERSION


def etcd_dir() -> Path:
    return cache_root() / "etcd" / ETCD_VERSION


def find() -> Binaries | str:
    """The binaries, or a sentence saying what is missing and how to get it."""
    paths = {name: kube_dir() / name for name in KUBE_COMMANDS} | {"etcd": etcd_dir() / "etcd"}
    missing = [str(path) for path in paths.values() if not os.access(path, os.X_OK)]
    if not missing:
        return Binaries(*(paths[name] for name in (*KUBE_COMMANDS, "etcd")))
    go = shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.exists() else None)
    how = ("run `make kube` (tools/kube/build.sh builds them with Go and the Go module proxy, a few minutes once)"
           if go else "Go is not installed, so tools/kube/build.sh cannot build them: install Go >= 1.24, then "
           "run `make kube`")
    return f"the Kubernetes {KUBE_VERSION} control plane is not built ({', '.join(missing)} missing): {how}"
