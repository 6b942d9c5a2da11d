"""A fault-injecting HTTP proxy in front of moto's S3 server (test helper, not a fixture module).

Rules are consumed in order by the requests they match: answer with an S3 error status (5xx,
``SlowDown`` throttling), reset the connection after reading part of the request body (a reset in
the middle of an upload), or corrupt the body of a response (a bad download).
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from anchorage.gateway import BackgroundServer

HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "expect", "keep-alive"}


@dataclass
class Fault:
    kind: str  # "status" | "reset" | "corrupt"
    method: str | None = None
    query_has: str | None = None
    status: int = 503
    code: str = "SlowDown"
    after_bytes: int = 0
    times: int = 1

    def matches(self, request: web.Request) -> bool:
        return ((self.method is None or request.method == self.method)
                and (self.query_has is None or self.query_has in request.query_string))


class FaultProxy:
    """Forwards everything to ``target`` except what a queued :class:`Fault` says."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self.injected: list[str] = []
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

    def _take(self, request: web.Request) -> Fault | None:
        with self._lock:
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
        return await self._forward(request, corrupt=fault is not None and fault.kind == "corrupt")

    async def _forward(self, request: web.Request, *, corrupt: bool) -> web.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        body = await request.read()
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
