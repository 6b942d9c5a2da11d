"""The upload sidecar's own name resolution (a trial pod has no DNS): the search domains in resolv.conf's order, the
answer's addresses (compressed names, CNAME chains), NXDOMAIN against an unanswered server, and ``getaddrinfo``
routed through it — against a small DNS responder on loopback. The real one (CoreDNS) answers in
``tests/kube/test_pod_lifecycle.py``."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from anchorage.runtime.kube import resolver

RECORDS = {"s3.store.svc.cluster.local": ["10.1.2.3"], "alias.example": ["10.9.9.9", "10.9.9.8"]}


def respond(query: bytes) -> bytes:
    """An answer as a recursive server gives it: for alias.example a CNAME chain, names compressed."""
    ident, _, _, _, _, _ = struct.unpack("!HHHHHH", query[:12])
    pos, labels = 12, []
    while query[pos]:
        labels.append(query[pos + 1:pos + 1 + query[pos]].decode())
        pos += 1 + query[pos]
    question = query[12:pos + 5]
    name = ".".join(labels)
    found = RECORDS.get(name)
    if found is None:
        return struct.pack("!HHHHHH", ident, 0x8183, 1, 0, 0, 0) + question  # NXDOMAIN
    answers = b""
    count = len(found)
    if name == "alias.example":  # a CNAME first (type 5), pointing at the question's name
        answers += struct.pack("!HHHIH", 0xC00C, 5, 1, 60, 2) + b"\xc0\x0c"
        count += 1
    for address in found:
        answers += struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton(address)
    return struct.pack("!HHHHHH", ident, 0x8180, 1, count, 0, 0) + question + answers


@pytest.fixture
def server() -> Iterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(4096)
            except TimeoutError:
                continue
            sock.sendto(respond(data), peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    stop.set()
    thread.join()
    sock.close()


def test_a_service_name_resolves_through_the_search_domains(server: str) -> None:
    search = ["svc.cluster.local", "cluster.local"]
    assert resolver.candidates("s3.store.svc", search) == [
        "s3.store.svc", "s3.store.svc.svc.cluster.local", "s3.store.svc.cluster.local"]
    assert resolver.candidates("s3", search) == ["s3.svc.cluster.local", "s3.cluster.local", "s3"]
    assert resolver.resolve("s3.store.svc", [server], search) == ["10.1.2.3"]
    assert resolver.resolve("alias.example", [server], search) == ["10.9.9.9", "10.9.9.8"]
    with pytest.raises(socket.gaierror) as nothing:
        resolver.resolve("nowhere.example", [server], search)
    assert nothing.value.errno == socket.EAI_NONAME


def test_no_server_answering_is_try_again_after_the_query_timeout_in_force() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        server = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with resolver.query_timeout(0.2), pytest.raises(socket.gaierror) as again:
            resolver.resolve("s3.store.svc", [server], ["cluster.local"])  # two names asked: 0.4 s
        waited = time.monotonic() - started
        assert resolver._timeout == resolver.TIMEOUT  # back to the usual wait after the block
        with pytest.raises(OSError):
            resolver.lookup("s3.store.svc", [server])  # the usual 2 s
        usual = time.monotonic() - started - waited
    assert again.value.errno == socket.EAI_AGAIN
    assert 0.35 <= waited < 1.5, f"two unanswered queries took {waited:.2f} s under a 0.2 s timeout"
    assert usual >= resolver.TIMEOUT - 0.1, usual


def test_getaddrinfo_goes_through_it_and_ip_addresses_pass(server: str) -> None:
    original = resolver.install([server], ["cluster.local"])
    try:
        found = socket.getaddrinfo("s3.store.svc", 7070, type=socket.SOCK_STREAM)
        assert {info[4] for info in found} == {("10.1.2.3", 7070)}
        assert socket.getaddrinfo("127.0.0.1", 80, type=socket.SOCK_STREAM)[0][4] == ("127.0.0.1", 80)
        with pytest.raises(socket.gaierror):
            socket.getaddrinfo("nowhere.example", 80)
    finally:
        socket.getaddrinfo = original
