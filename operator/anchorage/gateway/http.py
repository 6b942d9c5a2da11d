"""The gateway's HTTP/1.1 server for its model API: asyncio protocols, requests parsed by httptools.

Used by :mod:`anchorage.gateway.server` (its handlers take a :class:`Request` and give a :class:`Reply`,
or write a stream themselves through :class:`Channel`) and served by
:class:`anchorage.gateway.running.BackgroundServer` on TCP and/or a unix socket. It replaces aiohttp's
server on the hot path: no request, header multidict or response writer objects per request — one
``transport.write`` for a whole answer, headers made of bytes. (The admin listener stays on aiohttp.)

What it does: keep-alive and pipelined requests (answered in order, one at a time per connection),
content-length and chunked request bodies (at most ``max_body`` bytes, else 413), ``Expect:
100-continue``, HEAD (headers only), HTTP/1.0 clients (their connection closes after the answer), an
``Upgrade`` request is handed to the handler once and its connection closed after the answer, a malformed
request gets one 400 JSON error and the connection closes. Idle keep-alive connections close after
:data:`KEEPALIVE_SECONDS`. When a handler fails unexpectedly the client gets a 500 JSON error (logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from http import HTTPStatus
from pathlib import Path
from typing import cast
from urllib.parse import unquote

import httptools

from anchorage.gateway import fastjson

log = logging.getLogger("anchorage.gateway")

KEEPALIVE_SECONDS = 75.0
SWEEP_SECONDS = 5.0
MAX_HEAD_BYTES = 64 * 1024
MAX_QUEUED = 16  # pipelined requests parsed ahead of the one being answered (then reading pauses)
_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}


def status_line(status: int) -> bytes:
    return b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b"Unknown"))


class _Clock:
    """The ``Date`` header line, made once per second."""

    def __init__(self) -> None:
        self._second = 0
        self._line = b""

    def line(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._line = b"Date: " + formatdate(now, usegmt=True).encode() + b"\r\n"
        return self._line


CLOCK = _Clock()


class Request:
    """One parsed request: method, path (percent-decoded, no query), the target as sent, headers, body."""

    __slots__ = ("body", "channel", "headers", "keep_alive", "method", "path", "target", "upgrade", "version")

    def __init__(self, channel: Channel, method: str, target: str, headers: dict[bytes, bytes], body: bytes,
                 version: str, keep_alive: bool, upgrade: bool) -> None:
        self.channel = channel
        self.method = method
        self.target = target  # path and query string as the client sent them (forwarded as is)
        path = target.split("?", 1)[0]
        self.path = unquote(path) if "%" in path else path
        self.headers = headers  # lower-cased names; a repeated header's values joined by ", "
        self.body = body
        self.version = version
        self.keep_alive = keep_alive
        self.upgrade = upgrade

    def header(self, name: bytes) -> str | None:
        """The value of header ``name`` (lower-case bytes), decoded as Latin-1."""
        value = self.headers.get(name)
        return None if value is None else value.decode("latin-1")


class Reply:
    """A whole answer: status, extra header lines (complete ``Name: value\\r\\n`` bytes), body."""

    __slots__ = ("body", "close", "headers", "status")

    def __init__(self, status: int, body: bytes = b"", headers: bytes = b"", *, close: bool = False) -> None:
        self.status, self.body, self.headers, self.close = status, body, headers, close


JSON_TYPE = b"Content-Type: application/json; charset=utf-8\r\n"


def json_reply(status: int, data: object, headers: bytes = b"", *, close: bool = False) -> Reply:
    return Reply(status, fastjson.dumps(data), JSON_TYPE + headers, close=close)


Handler = Callable[[Request], Awaitable[Reply | None]]


class Channel(asyncio.Protocol):
    """One client connection: parses requests, runs the handler for each in turn, writes the answers."""

    def __init__(self, server: HttpServer) -> None:
        self._server = server
        self._loop = server.loop
        self._parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self._queue: deque[Request] = deque()
        self._task: asyncio.Task[None] | None = None
        self._url: list[bytes] = []
        self._headers: dict[bytes, bytes] = {}
        self._body: list[bytes] = []
        self._body_size = 0
        self._head_size = 0
        self._in_head = False
        self._refused = False  # an error was answered: nothing more is read
        self._paused_reading = False
        self._write_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self.last_active = self._loop.time()
        self.streaming = False  # a handler writes a stream through this channel

    # ----- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (uvloop's transports do not subclass asyncio's)
        self._server.channels.add(self)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self.last_active = self._loop.time()
        if self._in_head:
            self._head_size += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refused = True  # what follows is not HTTP: the upgrade request is answered, then we close
        except httptools.HttpParserError as exc:
            self._refuse(400, "invalid_request", f"malformed HTTP request: {exc}")
            return
        if self._in_head and self._head_size > MAX_HEAD_BYTES:
            self._refuse(431, "invalid_request", f"request line and headers larger than {MAX_HEAD_BYTES} bytes")

    def connection_lost(self, exc: Exception | None) -> None:
        self._server.channels.discard(self)
        self.transport = None
        self._wake_drain()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_drain()

    # ----- httptools callbacks -------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._url, self._headers, self._body, self._body_size = [], {}, [], 0
        self._in_head, self._head_size = True, 0

    def on_url(self, url: bytes) -> None:
        self._url.append(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.lower()
        known = self._headers.get(key)
        self._headers[key] = value if known is None else known + b", " + value

    def on_headers_complete(self) -> None:
        self._in_head = False
        length = self._headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self._server.max_body:
            self._too_large()
            return
        if self._headers.get(b"expect", b"").lower() == b"100-continue" and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        if self._refused:
            return
        self._body_size += len(body)
        if self._body_size > self._server.max_body:
            self._too_large()
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._refused:
            return
        self._enqueue(self._request())

    # ----- requests ------------------------------------------------------------------------------

    def _request(self) -> Request:
        parser = self._parser
        upgrade = parser.should_upgrade()
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        target = (self._url[0] if len(self._url) == 1 else b"".join(self._url)).decode("latin-1")
        return Request(self, parser.get_method().decode("latin-1"), target, self._headers, body,
                       parser.get_http_version(), parser.should_keep_alive() and not upgrade, upgrade)

    def _enqueue(self, request: Request) -> None:
        self._queue.append(request)
        if self._task is None:
            self._task = self._loop.create_task(self._serve())
        elif len(self._queue) >= MAX_QUEUED and self.transport is not None and not self._paused_reading:
            self._paused_reading = True
            self.transport.pause_reading()

    async def _serve(self) -> None:
        """Answer the queued requests in order (the task lives while there are any)."""
        handler = self._server.handler
        try:
            while self._queue:
                request = self._queue.popleft()
                if isinstance(request, _Refusal):
                    if self.transport is not None:
                        self.transport.write(request.raw)
                    self._close_after()
                    break
                if self._paused_reading and len(self._queue) < MAX_QUEUED // 2 and self.transport is not None:
                    self._paused_reading = False
                    self.transport.resume_reading()
                try:
                    reply = await handler(request)
                except Exception:
                    log.exception("the gateway failed answering %s %s", request.method, request.path)
                    if self.streaming and self.transport is not None:  # half a stream went out: break it
                        self.transport.abort()
                    reply = json_reply(500, {"error": {"type": "internal_error", "source": "anchorage-gateway",
                                                       "message": "the gateway failed (see its log)"}}, close=True)
                self.streaming = False
                self.last_active = self._loop.time()
                transport = self.transport
                if transport is None or transport.is_closing():
                    self._queue.clear()
                    break
                if reply is not None:
                    self.write_reply(reply, request)
                    if reply.close:
                        self._close_after()
                        break
                if not request.keep_alive:
                    self._close_after()
                    break
        finally:
            self._task = None

    def write_reply(self, reply: Reply, request: Request) -> None:
        """Write a whole answer (headers only for HEAD)."""
        transport = self.transport
        if transport is None:
            return
        body = reply.body
        close = reply.close or not request.keep_alive
        head = b"%sContent-Length: %d\r\n%s%s%s\r\n" % (
            status_line(reply.status), len(body), reply.headers, CLOCK.line(),
            b"Connection: close\r\n" if close else b"")
        transport.write(head if request.method == "HEAD" or not body else head + body)

    def start_stream(self, request: Request, status: int, headers: bytes) -> bool:
        """Write a streamed answer's head; True: its body must be framed in chunks (HTTP/1.1), False: it
        ends with the connection (HTTP/1.0)."""
        chunked = request.version == "1.1"
        if not chunked:
            request.keep_alive = False
        framing = b"Transfer-Encoding: chunked\r\n" if chunked else b"Connection: close\r\n"
        assert self.transport is not None
        self.streaming = True
        self.transport.write(b"%s%s%s%s\r\n" % (status_line(status), headers, framing, CLOCK.line()))
        return chunked

    def end_stream(self, chunked: bool) -> None:
        if chunked and self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"0\r\n\r\n")

    async def drain(self) -> None:
        """Wait until the client's transport takes writes again (or the client left)."""
        while self._write_paused and self.transport is not None and not self.transport.is_closing():
            self._drain_waiter = self._loop.create_future()
            await self._drain_waiter

    def _wake_drain(self) -> None:
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # ----- refusals and closing ------------------------------------------------------------------

    def _too_large(self) -> None:
        self._refuse(413, "request_too_large", f"the request body is larger than {self._server.max_body} bytes",
                     hint="send a smaller request")

    def _refuse(self, status: int, kind: str, message: str, **extra: str) -> None:
        """Answer a request that cannot be parsed or taken, then close (what was queued before is answered first)."""
        if self._refused:
            return
        self._refused = True
        error = {"type": kind, "message": message, "source": "anchorage-gateway", **extra}
        body = fastjson.dumps({"error": error})
        head = b"%sContent-Length: %d\r\n%sx-anchorage-gateway-error: %s\r\n%sConnection: close\r\n\r\n" % (
            status_line(status), len(body), JSON_TYPE, kind.encode(), CLOCK.line())
        if self._task is None and self.transport is not None:
            self.transport.write(head + body)
            self._close_after()
        else:  # answered after the queued requests: a reply of its own in the queue
            self._queue.append(_Refusal(self, head + body))

    def _close_after(self) -> None:
        """Close once what was written went out."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def close_if_idle(self, now: float) -> None:
        if self._task is None and now - self.last_active > KEEPALIVE_SECONDS and self.transport is not None:
            self.transport.close()


class _Refusal(Request):
    """A queued refusal (a malformed request after pipelined good ones): written in its turn."""

    def __init__(self, channel: Channel, raw: bytes) -> None:
        super().__init__(channel, "REFUSED", "/", {}, b"", "1.1", False, False)
        self.raw = raw


class HttpServer:
    """Serves ``handler`` on TCP and/or unix-socket listeners of one event loop."""

    def __init__(self, handler: Handler, *, max_body: int, on_close: Callable[[], Awaitable[None]] | None = None) -> None:
        self._handler = handler
        self.max_body = max_body
        self._on_close = on_close
        self.channels: set[Channel] = set()
        self._servers: list[asyncio.Server] = []
        self._sweeper: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "listen first (start_tcp / start_unix)"
        return self._loop

    @property
    def handler(self) -> Handler:
        return self._handler

    def _bind(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._sweeper = self._loop.call_later(SWEEP_SECONDS, self._sweep)

    def _sweep(self) -> None:
        now = self.loop.time()
        for channel in list(self.channels):
            channel.close_if_idle(now)
        self._sweeper = self.loop.call_later(SWEEP_SECONDS, self._sweep)

    async def start_tcp(self, host: str, port: int, *, backlog: int = 1024) -> int:
        """Listen on ``host:port`` (0: any free port); returns the bound port."""
        self._bind()
        server = await self.loop.create_server(lambda: Channel(self), host, port, backlog=backlog)
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    async def start_unix(self, path: Path) -> None:
        self._bind()
        server = await self.loop.create_unix_server(lambda: Channel(self), str(path), backlog=1024)
        self._servers.append(server)

    async def close(self, grace: float = 2.0) -> None:
        """Stop listening, close idle connections, give running handlers ``grace`` seconds, then cancel them."""
        for server in self._servers:
            server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        tasks = [c._task for c in self.channels if c._task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
            for task in tasks:
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait(tasks, timeout=grace)
        for channel in list(self.channels):
            if channel.transport is not None:
                channel.transport.abort()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), grace)
        if self._on_close is not None:
            await self._on_close()
        await asyncio.sleep(0)
