"""The gateway's HTTP/1.1 client for its upstreams: pooled keep-alive connections on asyncio protocols.

Used by :mod:`anchorage.gateway.server` (every forwarded request, ``count_tokens``) and
:mod:`anchorage.gateway.relay`. It replaces aiohttp's ``ClientSession`` on the hot path: one request is
one ``transport.write`` of header bytes made once per upstream plus the body, and the answer is parsed by
``httptools`` (llhttp, in C) straight from the socket's ``data_received`` callback. What it does:

* **Pool**: idle keep-alive connections per origin (scheme, host, port), reused last-in first-out;
  a connection goes back to the pool only after its answer was read to the end and both sides said
  keep-alive, and an idle one is dropped after :data:`IDLE_SECONDS` or when the upstream closed it.
  A request that fails on a *reused* connection before any byte of an answer came (the upstream closed it
  while the request was on its way) is sent once more on a new connection, not counted as an attempt.
* **Timeouts**: connecting (:data:`CONNECT_SECONDS`); and reading — the answer fails when no byte
  arrived for the upstream's ``timeout_seconds`` while one is awaited (checked every quarter of it:
  :class:`IdleWatch`, no timer per chunk), from the request until its last byte.
* **Bodies**: content-length, chunked, or until the connection closes; never decompressed
  (``Accept-Encoding: identity`` is asked, and whatever comes is passed on as it came). Repeated headers
  are kept in order (:attr:`UpstreamResponse.headers`).
* **Delivery**: :meth:`UpstreamResponse.read` for a whole body, or :meth:`UpstreamResponse.attach` — each
  parsed piece of the body is handed to a callback within the socket's data callback (the push relay),
  what one ``recv`` brought as one piece.

Failures raise :class:`UpstreamError` subclasses (the retry policy in :mod:`anchorage.gateway.retrying`
and the server decide what to do with them); the class name is what the gateway reports ("failed 3
time(s) (UpstreamConnectError, 503, ...)").
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

import httptools

CONNECT_SECONDS = 30.0
IDLE_SECONDS = 15.0  # an idle pooled connection older than this is closed rather than reused
MAX_IDLE_PER_ORIGIN = 256
MAX_HEAD_BYTES = 256 * 1024  # an answer's status line and headers together


class UpstreamError(Exception):
    """The upstream could not be reached or broke its answer (never a client's fault)."""


class UpstreamConnectError(UpstreamError):
    """No connection could be made (refused, unreachable, TLS handshake failed)."""


class UpstreamTimeout(UpstreamError, TimeoutError):
    """Connecting, or waiting for the next byte of an answer, took longer than allowed."""


class UpstreamDisconnected(UpstreamError):
    """The upstream closed or reset the connection before its answer was complete."""

    def __init__(self, message: str, *, before_answer: bool = False) -> None:
        super().__init__(message)
        self.before_answer = before_answer  # no byte of an answer had come


class UpstreamBadResponse(UpstreamError):
    """What came back is not HTTP/1.x (or its head is too large)."""


@dataclass(frozen=True)
class Origin:
    """Where a base URL points: the pool key, the ``Host`` header and the path prefix (parsed once)."""

    scheme: str
    host: str
    port: int
    host_header: bytes
    prefix: bytes

    @staticmethod
    def parse(base_url: str) -> Origin:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        default = 443 if parts.scheme == "https" else 80
        port = parts.port or default
        host = parts.hostname
        shown = f"[{host}]" if ":" in host else host
        header = shown if port == default else f"{shown}:{port}"
        return Origin(parts.scheme, host, port, header.encode("idna"), parts.path.rstrip("/").encode())


class IdleWatch:
    """Calls ``on_idle`` when ``received()`` did not change for ``timeout`` seconds.

    Looks every ``timeout / 4`` seconds, so an idle answer fails after ``timeout`` to ``1.25 × timeout``
    seconds; nothing is done per received chunk (the counter is a plain int the protocol bumps).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, received: Callable[[], int], timeout: float,
                 on_idle: Callable[[], None]) -> None:
        self._loop, self._received, self._timeout, self._on_idle = loop, received, timeout, on_idle
        self._seen, self._since = received(), loop.time()
        self._handle: asyncio.TimerHandle | None = loop.call_later(timeout / 4, self._check)

    def _check(self) -> None:
        now, received = self._loop.time(), self._received()
        if received != self._seen:
            self._seen, self._since = received, now
        elif now - self._since >= self._timeout:
            self._handle = None
            self._on_idle()
            return
        self._handle = self._loop.call_later(self._timeout / 4, self._check)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


Sink = Callable[[bytes], None]


class UpstreamResponse:
    """One answer: status and headers once they arrived, the body read whole or attached to a sink."""

    __slots__ = ("_conn", "_done", "_failure", "_pieces", "_sink", "complete", "headers", "status")

    def __init__(self, conn: _Connection) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []  # as received (names as sent; repeated ones kept)
        self._conn: _Connection | None = conn
        self._pieces: list[bytes] = []
        self._sink: Sink | None = None
        self._done: asyncio.Future[None] | None = None
        self.complete = False  # the whole body arrived
        self._failure: BaseException | None = None

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), decoded as Latin-1."""
        wanted = name.lower().encode()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value.decode("latin-1")
        return None

    def header_map(self) -> dict[str, str]:
        """Lower-cased names to their first values (for the retry policy's hints)."""
        found: dict[str, str] = {}
        for key, value in self.headers:
            found.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
        return found

    # ----- the body ---------------------------------------------------------------------------

    def attach(self, sink: Sink) -> asyncio.Future[None]:
        """Hand every piece of the body to ``sink`` from now on (what arrived already, at once); the future
        ends with the body (or with its failure, or with :meth:`detach`)."""
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        if self._pieces:
            pieces, self._pieces = self._pieces, []
            sink(pieces[0] if len(pieces) == 1 else b"".join(pieces))
        if self._done.done():  # the sink detached already
            return self._done
        if self.complete:
            self._done.set_result(None)
        elif self._failure is not None:
            self._done.set_exception(self._failure)
        else:
            self._sink = sink
        return self._done

    def detach(self, outcome: BaseException | None = None) -> None:
        """Stop handing pieces to the sink; the attach future ends with ``outcome`` (None: success)."""
        self._sink = None
        done = self._done
        if done is not None and not done.done():
            if outcome is None:
                done.set_result(None)
            else:
                done.set_exception(outcome)

    async def read(self) -> bytes:
        """The whole body (raises :class:`UpstreamError` if it broke off)."""
        pieces: list[bytes] = []
        await self.attach(pieces.append)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def pause_reading(self) -> None:
        if self._conn is not None:
            self._conn.pause()

    def resume_reading(self) -> None:
        if self._conn is not None:
            self._conn.resume()

    def close(self) -> None:
        """Done with this answer: a connection whose answer was not read to its end is closed, not reused."""
        conn, self._conn = self._conn, None
        if conn is not None and not self.complete:
            conn.abort()

    # ----- called by the connection -------------------------------------------------------------

    def _deliver(self, pieces: list[bytes]) -> None:
        sink = self._sink
        if sink is not None:
            sink(pieces[0] if len(pieces) == 1 else b"".join(pieces))
        else:
            self._pieces.extend(pieces)

    def _finished(self) -> None:
        self.complete = True
        self._sink = None
        self._conn = None
        done = self._done
        if done is not None and not done.done():
            done.set_result(None)

    def _failed(self, exc: BaseException) -> None:
        self._failure = exc
        self._sink = None
        self._conn = None
        done = self._done
        if done is not None and not done.done():
            done.set_exception(exc)


class _Connection(asyncio.Protocol):
    """One upstream connection: writes requests, parses answers with httptools (one answer at a time)."""

    def __init__(self, pool: UpstreamPool, origin: Origin) -> None:
        self._pool, self.origin = pool, origin
        self._loop = pool.loop
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self.alive = False
        self.reused = False
        self.idle_since = 0.0
        self._received = 0
        self._head_bytes = 0
        self._response: UpstreamResponse | None = None
        self._headers_ready: asyncio.Future[UpstreamResponse] | None = None
        self._pieces: list[bytes] = []
        self._watch: IdleWatch | None = None
        self._keep_alive = False
        self._message_done = False
        self._timeout = 0.0

    # ----- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # (uvloop's transports do not subclass asyncio's)
        self.alive = True

    def data_received(self, data: bytes) -> None:
        self._received += len(data)
        if self._response is None:  # bytes nobody asked for: this connection cannot be trusted any more
            self.abort()
            return
        if self._headers_ready is not None:
            self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(UpstreamBadResponse(f"the upstream's answer is not valid HTTP/1.1: {exc}"))
            self.abort()
            return
        if self._headers_ready is not None and self._head_bytes > MAX_HEAD_BYTES:
            self._fail(UpstreamBadResponse(f"the upstream's answer head is larger than {MAX_HEAD_BYTES} bytes"))
            self.abort()
            return
        self._flush()
        if self._message_done:
            self._complete()

    def eof_received(self) -> bool | None:
        response = self._response
        if response is not None and self._headers_ready is None and response.header("content-length") is None \
                and "chunked" not in (response.header("transfer-encoding") or "").lower():
            self._keep_alive = False  # a body that lasts until the connection closes ends here
            self._flush()
            self._complete()
        return None  # the transport closes itself; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.alive = False
        self._transport = None
        self._pool.forget(self)
        if self._response is not None:
            why = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
            self._fail(UpstreamDisconnected(f"the upstream closed the connection before its answer was complete{why}",
                                            before_answer=self._received == 0))

    # ----- httptools callbacks -------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        assert self._response is not None
        self._response.headers.append((name, value))

    def on_headers_complete(self) -> None:
        response, ready = self._response, self._headers_ready
        assert response is not None
        response.status = self._parser.get_status_code()
        if response.status < 200:  # 1xx: an interim answer; the real one follows on the same connection
            response.headers.clear()
            return
        self._keep_alive = self._parser.should_keep_alive()
        self._headers_ready = None
        if ready is not None and not ready.done():
            ready.set_result(response)

    def on_body(self, body: bytes) -> None:
        self._pieces.append(body)

    def on_message_complete(self) -> None:
        if self._response is not None and self._response.status >= 200:
            self._message_done = True  # finished in data_received, once the parser returned

    def _complete(self) -> None:
        response = self._response
        assert response is not None
        self._response, self._message_done = None, False
        self._stop_watch()
        if self._keep_alive and self._transport is not None and not self._transport.is_closing():
            self.resume()
            self._pool.release(self)
        else:
            self.abort()
        response._finished()

    # ----- requests ------------------------------------------------------------------------------

    def send(self, head: bytes, body: bytes, read_timeout: float) -> asyncio.Future[UpstreamResponse]:
        """Write one request; the future gets the answer once its headers arrived."""
        assert self._transport is not None and self._response is None
        self._response = UpstreamResponse(self)
        self._pieces = []
        self._head_bytes = 0
        self._keep_alive = False
        self._message_done = False
        self._timeout = read_timeout
        self._headers_ready = self._loop.create_future()
        self._received = 0
        self._watch = IdleWatch(self._loop, self._received_bytes, read_timeout, self._idle)
        self._transport.write(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            self._transport.write(body)
        return self._headers_ready

    def _received_bytes(self) -> int:
        return self._received

    def _idle(self) -> None:
        self._watch = None
        self._fail(UpstreamTimeout(f"the upstream sent nothing for {self._timeout:g} s (upstreams[].timeout_seconds)"))
        self.abort()

    def _flush(self) -> None:
        if self._pieces and self._response is not None and self._headers_ready is None:
            pieces, self._pieces = self._pieces, []
            self._response._deliver(pieces)

    def _fail(self, exc: UpstreamError) -> None:
        self._stop_watch()
        response, ready = self._response, self._headers_ready
        self._response, self._headers_ready, self._message_done = None, None, False
        if ready is not None and not ready.done():
            ready.set_exception(exc)
        if response is not None:
            self._flush_to(response)
            response._failed(exc)

    def _flush_to(self, response: UpstreamResponse) -> None:
        if self._pieces:
            pieces, self._pieces = self._pieces, []
            response._deliver(pieces)

    def _stop_watch(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def pause(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def resume(self) -> None:
        if self._transport is not None and not self._transport.is_closing() and not self._transport.is_reading():
            self._transport.resume_reading()

    def abort(self) -> None:
        self.alive = False
        if self._transport is not None:
            self._transport.abort()

    @property
    def busy(self) -> bool:
        return self._response is not None


class UpstreamPool:
    """Keep-alive connections per origin; :meth:`request` sends one request and returns its answer's head.

    One pool per gateway process (per event loop); :meth:`close` closes every connection. ``https``
    upstreams are verified with ``ssl_context`` (default: the system's CAs, ``ssl.create_default_context()``).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None, *,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.loop = loop or asyncio.get_running_loop()
        self._idle: dict[Origin, list[_Connection]] = {}
        self._origins: dict[str, Origin] = {}
        self._ssl: ssl.SSLContext | None = ssl_context
        self._all: set[_Connection] = set()
        self._closed = False

    def origin(self, base_url: str) -> Origin:
        """``base_url`` parsed (once per distinct URL)."""
        found = self._origins.get(base_url)
        if found is None:
            found = Origin.parse(base_url)
            if len(self._origins) < 1024:
                self._origins[base_url] = found
        return found

    async def request(self, origin: Origin, head: bytes, body: bytes, *, read_timeout: float,
                      connect_timeout: float = CONNECT_SECONDS) -> UpstreamResponse:
        """Send ``head`` (request line and headers, ending in an empty line) and ``body``; the answer once its
        status and headers arrived. Raises :class:`UpstreamError`."""
        conn = self._take(origin)
        if conn is not None:
            try:
                return await self._send(conn, head, body, read_timeout)
            except UpstreamDisconnected as exc:
                if not exc.before_answer:
                    raise
                # the upstream closed the kept-alive connection as the request went out: once more, new
        conn = await self._connect(origin, connect_timeout)
        return await self._send(conn, head, body, read_timeout)

    async def _send(self, conn: _Connection, head: bytes, body: bytes, read_timeout: float) -> UpstreamResponse:
        future = conn.send(head, body, read_timeout)
        try:
            return await future
        except asyncio.CancelledError:
            conn.abort()
            raise

    def _take(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        if not idle:
            return None
        oldest_allowed = self.loop.time() - IDLE_SECONDS
        while idle:
            conn = idle.pop()
            if conn.alive and conn.idle_since >= oldest_allowed:
                conn.reused = True
                return conn
            conn.abort()
        return None

    async def _connect(self, origin: Origin, timeout: float) -> _Connection:
        context = self._context() if origin.scheme == "https" else None
        try:
            async with asyncio.timeout(timeout):
                _, protocol = await self.loop.create_connection(
                    lambda: _Connection(self, origin), origin.host, origin.port, ssl=context,
                    server_hostname=origin.host if context is not None else None)
        except TimeoutError as exc:
            raise UpstreamTimeout(f"connecting to {origin.host}:{origin.port} took more than {timeout:g} s") from exc
        except (OSError, ssl.SSLError) as exc:
            raise UpstreamConnectError(f"cannot connect to {origin.host}:{origin.port}: {exc}") from exc
        assert isinstance(protocol, _Connection)
        if self._closed:  # the pool closed while this connection was being made
            protocol.abort()
            raise UpstreamConnectError("the gateway is stopping")
        self._all.add(protocol)
        return protocol

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    def release(self, conn: _Connection) -> None:
        """An answer was read to its end on a keep-alive connection: pool it."""
        if self._closed:
            conn.abort()
            return
        idle = self._idle.setdefault(conn.origin, [])
        if len(idle) >= MAX_IDLE_PER_ORIGIN:
            conn.abort()
            return
        conn.idle_since = self.loop.time()
        idle.append(conn)

    def forget(self, conn: _Connection) -> None:
        self._all.discard(conn)
        idle = self._idle.get(conn.origin)
        if idle and conn in idle:
            idle.remove(conn)

    async def close(self) -> None:
        """Close every connection (and let the loop finish closing them)."""
        self._closed = True
        for conn in list(self._all):
            conn.abort()
        self._idle.clear()
        for _ in range(10):
            if not self._all:
                break
            await asyncio.sleep(0)

    def idle_connections(self, base_url: str) -> int:
        """How many kept-alive connections to ``base_url``'s origin wait in the pool (tests, diagnostics)."""
        return len(self._idle.get(self.origin(base_url), ()))

    def open_connections(self) -> int:
        return len(self._all)


def request_head(method: bytes, origin: Origin, path: bytes, headers: bytes, body_length: int) -> bytes:
    """A request's head: ``headers`` are complete ``Name: value\\r\\n`` lines (made once per upstream)."""
    return b"%s %s%s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %d\r\n\r\n" % (
        method, origin.prefix, path, origin.host_header, headers, body_length)


def header_lines(headers: dict[str, str] | list[tuple[str, str]]) -> bytes:
    """``Name: value\\r\\n`` lines (values must not hold CR or LF: refused with ValueError)."""
    items: Any = headers.items() if isinstance(headers, dict) else headers
    out = bytearray()
    for name, value in items:
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
            raise ValueError(f"header {name!r} holds a line break")
        out += f"{name}: {value}\r\n".encode("latin-1")
    return bytes(out)
