"""Name resolution of a trial pod's upload sidecar, through the cluster DNS servers it is given.

A trial pod whose agent runs has no DNS (``anchorage.runtime.kube.jobs.agent_network``: its only nameserver is the
pod's own loopback, where nothing answers), and its containers share that resolver configuration. The upload sidecar
reaches the store only after the agent has ended (the operator then labels the pod ``anchorage.dev/store-access``,
which opens the cluster DNS and the store to it), and a store is reached by name: so the sidecar, and only it, resolves
names itself, asking the servers in ``ANCHORAGE_RESOLVER`` (comma-separated addresses) with the search domains of
``ANCHORAGE_RESOLVER_SEARCH``. :func:`install` puts that resolver under :func:`socket.getaddrinfo` in this process
(what the S3 client's connections call); IP addresses and ``localhost`` pass through unchanged.

A stub resolver of IPv4 addresses: one question (``A``) per name and search domain, over UDP (TCP when the answer
is truncated), the addresses of the answer section (the server follows CNAMEs for us); a name with at least
:data:`NDOTS` dots is tried as it is first, others after the search domains. No library of the operator image
does this (glibc reads only ``/etc/resolv.conf``), hence this module.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import socket
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

#: The upload sidecar's cluster DNS servers and search domains (set by ``anchorage.runtime.kube.jobs``).
RESOLVER_ENV, SEARCH_ENV = "ANCHORAGE_RESOLVER", "ANCHORAGE_RESOLVER_SEARCH"
#: Names with at least this many dots are tried as they are before the search domains.
NDOTS = 1
PORT = 53
#: Seconds a query waits for its answer (:func:`query_timeout` changes it for a while).
TIMEOUT = 2.0
_timeout = TIMEOUT
A, IN = 1, 1
NXDOMAIN = 3
AddrInfo = list[tuple[Any, ...]]


def question(name: str, ident: int) -> bytes:
    """A DNS query for the ``A`` records of ``name`` (recursion desired)."""
    labels = [label for label in name.rstrip(".").split(".") if label]
    if not labels or any(len(label.encode("idna")) > 63 for label in labels):
        raise socket.gaierror(socket.EAI_NONAME, f"{name!r} is not a valid host name")
    qname = b"".join(bytes([len(encoded)]) + encoded for encoded in (label.encode("idna") for label in labels))
    return struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + qname + b"\0" + struct.pack("!HH", A, IN)


def _skip_name(data: bytes, pos: int) -> int:
    """The offset after the (possibly compressed) name at ``pos``."""
    while True:
        length = data[pos]
        if length & 0xC0 == 0xC0:
            return pos + 2
        if length == 0:
            return pos + 1
        pos += 1 + length


def answer(data: bytes, ident: int) -> tuple[int, bool, list[str]]:
    """(response code, truncated, the IPv4 addresses of the answer section) of a DNS response to query ``ident``."""
    if len(data) < 12:
        raise OSError("a DNS answer shorter than its header")
    got, flags, questions, answers, _, _ = struct.unpack("!HHHHHH", data[:12])
    if got != ident or not flags & 0x8000:
        raise OSError("a DNS answer to another question")
    pos = 12
    for _ in range(questions):
        pos = _skip_name(data, pos) + 4
    found: list[str] = []
    for _ in range(answers):
        pos = _skip_name(data, pos)
        rtype, rclass, _ttl, length = struct.unpack("!HHIH", data[pos:pos + 10])
        pos += 10
        if rtype == A and rclass == IN and length == 4:
            found.append(socket.inet_ntoa(data[pos:pos + 4]))
        pos += length
    return flags & 0x000F, bool(flags & 0x0200), found


def _address(server: str) -> tuple[str, int]:
    """A server as ``IP`` (port 53) or ``IPv4:PORT``."""
    host, colon, port = server.rpartition(":")
    if colon and "." in host and port.isdigit():
        return host, int(port)
    return server, PORT


@contextlib.contextmanager
def query_timeout(seconds: float) -> Iterator[None]:
    """Within it, each query of this process waits ``seconds`` for its answer, not :data:`TIMEOUT`: for a probe
    that expects no answer while a NetworkPolicy still drops its packets, and tries again soon."""
    global _timeout
    before, _timeout = _timeout, seconds
    try:
        yield
    finally:
        _timeout = before


def _exchange(query: bytes, server: str, *, tcp: bool) -> bytes:
    address = _address(server)
    if not tcp:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(_timeout)
            sock.sendto(query, address)
            return sock.recv(65535)
    with socket.create_connection(address, timeout=_timeout) as conn:
        conn.sendall(struct.pack("!H", len(query)) + query)
        size = struct.unpack("!H", _read(conn, 2))[0]
        return _read(conn, size)


def _read(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise OSError("the DNS server closed the connection")
        data += chunk
    return data


def lookup(name: str, servers: Sequence[str]) -> list[str] | None:
    """The ``A`` addresses of exactly ``name`` ([] when the name has none, None when it does not exist); OSError when
    no server answered."""
    problem: OSError | None = None
    for server in servers:
        ident = secrets.randbelow(65536)
        query = question(name, ident)
        try:
            code, truncated, found = answer(_exchange(query, server, tcp=False), ident)
            if truncated:
                code, _, found = answer(_exchange(query, server, tcp=True), ident)
        except OSError as exc:
            problem = exc
            continue
        if code == NXDOMAIN:
            return None
        if code == 0:
            return found
        problem = OSError(f"the DNS server {server} answered code {code} for {name}")
    raise problem or OSError("no DNS server to ask")


def candidates(name: str, search: Sequence[str]) -> list[str]:
    """The names to ask for ``name``, in order (resolv.conf's rules with ``ndots`` :data:`NDOTS`)."""
    if name.endswith("."):
        return [name]
    searched = [f"{name}.{domain.strip('.')}" for domain in search if domain.strip(".")]
    return [name, *searched] if name.count(".") >= NDOTS else [*searched, name]


def resolve(name: str, servers: Sequence[str], search: Sequence[str]) -> list[str]:
    """The IPv4 addresses of ``name`` through ``servers``; :class:`socket.gaierror` when it has none or no server
    answered (``EAI_AGAIN``: try again later)."""
    unreachable: OSError | None = None
    for candidate in candidates(name, search):
        try:
            found = lookup(candidate, servers)
        except OSError as exc:
            unreachable = exc
            continue
        if found:
            return found
    if unreachable is not None:
        raise socket.gaierror(socket.EAI_AGAIN, f"no DNS server answered for {name}: {unreachable}")
    raise socket.gaierror(socket.EAI_NONAME, f"{name} has no address")


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host in ("localhost", "")
    return True


def install(servers: Sequence[str], search: Sequence[str]) -> Callable[..., AddrInfo]:
    """Resolve every host name of this process through ``servers`` (see the module docstring); returns the
    :func:`socket.getaddrinfo` it replaced."""
    original = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,
                    flags: int = 0) -> AddrInfo:
        name = host.decode() if isinstance(host, bytes) else host
        if name is None or _is_literal(str(name)) or family == socket.AF_INET6:
            return original(host, port, family, type, proto, flags)
        found: AddrInfo = []
        for address in resolve(str(name), servers, search):
            found += original(address, port, socket.AF_INET, type, proto, flags | socket.AI_NUMERICHOST)
        return found

    socket.getaddrinfo = getaddrinfo
    return original


def install_from_env() -> bool:
    """:func:`install` with the servers and search domains of ``ANCHORAGE_RESOLVER`` / ``..._SEARCH``; False (nothing
    installed) without servers."""
    servers = [s.strip() for s in os.environ.get(RESOLVER_ENV, "").split(",") if s.strip()]
    if not servers:
        return False
    install(servers, os.environ.get(SEARCH_ENV, "").split())
    return True
