"""Start the cluster fake on loopback and write a kubeconfig for it.

Called by ``anchorage dev cluster`` (``serve_forever``, when the real control plane is not built) and by
tests (``running_cluster``, an async context manager yielding the API server and the kubeconfig path;
``ClusterThread`` for synchronous callers). The kubeconfig carries a bearer token; with
``authenticate=True`` the fake answers 401 to a request without it, as an API server does.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import ssl
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp.test_utils
import kmock
import yaml

from anchorage_devcluster import pki
from anchorage_devcluster.apiserver import FakeApiServer
from anchorage_devcluster.kubelet import FakeKubelet
from anchorage_devcluster.pods import Simulate

T = TypeVar("T")


@dataclass
class Cluster:
    """A running fake: the API server, its kubelet (or None) and where its kubeconfig is."""

    api: FakeApiServer
    kubelet: FakeKubelet | None
    kubeconfig: Path
    url: str
    ca: Path | None = None  # the CA of an HTTPS fake (``authenticate=True``)


TOKEN = "anchorage-dev-fake"
READY = "ready (Ctrl-C stops it)"


def kubeconfig_text(url: str, token: str = TOKEN, ca: Path | None = None) -> str:
    """A kubeconfig pointing kubectl (and kopf) at ``url`` with a bearer token (and the CA of an HTTPS fake)."""
    cluster: dict[str, str] = {"server": url}
    if ca is not None:
        cluster["certificate-authority"] = str(ca)
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "anchorage-dev",
        "clusters": [{"name": "anchorage-dev", "cluster": cluster}],
        "users": [{"name": "anchorage-dev", "user": {"token": token}}],
        "contexts": [{"name": "anchorage-dev", "context": {"cluster": "anchorage-dev", "user": "anchorage-dev",
                                                          "namespace": "default"}}],
    }
    return yaml.safe_dump(doc, sort_keys=False)


def _tls_server(context: ssl.SSLContext) -> type[aiohttp.test_utils.RawTestServer]:
    """kmock's server class, listening with TLS."""

    class TlsServer(aiohttp.test_utils.RawTestServer):
        async def start_server(self, loop: asyncio.AbstractEventLoop | None = None, **kwargs: Any) -> None:
            await super().start_server(loop, ssl=context, **kwargs)

    return TlsServer


def load_crd_docs(crds_dir: Path) -> list[dict[str, Any]]:
    """The CRDs in a folder (every ``*.yaml``)."""
    docs: list[dict[str, Any]] = []
    for path in sorted(crds_dir.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


@contextlib.asynccontextmanager
async def running_cluster(kubeconfig: Path, *, port: int = 0, crds_dir: Path | None = None,
                          kubelet: bool = True, writable: tuple[Path, ...] = (),
                          namespaces: tuple[str, ...] = (), simulate: Simulate | None = None,
                          authenticate: bool = False) -> AsyncIterator[Cluster]:
    """Serve the fake on 127.0.0.1 for the duration of the ``async with`` block.

    ``authenticate``: over HTTPS (kubectl sends a bearer token only over TLS) with the kubeconfig's token
    required, as an API server does (:meth:`FakeApiServer._refused`).
    """
    api = FakeApiServer(token=TOKEN if authenticate else None)
    if crds_dir is not None:
        api.load_crds(load_crd_docs(crds_dir))
    for ns in namespaces:
        api.store.create(api.store.resource("", "namespaces"), None, {"metadata": {"name": ns}})
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    ca: Path | None = None
    server_cls: type[aiohttp.test_utils.RawTestServer] = aiohttp.test_utils.RawTestServer
    if authenticate:
        authority = pki.Authority(kubeconfig.parent / f"{kubeconfig.name}-pki")
        serving = authority.issue("fake-apiserver", "anchorage-fake-apiserver", server=True,
                                  hosts=("127.0.0.1", "localhost"))
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(serving.cert), str(serving.key))
        ca, server_cls = authority.pair.cert, _tls_server(context)
    async with api, kmock.Server(api, port=port or None, server_cls=server_cls) as server:
        url = f"{'https' if ca else 'http'}://{server.host}:{server.port}"
        kubeconfig.write_text(kubeconfig_text(url, ca=ca))
        runner = FakeKubelet(api.store, writable=writable, simulate=simulate) if kubelet else None
        if runner is not None:
            runner.start()
        try:
            yield Cluster(api, runner, kubeconfig, url, ca)
        finally:
            if runner is not None:
                await runner.stop()


#: What stops ``anchorage dev cluster``, the fake or the real one, cleanly (its programs stopped, its state removed).
#: SIGINT is handled, not left to Python's KeyboardInterrupt: a shell starts a background job with SIGINT ignored,
#: and Python keeps that.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def serve_forever(*, port: int, kubeconfig: Path, crds_dir: Path, store: str, kubelet: bool, note: str = "") -> None:
    """Run the fake until interrupted (``anchorage dev cluster``)."""
    writable = (Path(store.removeprefix("file://")).resolve(),) if store.startswith("file://") else ()
    for path in writable:
        path.mkdir(parents=True, exist_ok=True)

    async def main() -> None:
        async with running_cluster(kubeconfig.resolve(), port=port, crds_dir=crds_dir if crds_dir.is_dir() else None,
                                   kubelet=kubelet, writable=writable, namespaces=("anchorage-trials",)) as cluster:
            print(f"Kubernetes API fake (a mock, not a real API server) on {cluster.url}{note}", flush=True)
            print(f"export KUBECONFIG={cluster.kubeconfig}", flush=True)
            stop = asyncio.Event()
            for number in STOP_SIGNALS:
                asyncio.get_running_loop().add_signal_handler(number, stop.set)
            print(READY, flush=True)
            await stop.wait()

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C while it starts
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
