"""The operator's own watch (``anchorage.controller.watching.Watch``) against scripted API servers that misbehave.

* an exception the watch did not foresee (here: injected into its request) is logged with its traceback, and the
  watch resumes — the task never ends; an event handler that raises is logged and the next event handled;
* a server that ends every watch at once sees a few requests in the first seconds, then fewer (backoff after short
  clean ends; before: 6,410 requests in 2 s);
* a connection that goes silent is given up within the silence limit and the watch resumed from its version, and
  the server is asked to end each watch before that limit;
* through an ``https://`` proxy (TLS to the proxy, checked with the cluster's CA, the server's TLS inside it) the
  watch lists and watches as the API client's requests do.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes
import pytest
from aiohttp import web
from prometheus_client import REGISTRY

from anchorage.controller import kube, watching
from anchorage_devcluster import pki
from rawhttp import http_proxy

from .watch_task import running

Obj = dict[str, Any]
PATH = "/apis/batch/v1/namespaces/ns/jobs"


def _job(name: str, version: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}}


class Api:
    """A scripted API server: ``watch(request_number, params)`` writes a watch's answer; lists are one page."""

    def __init__(self, watch: Callable[[int, web.StreamResponse, dict[str, str]], Awaitable[None]]) -> None:
        self.watch = watch
        self.lists: list[float] = []
        self.watches: list[tuple[float, dict[str, str]]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        now = asyncio.get_running_loop().time()
        params = dict(request.query)
        if params.get("watch") != "true":
            self.lists.append(now)
            return web.json_response({"metadata": {"resourceVersion": "10"}, "items": [_job("listed", "10")]})
        self.watches.append((now, params))
        response = web.StreamResponse()
        await response.prepare(request)
        await self.watch(len(self.watches) - 1, response, params)
        return response


async def _event(response: web.StreamResponse, type_: str, obj: Obj) -> None:
    await response.write(json.dumps({"type": type_, "object": obj}).encode() + b"\n")


@contextlib.asynccontextmanager
async def _serving(api: Api, tls: ssl.SSLContext | None = None, **settings: Any) -> AsyncIterator[kube.Client]:
    app = web.Application()
    app.router.add_get(PATH, api.handle)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    configuration = kubernetes.client.Configuration()
    configuration.host = f"{'https' if tls else 'http'}://127.0.0.1:{runner.addresses[0][1]}"
    for key, value in settings.items():
        setattr(configuration, key, value)
    try:
        yield kube.Client(configuration)
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def _watching(client: kube.Client, events: list[tuple[str, str]], **options: Any) -> AsyncIterator[watching.Watch]:
    def record(type_: str, obj: Obj) -> None:
        if obj["metadata"]["name"] == "poison":
            raise KeyError("spec")
        events.append((type_, obj["metadata"]["name"]))

    async with (aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client.tls_context())) as session,  # as Watcher
                running(watching.Watch(client, session, PATH, "", record, **options)) as watch):
        yield watch


async def _until(predicate: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def _restarts(cause: str) -> float:
    return REGISTRY.get_sample_value("anchorage_operator_watch_restarts_total", {"kind": "jobs", "cause": cause}) or 0


async def test_an_unforeseen_exception_is_logged_and_the_watch_resumes(monkeypatch: pytest.MonkeyPatch,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    async def answer(number: int, response: web.StreamResponse, params: dict[str, str]) -> None:
        await _event(response, "ADDED", _job("poison", "11"))  # its handler raises: logged, the next one handled
        await _event(response, "ADDED", _job(f"job-{number}", str(12 + number)))
        await asyncio.sleep(30)

    api = Api(answer)
    calls = 0
    real_get = watching.Watch._get

    async def failing_once(self: watching.Watch, params: Any, timeout: Any) -> Any:
        nonlocal calls
        calls += 1
        if params.get("watch") == "true" and calls == 2:  # the first watch request
            raise RuntimeError("injected: a bug in the watch")
        return await real_get(self, params, timeout)

    monkeypatch.setattr(watching.Watch, "_get", failing_once)
    before = _restarts("unexpected")
    events: list[tuple[str, str]] = []
    with caplog.at_level(logging.WARNING, logger="anchorage.watching"):
        async with _serving(api) as client, _watching(client, events):
            await _until(lambda: ("ADDED", "job-0") in events, "the watch after the injected failure")
    assert events[0] == (watching.LISTED, "listed") and ("ADDED", "job-0") in events
    failed = [r for r in caplog.records if "failed unexpectedly" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info is not None and "injected" in failed[0].getMessage()
    poisoned = [r for r in caplog.records if "handling the ADDED event of poison" in r.getMessage()]
    assert poisoned and poisoned[0].exc_info is not None
    assert _restarts("unexpected") == before + 1
    assert len(api.lists) == 1  # it resumed from the listing's version


async def test_a_server_that_ends_every_watch_at_once_sees_a_few_requests_per_second(
        caplog: pytest.LogCaptureFixture) -> None:
    async def at_once(number: int, response: web.StreamResponse, params: dict[str, str]) -> None:
        return None

    api = Api(at_once)
    events: list[tuple[str, str]] = []
    with caplog.at_level(logging.WARNING, logger="anchorage.watching"):
        async with _serving(api) as client, _watching(client, events):
            await asyncio.sleep(4.0)
    times = [t for t, _ in api.watches]
    assert 3 <= len(times) <= 7, len(times)  # backoff 0.2, 0.5, 1, 2 s: ~5 in 4 s (before: thousands)
    assert all(later - earlier >= 0.15 for earlier, later in itertools.pairwise(times))
    assert len(api.lists) == 1 and all(p["resourceVersion"] == "10" for _, p in api.watches)  # resumed, not relisted
    assert sum("keeps ending the watch" in r.getMessage() for r in caplog.records) == 1


async def test_a_silent_connection_is_given_up_and_the_watch_resumed() -> None:
    async def silent(number: int, response: web.StreamResponse, params: dict[str, str]) -> None:
        if number == 0:
            await _event(response, "ADDED", _job("a", "11"))
            await asyncio.sleep(60)  # then nothing, and the connection stays open
        else:
            await _event(response, "ADDED", _job("b", "12"))
            await asyncio.sleep(60)

    api = Api(silent)
    events: list[tuple[str, str]] = []
    before = _restarts("silence")
    async with _serving(api) as client, _watching(client, events, silence=1.5, timeout=300):
        await _until(lambda: ("ADDED", "b") in events, "the watch after the silent connection", timeout=6)
    assert api.watches[1][1]["resourceVersion"] == "11"  # resumed from the last version seen
    assert 1.4 <= api.watches[1][0] - api.watches[0][0] < 3.5
    assert _restarts("silence") == before + 1
    assert watching.Watch(kube.Client(kubernetes.client.Configuration()), None, PATH, "",  # type: ignore[arg-type]
                          lambda *_: None, timeout=300).silence == watching.SILENCE_SECONDS == 60


async def test_the_server_is_asked_to_end_a_watch_before_the_silence_limit() -> None:
    async def short(number: int, response: web.StreamResponse, params: dict[str, str]) -> None:
        await asyncio.sleep(0.01)

    api = Api(short)
    async with _serving(api) as client, _watching(client, [], timeout=300):
        await _until(lambda: len(api.watches) >= 1, "a watch")
    assert api.watches[0][1]["timeoutSeconds"] == "50"


async def test_the_watch_goes_through_an_https_proxy(tmp_path: Path) -> None:
    async def one_event(number: int, response: web.StreamResponse, params: dict[str, str]) -> None:
        await _event(response, "ADDED", _job(f"via-proxy-{number}", "11"))
        await asyncio.sleep(30)

    authority = pki.Authority(tmp_path / "pki")
    contexts = []
    for name in ("server", "proxy"):
        pair = authority.issue(name, name, server=True, hosts=("127.0.0.1",))
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(pair.cert), str(pair.key))
        contexts.append(context)
    seen: list[bytes] = []
    proxy = http_proxy(seen, contexts[1])
    events: list[tuple[str, str]] = []
    try:
        async with _serving(Api(one_event), contexts[0], ssl_ca_cert=str(authority.pair.cert),
                            proxy=f"https://127.0.0.1:{proxy.getsockname()[1]}") as client, \
                _watching(client, events):
            await _until(lambda: ("ADDED", "via-proxy-0") in events, "the watch through the proxy")
    finally:
        proxy.close()
    assert events[0] == (watching.LISTED, "listed")
    assert seen and all(head.startswith(b"CONNECT 127.0.0.1:") for head in seen)
