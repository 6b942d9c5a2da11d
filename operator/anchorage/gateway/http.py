"""The gateway's HTTP/1.1 server for its model API: asyncio protocols, requests parsed by httptools.

Used by :mod:`anchorage.gateway.server` (its handlers take a :class:`Request` and give a :class:`Reply`,
or write a stream themselves through :class:`Channel`) and served by
:class:`anchorage.gateway.running.BackgroundServer` on TCP and/or unix sockets (:mod:`anchorage.gateway.listeners`:
a trial's own socket among them). It replaces aiohttp's server on the hot path: no request, header multidict or
response writer objects per request — one ``transport.write`` for a whole answer, headers made of bytes. (The admin
listener stays on aiohttp.)

What it does: keep-alive and pipelined requests (answered in order, one at a time per connection),
content-length and chunked request bodies, ``Expect: 100-continue``, HEAD (headers only), HTTP/1.0 clients (their
connection closes after the answer), an ``Upgrade`` request is handed to the handler once and its connection closed
after the answer, a malformed request gets one 400 JSON error and the connection closes. When a handler fails
unexpectedly the client gets a 500 JSON error (logged).

The front door (limits: :class:`~anchorage.gateway.gatewayconfig.FrontDoorConfig`; counts: :mod:`anchorage.gateway.frontdoor`):
when a request's head is complete, and before a byte of its body is read, the server's *gate* (the gateway's token
check) admits it or answers for it — then the connection closes, and no ``100 Continue`` was sent; the body's
declared size is checked (413) and reserved against its trial's and the gateway's bytes in flight (429 / 503); the
connection counts against the trial whose token it presented. A head may hold ``max_head_bytes``, every byte counted
as it arrives (431). Deadlines, set when a phase begins and never moved by the bytes that come: a request's head must
be complete ``head_timeout_seconds`` after its first byte (a connection's first request: after the connection
opened), its body ``body_timeout_seconds`` after its head; an idle keep-alive connection closes after
``keepalive_seconds``. One sweep per second (or a quarter of the shortest deadline) checks them all, no timer per
request. A refused connection answers once (408, 413, 431, 401, ...), half-closes, and reads on and drops what the
client still sends for :data:`LINGER_SECONDS` / :data:`LINGER_BYTES` (so it can read its answer), then closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from http import HTTPStatus
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote

import httptools

from anchorage.gateway import fastjson
from anchorage.gateway.frontdoor import Doorkeeper
from anchorage.gateway.gatewayconfig import FrontDoorConfig
from anchorage.gateway.listeners import Listener, tcp_sockets, unix_socket

log = logging.getLogger("anchorage.gateway")

SWEEP_SECONDS = 1.0
MAX_QUEUED = 16  # pipelined requests parsed ahead of the one being answered (then reading pauses)
LINGER_SECONDS = 2.0  # after a refusal: how long what the client still sends is read and dropped
LINGER_BYTES = 1024 * 1024  # ... and at most this much
TRIAL_BACKLOG = 64  # pending connections a trial's own socket queues while it is at its cap
_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}
# What the reading side of a connection waits for (its deadline says until when).
IDLE, HEAD, BODY, LINGER = range(4)


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
    """One parsed request: method, path (percent-decoded, no query), the target as sent, headers, body.

    Made when its head is complete (the body comes later); ``auth`` and ``account`` are what the server's gate
    found (the trial's account and token claims, and the trial its bytes and connection count against)."""

    __slots__ = ("account", "auth", "body", "channel", "headers", "keep_alive", "method", "path", "reserved",
                 "target", "upgrade", "version")

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
        self.auth: Any = None
        self.account: str | None = None
        self.reserved = 0  # bytes of its body reserved at the front door (released once answered)

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
#: Looks at a request whose head is complete, before its body is read: None admits it (setting its ``auth`` and
#: ``account``), a :class:`Reply` answers it instead (the connection then closes; the gate counts its refusal).
Gate = Callable[[Request], Reply | None]


class Channel(asyncio.Protocol):
    """One client connection: parses requests, runs the handler for each in turn, writes the answers."""

    def __init__(self, server: HttpServer, listener: Listener, client: str) -> None:
        self._server = server
        self._loop = server.loop
        self.door = server.door
        self._limits = server.limits
        self.listener = listener
        self.owner = listener.owner  # the trial whose socket this is (None: a shared listener)
        self.client = client  # who this connection counts against (a trial's socket, an address, a uid)
        self.account: str | None = None  # the trial whose token it presented (its connection cap)
        self._parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self._queue: deque[Request] = deque()
        self._task: asyncio.Task[None] | None = None
        self._request: Request | None = None  # the request being read (its head is complete)
        self._url: list[bytes] = []
        self._headers: dict[bytes, bytes] = {}
        self._body: list[bytes] = []
        self._body_size = 0
        self._head_raw = 0  # bytes received since the last head or request ended (all count against a head)
        self._head_exact = 0  # bytes of the current head's target and headers, as parsed
        self._phase = IDLE
        self._first = True  # no request began yet: the first one's head deadline runs from the connection's start
        self.deadline = self._loop.time() + self._limits.head_timeout_seconds  # 0: none (a handler is answering)
        self._refused = False  # an error was answered: nothing more is parsed
        self._dropped = 0  # bytes read and dropped after a refusal
        self._paused_reading = False
        self._write_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self.streaming = False  # a handler writes a stream through this channel

    # ----- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (uvloop's transports do not subclass asyncio's)
        self._server.channels.add(self)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            if self._phase == LINGER:
                self._dropped += len(data)
                if self._dropped > LINGER_BYTES and self.transport is not None:
                    self.transport.abort()
            return
        if self._phase != BODY:
            self._head_raw += len(data)  # (the first read of a head too: what is not body counts)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refused = True  # what follows is not HTTP: the upgrade request is answered, then we close
        except httptools.HttpParserError as exc:
            self._refuse(400, "invalid_request", "malformed", f"malformed HTTP request: {exc}")
            return
        if self._phase == HEAD and self._head_raw > self._limits.max_head_bytes and not self._refused:
            self._head_too_large()

    def connection_lost(self, exc: Exception | None) -> None:
        server = self._server
        server.channels.discard(self)
        self.transport = None
        if self._request is not None:
            self._release(self._request)
            self._request = None
        server.connection_closed(self)
        self._wake_drain()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_drain()

    # ----- httptools callbacks -------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._url, self._headers, self._body, self._body_size = [], {}, [], 0
        self._head_exact = 0
        self._phase = HEAD
        if self._first:
            self._first = False  # its deadline runs from the connection's start
        else:
            self.deadline = self._loop.time() + self._limits.head_timeout_seconds

    def on_url(self, url: bytes) -> None:
        self._head_exact += len(url)
        self._url.append(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_exact += len(name) + len(value) + 4
        key = name.lower()
        known = self._headers.get(key)
        self._headers[key] = value if known is None else known + b", " + value

    def on_headers_complete(self) -> None:
        self._phase = BODY
        self._head_raw = 0
        if self._refused:
            return
        if self._head_exact > self._limits.max_head_bytes:
            self._head_too_large()
            return
        self.deadline = self._loop.time() + self._limits.body_timeout_seconds
        request = self._request = self._new_request()
        gate = self._server.gate
        if gate is not None:
            refusal = gate(request)
            if refusal is not None:
                self._refuse_with(refusal)
                return
        if request.account is not None and request.account != self.account and not self._bind(request.account):
            return
        length = self._headers.get(b"content-length")
        if length is not None and length.isdigit():
            size = int(length)
            if size > self._limits.max_body_bytes:
                self._too_large()
                return
            if size and not self._reserve(request, size):
                return
        if self._headers.get(b"expect", b"").lower() == b"100-continue" and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        if self._refused:
            return
        self._body_size += len(body)
        if self._body_size > self._limits.max_body_bytes:
            self._too_large()
            return
        request = self._request
        if request is not None and self._body_size > request.reserved and \
                not self._reserve(request, self._body_size - request.reserved):  # a chunked body: as it comes
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._phase = IDLE
        self._head_raw = 0
        if self._refused:
            return
        request, self._request = self._request, None
        assert request is not None
        request.body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        self._body = []
        self.deadline = 0.0  # answered now; the keep-alive deadline starts when the answer is done
        self._enqueue(request)

    # ----- requests ------------------------------------------------------------------------------

    def _new_request(self) -> Request:
        parser = self._parser
        upgrade = parser.should_upgrade()
        target = (self._url[0] if len(self._url) == 1 else b"".join(self._url)).decode("latin-1")
        return Request(self, parser.get_method().decode("latin-1"), target, self._headers, b"",
                       parser.get_http_version(), parser.should_keep_alive() and not upgrade, upgrade)

    def _bind(self, account: str) -> bool:
        """Count this connection against ``account``'s trial (instead of the one it was counted against)."""
        door = self.door
        if self.account is not None:
            door.unbind(self.account)
            self.account = None
        if not door.bind(account):
            cap = self._limits.max_connections_per_token
            self._refuse(429, "too_many_connections", "token_connections",
                         f"trial {account} has {cap} connections open to the gateway already",
                         offender=f"trial {account}", hint="reuse connections (keep-alive)", retry=True)
            return False
        self.account = account
        return True

    def _reserve(self, request: Request, size: int) -> bool:
        """Reserve ``size`` more bytes of ``request``'s body at the front door; False: refused (answered)."""
        reason = self.door.reserve(request.account, size)
        if reason is None:
            request.reserved += size
            return True
        limits = self._limits
        if reason == "token_inflight_bytes":
            self._refuse(429, "too_many_bytes_in_flight", reason, f"trial {request.account}'s requests in flight "
                         f"hold {limits.max_inflight_bytes_per_token} bytes of bodies at most",
                         offender=f"trial {request.account}", retry=True)
        else:
            self._refuse(503, "gateway_busy", reason, f"the gateway holds {limits.max_inflight_bytes} bytes of "
                         "request bodies at most; try again shortly", retry=True)
        return False

    def _release(self, request: Request) -> None:
        if request.reserved:
            self.door.release(request.account, request.reserved)
            request.reserved = 0

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
                    self._linger()
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
                finally:
                    self._release(request)
                self.streaming = False
                transport = self.transport
                if transport is None or transport.is_closing():
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
            for left in self._queue:
                self._release(left)
            self._queue.clear()
            self._task = None
            if self._phase == IDLE and not self._refused:
                self.deadline = self._loop.time() + self._limits.keepalive_seconds

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

    # ----- refusals, deadlines and closing ---------------------------------------------------------

    def _too_large(self) -> None:
        cap = self._limits.max_body_bytes
        self._refuse(413, "request_too_large", "body_too_large", f"the request body is larger than {cap} bytes",
                     hint="send a smaller request")

    def _head_too_large(self) -> None:
        self._refuse(431, "invalid_request", "head_too_large",
                     f"request line and headers larger than {self._limits.max_head_bytes} bytes")

    def _refuse(self, status: int, kind: str, reason: str, message: str, *, offender: str | None = None,
                retry: bool = False, **extra: str) -> None:
        """Count and answer a request that cannot be parsed or taken, then close (what was queued before is
        answered first)."""
        if self._refused:
            return
        self.door.refused(reason, offender or self.client, message)
        error = {"type": kind, "message": message, "source": "anchorage-gateway", **extra}
        headers = b"x-anchorage-gateway-error: %s\r\n%s" % (kind.encode(), b"Retry-After: 1\r\n" if retry else b"")
        self._refuse_with(json_reply(status, {"error": error}, headers))

    def _refuse_with(self, reply: Reply) -> None:
        """Answer with ``reply`` (already counted) and close; nothing more of this connection is parsed."""
        if self._refused:
            return
        self._refused = True
        if self._request is not None:
            self._release(self._request)
            self._request = None
        raw = b"%sContent-Length: %d\r\n%s%sConnection: close\r\n\r\n%s" % (
            status_line(reply.status), len(reply.body), reply.headers, CLOCK.line(), reply.body)
        if self._task is None and self.transport is not None:
            self.transport.write(raw)
            self._linger()
        else:  # answered after the queued requests: a reply of its own in the queue
            self._queue.append(_Refusal(self, raw))
            if self.transport is not None and not self._paused_reading:
                self._paused_reading = True
                self.transport.pause_reading()
            self.deadline = 0.0

    def _linger(self) -> None:
        """After a refusal: half-close, then read and drop what the client still sends, for a while."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        self._refused = True
        self._phase = LINGER
        self.deadline = self._loop.time() + LINGER_SECONDS
        if self._paused_reading:
            self._paused_reading = False
            transport.resume_reading()
        try:
            if not transport.can_write_eof():
                raise NotImplementedError
            transport.write_eof()
        except (OSError, RuntimeError, NotImplementedError):
            transport.close()

    def _close_after(self) -> None:
        """Close once what was written went out."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def expire(self) -> None:
        """The deadline passed (the server's sweep): answer a late head or body with 408, close an idle connection."""
        transport = self.transport
        self.deadline = 0.0
        if transport is None:
            return
        phase = self._phase
        if phase == LINGER:
            transport.abort()
        elif phase in (HEAD, BODY):
            what = "head" if phase == HEAD else "body"
            seconds = self._limits.head_timeout_seconds if phase == HEAD else self._limits.body_timeout_seconds
            self._refuse(408, "request_timeout", f"{what}_timeout",
                         f"the request's {'line and headers' if phase == HEAD else 'body'} did not arrive within "
                         f"{seconds:g} s", hint="send each request whole and at once")
        elif self._task is None:
            if self._first:  # nothing came since the connection opened
                self.door.refused("head_timeout", self.client,
                                   f"no request within {self._limits.head_timeout_seconds:g} s of connecting")
            transport.close()


class _Refusal(Request):
    """A queued refusal (a malformed request after pipelined good ones): written in its turn."""

    def __init__(self, channel: Channel, raw: bytes) -> None:
        super().__init__(channel, "REFUSED", "/", {}, b"", "1.1", False, False)
        self.raw = raw


class HttpServer:
    """Serves ``handler`` on TCP and/or unix-socket listeners of one event loop, behind ``gate`` and the
    front door's ``limits``."""

    def __init__(self, handler: Handler, *, limits: FrontDoorConfig | None = None, gate: Gate | None = None,
                 on_close: Callable[[], Awaitable[None]] | None = None) -> None:
        self._handler = handler
        self.gate = gate
        self.limits = limits or FrontDoorConfig()
        self.door = Doorkeeper(self.limits)
        self._on_close = on_close
        self.channels: set[Channel] = set()
        self.listeners: list[Listener] = []
        self._sweeper: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "listen first (start_tcp / start_unix)"
        return self._loop

    @property
    def handler(self) -> Handler:
        return self._handler

    @property
    def max_body(self) -> int:
        return self.limits.max_body_bytes

    def _bind(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._sweeper = self._loop.call_later(self._sweep_every(), self._sweep)

    def _sweep_every(self) -> float:
        limits = self.limits
        return min(SWEEP_SECONDS, limits.head_timeout_seconds / 4, limits.body_timeout_seconds / 4)

    def _sweep(self) -> None:
        now = self.loop.time()
        for channel in [c for c in self.channels if 0.0 < c.deadline <= now]:
            channel.expire()
        self._sweeper = self.loop.call_later(self._sweep_every(), self._sweep)

    def _listen(self, sock: socket.socket, *, owner: str | None = None, path: Path | None = None) -> Listener:
        listener = Listener(sock, self.loop, self.door, self._connect, owner=owner, path=path)
        self.listeners.append(listener)
        listener.start()
        return listener

    async def _connect(self, sock: socket.socket, listener: Listener, client: str) -> None:
        try:
            await self.loop.connect_accepted_socket(lambda: Channel(self, listener, client), sock)
        except (OSError, RuntimeError) as exc:
            log.debug("an accepted connection could not be set up: %s", exc)
            sock.close()
            self.door.closed(client, None)
            self._resume()

    def connection_closed(self, channel: Channel) -> None:
        """A connection ended: its counts go, and listeners paused at a cap may accept again."""
        self.door.closed(channel.client, channel.account)
        channel.account = None
        self._resume()

    def _resume(self) -> None:
        for listener in self.listeners:
            if listener.paused and not listener.closed and self.door.may_accept(listener.client):
                listener.start()

    async def start_tcp(self, host: str, port: int, *, backlog: int = 1024) -> int:
        """Listen on ``host:port`` (0: any free port); returns the bound port."""
        self._bind()
        sockets = tcp_sockets(host, port, backlog)
        for sock in sockets:
            self._listen(sock)
        return int(sockets[0].getsockname()[1])

    async def start_unix(self, path: Path, *, owner: str | None = None, backlog: int | None = None) -> Listener:
        """Listen on a unix socket at ``path``; ``owner``: the one trial it serves (its token only, its caps)."""
        self._bind()
        size = backlog if backlog is not None else TRIAL_BACKLOG if owner is not None else 1024
        return self._listen(unix_socket(path, size), owner=owner, path=path)

    def trial_listener(self, owner: str) -> Listener | None:
        return next((listener for listener in self.listeners if listener.owner == owner), None)

    def stop_listener(self, listener: Listener) -> None:
        """Stop ``listener`` and close its connections (a trial's socket when the trial ended)."""
        listener.close()
        with contextlib.suppress(ValueError):
            self.listeners.remove(listener)
        for channel in [c for c in self.channels if c.listener is listener]:
            if channel.transport is not None:
                channel.transport.abort()

    async def close(self, grace: float = 2.0) -> None:
        """Stop listening, close idle connections, give running handlers ``grace`` seconds, then cancel them."""
        for listener in list(self.listeners):
            listener.close()
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
        if self._on_close is not None:
            await self._on_close()
        await asyncio.sleep(0)
