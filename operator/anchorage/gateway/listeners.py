"""The model API's listening sockets: an accept loop that stops accepting at the front door's caps.

Used by :class:`anchorage.gateway.http.HttpServer` (``start_tcp``, ``start_unix``). asyncio's servers accept
whatever comes, so a flood of connections takes descriptors until the process has none left; here a listener asks
the :class:`~anchorage.gateway.frontdoor.Doorkeeper` before each accept. At the gateway's cap every listener stops
reading its socket (the kernel's backlog holds further clients, then refuses them) and starts again when a
connection closes. A listener that serves one client — a trial's own socket, *owned* by the trial — stops likewise
at that client's cap, so a trial's flood waits in its own backlog and costs nobody else a descriptor. A listener
shared by many clients tells them apart after accept (TCP: the remote address; a shared unix socket: the peer's
uid) and closes a connection of a client at its cap at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from anchorage.gateway.frontdoor import Doorkeeper

log = logging.getLogger("anchorage.gateway")

ACCEPT_BATCH = 64  # connections accepted per wake-up of a listener (then the loop serves others)
RETRY_AFTER_EMFILE = 0.5  # seconds a listener rests after the process ran out of descriptors
_OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class Listener:
    """One listening socket of the model API.

    ``owner``: the trial this socket belongs to (it takes that trial's token only, and is that trial's client for the
    caps); None for a shared socket. ``connect``: makes the connection's protocol on an accepted socket, given the
    listener and the client's name (returns once the protocol is connected).
    """

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop, door: Doorkeeper,
                 connect: Callable[[socket.socket, Listener, str], Any], *, owner: str | None = None,
                 path: Path | None = None) -> None:
        sock.setblocking(False)
        self.sock, self.loop, self.door, self._connect = sock, loop, door, connect
        self.owner, self.path = owner, path
        self.unix = sock.family == socket.AF_UNIX
        self.client = f"the socket of trial {owner}" if owner is not None else None
        self.paused = True
        self.closed = False
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def start(self) -> None:
        """Accept connections (again, after a pause) when the caps allow."""
        if self.paused and not self.closed:
            self.paused = False
            self.loop.add_reader(self.sock.fileno(), self._accept)

    def pause(self) -> None:
        if not self.paused and not self.closed:
            self.paused = True
            self.loop.remove_reader(self.sock.fileno())

    def close(self) -> None:
        """Stop listening (the socket file of a unix listener is removed)."""
        self.pause()
        self.closed = True
        self.sock.close()
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()

    def _accept(self) -> None:
        door = self.door
        for _ in range(ACCEPT_BATCH):
            if not door.may_accept(self.client):
                self.pause()  # started again by a closing connection (HttpServer.connection_closed)
                return
            try:
                conn, address = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_DESCRIPTORS:
                    door.refused("descriptors", "the gateway process", f"accept failed: {exc.strerror}")
                    self.pause()
                    self.loop.call_later(RETRY_AFTER_EMFILE, self.start)
                    return
                continue  # the client left before it was accepted (ECONNABORTED, EPROTO, ...)
            client = self.client or self._client_of(conn, address)
            if not door.opened(client):
                door.refused("client_connections", client,
                             f"more than {door.limits.max_connections_per_client} open connections")
                conn.close()
                continue
            conn.setblocking(False)
            if not self.unix:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = self.loop.create_task(self._connect(conn, self, client))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _client_of(self, conn: socket.socket, address: Any) -> str:
        if not self.unix:
            return f"address {address[0]}"
        with contextlib.suppress(OSError):
            _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                  struct.calcsize("3i")))
            return f"uid {uid}"
        return "a unix peer"


def tcp_sockets(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets on every address ``host`` resolves to (one port for all, ``port`` 0: a free one)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    made: list[socket.socket] = []
    seen: set[tuple[int, Any]] = set()
    try:
        for family, kind, proto, _name, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            made.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if made[0] is not sock:  # port 0: the port the first socket got, for all
                address = (address[0], made[0].getsockname()[1], *address[2:])
            sock.bind(address)
            sock.listen(backlog)
    except BaseException:
        for sock in made:
            sock.close()
        raise
    return made


def unix_socket(path: Path, backlog: int) -> socket.socket:
    """A listening unix socket at ``path`` (a stale socket file there is replaced)."""
    if path.is_socket():
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock
