"""Relay a streamed upstream body to the client from the upstream socket's data callback (the hot path).

Used by :mod:`anchorage.gateway.server` for every streamed answer. The upstream connection
(:mod:`anchorage.gateway.upstream`) parses each ``recv`` with httptools and hands what it parsed to
:class:`PushRelay`'s sink in the same callback: the usage scan sees it and it is written to the client's
socket, framed as one HTTP/1.1 chunk. The handler task sleeps until the body ends, fails, or the client's
socket needs draining — no future, task wake-up or reader/writer object per chunk. Nothing is held back:
every piece is written as soon as it was parsed.

The upstream's idle timeout (no byte for ``timeout_seconds``) is watched by the connection itself
(:class:`anchorage.gateway.upstream.IdleWatch`); a slow client pauses the upstream socket's reading
above :data:`HIGH_WATER` bytes queued for it until it took all but :data:`LOW_WATER` of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from anchorage.gateway.upstream import UpstreamResponse

# Above this many bytes queued for the client, stop reading the upstream until the client caught up.
HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024
DRAIN_POLL_SECONDS = 0.005


class ClientGone(ConnectionResetError):
    """The client closed its connection while the stream was relayed."""


class PushRelay:
    """Relays one upstream body to ``client`` (a transport) as its bytes arrive; see the module docstring.

    ``feed`` sees every relayed piece (the usage scan) and returns what to write of it (all of it, but
    for a usage chunk the client did not ask for). ``chunked``: frame each write as an HTTP/1.1 chunk (the
    client's response uses chunked transfer encoding). ``drained``: awaitable until the client's transport
    accepts writes again (the server's flow control); without it the relay polls the buffer's size.
    """

    def __init__(self, upstream: UpstreamResponse, client: asyncio.WriteTransport, *, chunked: bool,
                 feed: Callable[[bytes], bytes], drained: Callable[[], Awaitable[None]] | None = None) -> None:
        self._upstream = upstream
        self._client = client
        self._chunked = chunked
        self._feed = feed
        self._drained = drained
        self._paused = False

    async def run(self) -> None:
        """Relay until the body ended; raises what ended it otherwise (upstream error, timeout, :class:`ClientGone`)."""
        done = self._upstream.attach(self._sink)
        while True:
            try:
                await done
                return
            except _Pause:
                pass
            await self._drain()
            if self._client.is_closing():
                raise ClientGone("the client closed the connection mid-stream")
            done = self._upstream.attach(self._sink)
            self._upstream.resume_reading()

    def _sink(self, data: bytes) -> None:
        out = self._feed(data)  # also when the client left: the usage scan must see every byte
        client = self._client
        if client.is_closing():
            self._upstream.detach(ClientGone("the client closed the connection mid-stream"))
            return
        if out:  # (an empty chunk would end a chunked body)
            client.write(b"%x\r\n%b\r\n" % (len(out), out) if self._chunked else out)
            if client.get_write_buffer_size() > HIGH_WATER:
                self._upstream.pause_reading()
                self._upstream.detach(_Pause())

    async def _drain(self) -> None:
        """Wait until the client took most of what is queued for it."""
        if self._drained is not None:
            await self._drained()
            return
        client = self._client
        while not client.is_closing() and client.get_write_buffer_size() > LOW_WATER:
            await asyncio.sleep(DRAIN_POLL_SECONDS)


class _Pause(Exception):
    """The client's buffer is full: the relay's task waits for it to drain, then attaches again."""
