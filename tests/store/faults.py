"""A fault-injecting HTTP proxy in front of an S3 server (the real one, or moto) — a test helper, not a fixture module.

Rules are consumed in order by the requests they match: answer with an S3 error status (5xx, ``SlowDown``
throttling, ``501 NotImplemented``), reset the connection after reading part of the request body (a reset in the
middle of an upload), forward the request and then reset the connection (the server did it, the answer is lost),
flip a byte of the request body on its way to the server (which its checksum must catch) or of a response body
(a bad download). ``chaos(rate)`` adds random faults on top: that share of all requests answered ``503 SlowDown``
or reset half of the time each. Every request is logged in ``seen`` (method, path and query) and
``headers``.
"""

from __future__ import annotations

import io
import random
import threading
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from anchorage.gateway import BackgroundServer

HOP_BY_HOP = {"content-length", "transfer-encoding", "connection", "expect", "keep-alive"}
"""Not forwarded (aiohttp sets its own); ``Host`` is (a real server checks the signature, which covers it)."""


@dataclass
class Fault:
    kind: str  # "status" | "reset" | "corrupt" | "corrupt_request" | "lose_answer"
    method: str | None = None
    query_has: str | None = None
    path_has: str | None = None
    header: str | None = None  # only requests that carry this header
    status: int = 503
    code: str = "SlowDown"
    after_bytes: int = 0
    times: int = 1

    def matches(self, request: web.Request) -> bool:
        return ((self.method is None or request.method == self.method)
                and (self.query_has is None or self.query_has in request.query_string)
                and (self.path_has is None or self.path_has in request.path)
                and (self.header is None or self.header in request.headers))


class FaultProxy:
    """Forwards everything to ``target`` except what a queued :class:`Fault` says."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self.injected: list[str] = []
        self.seen: list[str] = []
        self.headers: list[dict[str, str]] = []  # of every request, in order
        self._chaos: tuple[float, random.Random] | None = None
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.server = BackgroundServer(app, name="s3-fault-proxy").start()
        assert self.server.url is not None
        self.url: str = self.server.url

    def add(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
            self._chaos = None

    def chaos(self, rate: float, seed: int = 0) -> None:
        """From now on, a ``rate`` share of all requests (chosen at random, reproducibly) fails: ``503 SlowDown`` or
        a connection reset (before the request reaches the server), half of the time each."""
        with self._lock:
            self._chaos = (rate, random.Random(seed))

    def _take(self, request: web.Request) -> Fault | None:
        with self._lock:
            self.seen.append(f"{request.method} {request.path_qs}")
            self.headers.append(dict(request.headers))
            if self._chaos is not None and self._chaos[1].random() < self._chaos[0]:
                fault = Fault("status" if self._chaos[1].random() < 0.5 else "reset")
                self.injected.append(f"{fault.kind} {request.method} {request.path_qs}")
                return fault
            for fault in self._faults:
                if fault.times > 0 and fault.matches(request):
                    fault.times -= 1
                    self.injected.append(f"{fault.kind} {request.method} {request.path_qs}")
                    return fault
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        fault = self._take(request)
        if fault is not None and fault.kind == "reset":
            await request.content.read(fault.after_bytes)
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=500)
        if fault is not None and fault.kind == "status":
            await request.read()
            xml = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{fault.code}</Code>'
                   f"<Message>injected by the test proxy</Message></Error>")
            return web.Response(status=fault.status, body=xml.encode(), content_type="application/xml")
        kind = fault.kind if fault is not None else None
        response = await self._forward(request, corrupt=kind == "corrupt", corrupt_request=kind == "corrupt_request")
        if kind == "lose_answer":
            assert request.transport is not None
            request.transport.abort()
        return response

    async def _forward(self, request: web.Request, *, corrupt: bool, corrupt_request: bool = False) -> web.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        body = await request.read()
        if corrupt_request and body:
            body = bytes([body[0] ^ 0xFF]) + body[1:]
        async with aiohttp.ClientSession(auto_decompress=False) as session, session.request(
            request.method, self.target + request.raw_path, headers=headers, data=io.BytesIO(body),
            allow_redirects=False,
        ) as upstream:
            data = await upstream.read()
            out = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP}
            if request.method == "HEAD":
                response = web.Response(status=upstream.status, headers=out)
                if "Content-Length" in upstream.headers:
                    response.headers["Content-Length"] = upstream.headers["Content-Length"]
                return response
            if corrupt and data:
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            return web.Response(status=upstream.status, headers=out, body=data)

    def stop(self) -> None:
        self.server.stop()
