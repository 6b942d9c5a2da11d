"""Start the cluster fake on loopback and write a kubeconfig for it.

Called by ``anchorage dev cluster`` (``serve_forever``) and by tests (``running_cluster``, an async
context manager yielding the API server and the kubeconfig path).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import kmock
import yaml

from anchorage.devcluster.apiserver import FakeApiServer
from anchorage.devcluster.kubelet import FakeKubelet

T = TypeVar("T")


@dataclass
class Cluster:
    """A running fake: the API server, its kubelet (or None) and where its kubeconfig is."""

    api: FakeApiServer
    kubelet: FakeKubelet | None
    kubeconfig: Path
    url: str


def kubeconfig_text(url: str) -> str:
    """A kubeconfig pointing kubectl (and kopf) at ``url`` with no credentials."""
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "anchorage-dev",
        "clusters": [{"name": "anchorage-dev", "cluster": {"server": url}}],
        "users": [{"name": "anchorage-dev", "user": {"token": "anchorage-dev-fake"}}],
        "contexts": [{"name": "anchorage-dev", "context": {"cluster": "anchorage-dev", "user": "anchorage-dev",
                                                          "namespace": "default"}}],
    }
    return yaml.safe_dump(doc, sort_keys=False)


def load_crd_docs(crds_dir: Path) -> list[dict[str, Any]]:
    """The CRDs in a folder (every ``*.yaml``)."""
    docs: list[dict[str, Any]] = []
    for path in sorted(crds_dir.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


@contextlib.asynccontextmanager
async def running_cluster(kubeconfig: Path, *, port: int = 0, crds_dir: Path | None = None,
                          kubelet: bool = True, writable: tuple[Path, ...] = (),
                          namespaces: tuple[str, ...] = (), simulate: bool = False) -> AsyncIterator[Cluster]:
    """Serve the fake on 127.0.0.1 for the duration of the ``async with`` block."""
    api = FakeApiServer()
    if crds_dir is not None:
        api.load_crds(load_crd_docs(crds_dir))
    for ns in namespaces:
        api.store.create(api.store.resource("", "namespaces"), None, {"metadata": {"name": ns}})
    async with api, kmock.Server(api, port=port or None) as server:
        url = f"http://{server.host}:{server.port}"
        kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        kubeconfig.write_text(kubeconfig_text(url))
        runner = FakeKubelet(api.store, writable=writable, simulate=simulate) if kubelet else None
        if runner is not None:
            runner.start()
        try:
            yield Cluster(api, runner, kubeconfig, url)
        finally:
            if runner is not None:
                await runner.stop()


def serve_forever(*, port: int, kubeconfig: Path, crds_dir: Path, store: str, kubelet: bool) -> None:
    """Run the fake until interrupted (``anchorage dev cluster``)."""
    writable = (Path(store.removeprefix("file://")).resolve(),) if store.startswith("file://") else ()
    for path in writable:
        path.mkdir(parents=True, exist_ok=True)

    async def main() -> None:
        async with running_cluster(kubeconfig.resolve(), port=port, crds_dir=crds_dir if crds_dir.is_dir() else None,
                                   kubelet=kubelet, writable=writable, namespaces=("anchorage-trials",)) as cluster:
            print(f"Kubernetes API fake on {cluster.url}", flush=True)
            print(f"export KUBECONFIG={cluster.kubeconfig}", flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


class ClusterThread:
    """The fake served from a background thread (for synchronous callers: tests, benchmarks).

    ``with ClusterThread(kubeconfig, ...) as cluster:`` — ``cluster.api`` may be touched from the
    caller's thread only through :meth:`call` (it runs a function on the fake's event loop).
    """

    def __init__(self, kubeconfig: Path, **options: Any) -> None:
        self.kubeconfig, self.options = kubeconfig, options
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="anchorage-fake-cluster", daemon=True)
        self.cluster: Cluster | None = None
        self.error: BaseException | None = None

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported to the caller by __enter__
            self.error = exc
            self._ready.set()
        finally:
            self.loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with running_cluster(self.kubeconfig, **self.options) as cluster:
            self.cluster = cluster
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> Cluster:
        self._thread.start()
        self._ready.wait(30)
        if self.cluster is None:
            raise RuntimeError(f"the cluster fake did not start: {self.error!r}")
        return self.cluster

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the fake's loop and return its result (thread-safe access to the fake)."""
        async def run() -> T:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)
