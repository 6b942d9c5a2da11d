"""Relay a streamed upstream body to the client from the upstream socket's callback (the hot path).

The plain way to relay — a task that awaits ``content.readany()`` and then ``response.write(chunk)``
— costs per chunk a future, a task wake-up and a dozen Python frames of aiohttp's reader and writer.
:class:`PushRelay` instead sits between the upstream socket and aiohttp's response protocol for the
time of one body (``transport.set_protocol``): each time bytes arrive, aiohttp still parses them (its
C HTTP parser, chunked framing, limits), and in the same callback the relay takes what was parsed
(``content.read_nowait()``), lets the usage scan see it and writes it to the client's socket, framed
as one HTTP/1.1 chunk. The handler task sleeps until the body ends, fails, or the client's socket
needs draining. Nothing is held back: every chunk is written as soon as it was parsed.

The relay puts aiohttp's protocol back on the upstream socket in the very callback that sees the end
of the body (aiohttp hands the connection back to its pool there), so the pool never sees it.
It also watches for an idle upstream (no byte for ``timeout`` seconds → the stream fails), which
replaces aiohttp's per-chunk ``sock_read`` timer: see :class:`IdleWatch`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp

# Above this many bytes queued for the client, stop reading the upstream until the client caught up.
HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024
DRAIN_POLL_SECONDS = 0.005


class IdleWatch:
    """Fails a relayed stream whose upstream sent no byte for ``timeout`` seconds.

    It replaces aiohttp's ``sock_read`` timer for the body of a stream, which is cancelled and
    re-armed on every chunk (a timer allocation per relayed chunk); this one looks at the bytes
    received every ``timeout / 4`` seconds, so an idle stream fails after ``timeout`` to
    ``1.25 × timeout`` seconds. aiohttp's timer still covers the wait for the response headers and,
    until the first chunk arrives, the wait for it.
    """

    def __init__(self, response: aiohttp.ClientResponse, timeout: float,
                 on_timeout: Callable[[], None] | None = None) -> None:
        self._content, self._timeout, self._on_timeout = response.content, timeout, on_timeout
        self._loop = asyncio.get_running_loop()
        self._seen, self._since = self._content.total_bytes, self._loop.time()
        self._handle = self._loop.call_later(timeout / 4, self._check)
        connection = response.connection
        if connection is not None and connection.protocol is not None:
            connection.protocol.read_timeout = None  # its armed timer is dropped at the next chunk

    def _check(self) -> None:
        now, received = self._loop.time(), self._content.total_bytes
        if received != self._seen:
            self._seen, self._since = received, now
        elif now - self._since >= self._timeout:
            self._content.set_exception(aiohttp.SocketTimeoutError(
                f"the upstream sent nothing for {self._timeout:g} s (upstreams[].timeout_seconds)"))
            if self._on_timeout is not None:
                self._on_timeout()
            return
        self._handle = self._loop.call_later(self._timeout / 4, self._check)

    def cancel(self) -> None:
        self._handle.cancel()


class ClientGone(ConnectionResetError):
    """The client closed its connection while the stream was relayed."""


class PushRelay(asyncio.Protocol):
    """Relays one upstream body to ``client`` (a transport) as its bytes arrive; see the module docstring.

    ``feed`` sees every relayed chunk (the usage scan) and returns what to write of it (all of it, but
    for a usage chunk the client did not ask for). ``chunked``: frame each write as an HTTP/1.1
    chunk (the client's response uses chunked transfer encoding). Use :meth:`usable` first: the relay
    needs the upstream's transport and a plain (not buffered) protocol.
    """

    def __init__(self, upstream: aiohttp.ClientResponse, client: asyncio.Transport, *, chunked: bool,
                 feed: Callable[[bytes], bytes], timeout: float) -> None:
        connection = upstream.connection
        assert connection is not None and connection.transport is not None and connection.protocol is not None
        self._upstream = upstream
        self._transport: asyncio.Transport = connection.transport
        self._inner: Any = connection.protocol
        self._content = upstream.content
        self._client = client
        self._chunked = chunked
        self._feed = feed
        self._loop = asyncio.get_running_loop()
        self._wake: asyncio.Future[None] | None = None
        self._outcome: BaseException | None = None
        self._finished = False
        self._paused = False
        self._watch = IdleWatch(upstream, timeout, self._pump)

    @staticmethod
    def usable(upstream: aiohttp.ClientResponse, client: asyncio.BaseTransport | None) -> bool:
        connection = upstream.connection
        return (client is not None and connection is not None and connection.transport is not None
                and connection.protocol is not None
                and not isinstance(connection.protocol, asyncio.BufferedProtocol)
                and hasattr(connection.transport, "set_protocol"))

    async def run(self) -> None:
        """Relay until the body ended; raises what ended it otherwise (upstream error, timeout, :class:`ClientGone`)."""
        self._transport.set_protocol(self)
        try:
            self._pump()  # what aiohttp had already parsed before the relay took over
            while not self._finished:
                if self._paused:
                    await self._drain()  # its pump may pause again: checked before waiting
                    continue
                self._wake = self._loop.create_future()
                await self._wake
        finally:
            self._stop()
        if self._outcome is not None:
            raise self._outcome

    # ----- asyncio.Protocol: everything goes to aiohttp's protocol; data is then pumped out --------

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)
        self._pump()

    def eof_received(self) -> bool | None:
        result: bool | None = self._inner.eof_received()
        self._pump()
        return result

    def connection_lost(self, exc: Exception | None) -> None:
        self._inner.connection_lost(exc)
        self._pump()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    # ----- the pump ------------------------------------------------------------------------------

    def _pump(self) -> None:
        """Write out what aiohttp parsed; finish on end of body, error, or a client that left."""
        if self._finished:
            return
        content = self._content
        try:
            data = content.read_nowait()
        except Exception as exc:  # the reader's stored exception: upstream cut, timeout, bad framing
            return self._end(exc)
        if data:
            out = self._feed(data)  # also when the client left: the usage scan must see every byte
            if self._client.is_closing():
                return self._end(ClientGone("the client closed the connection mid-stream"))
            if out:  # (an empty chunk would end a chunked body)
                self._client.write(b"%x\r\n%b\r\n" % (len(out), out) if self._chunked else out)
        if content.at_eof():
            return self._end(None)
        if not self._paused and self._client.get_write_buffer_size() > HIGH_WATER:
            self._paused = True
            self._inner.pause_reading()
            self._signal()

    def _end(self, outcome: BaseException | None) -> None:
        self._finished, self._outcome = True, outcome
        self._stop()
        self._signal()

    def _stop(self) -> None:
        """Give the upstream socket back to aiohttp's protocol (synchronously: its pool may reuse it next)."""
        self._watch.cancel()
        if self._transport.get_protocol() is self:
            self._transport.set_protocol(self._inner)
        if self._paused and not self._transport.is_closing():
            self._paused = False
            self._inner.resume_reading()

    def _signal(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _drain(self) -> None:
        """Wait until the client took most of what is queued for it, then read the upstream again.

        Polled (only while a client reads slower than the upstream writes): aiohttp's server protocol
        has no public drain for writes that bypass its writer.
        """
        while not self._finished and not self._client.is_closing() \
                and self._client.get_write_buffer_size() > LOW_WATER:
            await asyncio.sleep(DRAIN_POLL_SECONDS)
        if self._client.is_closing() and not self._finished:
            self._end(ClientGone("the client closed the connection mid-stream"))
            return
        if not self._finished:
            self._paused = False
            self._inner.resume_reading()
            self._pump()
