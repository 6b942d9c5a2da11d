"""The gateway's front door against the real gateway, byte for byte: what a client without a token, a slow client,
a flood of connections or of bytes can take of it — and that a well-behaved client is answered throughout.

* the token is checked when a request's head is complete: without one, 401 before a byte of the body is read,
  no ``100 Continue``, the connection closed; a 60 MB tokenless body is never held;
* a head over the limit is refused however it arrives (in one piece as in 4 KB pieces);
* slowloris: 500 connections sending a byte a second are closed by the head deadline (their bytes never extend
  it) while a well-behaved client's requests are answered within a second; a body has a deadline too;
* caps: connections per client address (others still served), per token, in all (the listener waits, then serves);
  bytes of bodies in flight per trial and in all;
* a trial's own socket takes that trial's token only (another trial's is refused and billed to nobody), stops
  accepting at its cap while another trial's socket serves at once, and goes when closed;
* refusals are counted in ``anchorage_gateway_refusals_total{reason}`` and logged once per offender.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from rawhttp import read_answer

CHAT = json.dumps({"model": "mock-model", "messages": [{"role": "user", "content": "hi"}]}).encode()


def refusals(reason: str) -> float:
    return REGISTRY.get_sample_value("anchorage_gateway_refusals_total", {"reason": reason}) or 0.0


def head(token: str | None = None, *, length: int | None = None, extra: str = "",
         path: str = "/v1/chat/completions") -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    size = f"Content-Length: {length}\r\n" if length is not None else ""
    return f"POST {path} HTTP/1.1\r\nHost: gw\r\n{auth}Content-Type: application/json\r\n{size}{extra}\r\n".encode()


def chat(token: str) -> bytes:
    return head(token, length=len(CHAT)) + CHAT


def port_of(gateway: Any) -> int:
    return int(gateway.url.rsplit(":", 1)[1])


def connect(gateway: Any, source: str = "127.0.0.1", timeout: float = 10) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port_of(gateway)))
    return sock


def connect_unix(path: Path, timeout: float = 10) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(str(path))
    return sock


def read_all(sock: socket.socket, limit: float = 10) -> bytes:
    """Everything until the server closes (or ``limit`` seconds)."""
    data = bytearray()
    sock.settimeout(limit)
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return bytes(data)


def status_of(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else 0


def error_type(raw: bytes) -> str:
    return str(json.loads(raw.partition(b"\r\n\r\n")[2])["error"]["type"])


def well_behaved(gateway: Any, token: str, stop: threading.Event, latencies: list[float], source: str = "127.0.0.2",
                 path: Path | None = None) -> None:
    """A client that asks every 100 ms on a fresh connection and records how long each answer took (10 s: failed)."""
    while not stop.is_set():
        started = time.monotonic()
        try:
            with (connect_unix(path, 10) if path is not None else connect(gateway, source, 10)) as sock:
                sock.sendall(chat(token))
                status = read_answer(sock)[0]
            latencies.append(time.monotonic() - started if status == 200 else 10.0)
        except OSError:
            latencies.append(10.0)
        stop.wait(0.1)


# ----- the token before the body ----------------------------------------------------------------------------


def test_without_a_token_expect_100_continue_gets_401_and_no_100(gateway_factory: Any, upstream_factory: Any) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream)
    before = refusals("unauthorized")
    for token in (None, "atk-forged.token"):
        with connect(gateway) as sock:
            sock.sendall(head(token, length=60_000_000, extra="Expect: 100-continue\r\n"))  # the body never follows
            raw = read_all(sock)
        assert status_of(raw) == 401 and b"100 Continue" not in raw, raw[:200]
        assert error_type(raw) == "invalid_api_key"
        assert b"connection: close" in raw.lower()  # ... and the server closed it (read_all saw its end)
    assert refusals("unauthorized") == before + 2
    # with a token the client is told to go on
    token = gateway.issue_token("trial-a")
    with connect(gateway) as sock:
        sock.sendall(head(token, length=len(CHAT), extra="Expect: 100-continue\r\n"))
        assert sock.recv(25).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(CHAT)
        assert read_answer(sock)[0] == 200
    assert len(upstream.mock.seen) == 1  # the tokenless ones never reached it


def test_a_tokenless_60mb_body_is_refused_at_its_head_and_never_held(gateway_factory: Any,
                                                                     upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory())
    sent = 0
    with connect(gateway) as sock:
        sock.sendall(head(None, length=60 * 2**20))
        piece = b"x" * 2**20
        try:
            while sent < 60 * 2**20:
                sock.sendall(piece)
                sent += len(piece)
        except OSError:  # the gateway dropped what lingered and closed
            pass
        raw = read_all(sock, 5)
    assert sent < 16 * 2**20, sent  # it stopped reading after its answer (at most a linger's worth, and buffers)
    assert status_of(raw) in (401, 0)  # (a client that only writes may see the reset before the answer)
    assert REGISTRY.get_sample_value("anchorage_gateway_inflight_bytes") == 0


# ----- head and body limits and deadlines -------------------------------------------------------------------


def test_a_head_over_the_limit_is_refused_whole_or_in_pieces(gateway_factory: Any, upstream_factory: Any,
                                                              tmp_path: Path) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream, unix_socket=str(tmp_path / "gw.sock"))
    token = gateway.issue_token("trial-a")
    big = head(token, length=len(CHAT), extra="".join(f"X-Pad-{i}: {'p' * 1000}\r\n" for i in range(100))) + CHAT
    assert 100_000 < len(big) < 150_000
    before = refusals("head_too_large")
    for pieces in (1, len(big) // 4096 + 1):
        # in one piece on the unix socket (one write the gateway reads at once: its very first read), and in
        # 4 KB pieces on TCP
        with connect_unix(tmp_path / "gw.sock") if pieces == 1 else connect(gateway) as sock:
            step = -(-len(big) // pieces)
            try:
                for at in range(0, len(big), step):
                    sock.sendall(big[at:at + step])
            except OSError:
                pass
            raw = read_all(sock)
        assert status_of(raw) == 431, (pieces, raw[:200])
    assert refusals("head_too_large") == before + 2
    assert gateway.usage("trial-a").requests == 0 and not upstream.mock.seen


def test_slowloris_connections_close_at_the_head_deadline_while_a_good_client_is_answered(
        gateway_factory: Any, upstream_factory: Any) -> None:
    deadline = 3.0
    gateway = gateway_factory(upstream_factory(), front_door={"head_timeout_seconds": deadline,
                                                              "max_connections_per_client": 1000})
    token = gateway.issue_token("trial-good")
    before = refusals("head_timeout")
    latencies: list[float] = []
    stop = threading.Event()
    good = threading.Thread(target=well_behaved, args=(gateway, token, stop, latencies), daemon=True)
    good.start()

    async def slow_client() -> tuple[float, float, bytes]:
        dialled = time.monotonic()  # the gateway's clock for it starts after this (at its accept)...
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(gateway))
        opened = time.monotonic()  # ...and before this, which 500 connects in one loop delay
        message = head(token, length=len(CHAT)) + CHAT
        # one read waits all along, so the answer is taken when it comes however late this loop runs; the trickle
        # stops at the answer (a byte written after the gateway's linger would reset the connection, and a reset
        # drops an answer not yet read)
        answer = asyncio.ensure_future(reader.read(65536))
        got = b""
        try:
            for byte in message:  # a byte a second: never a whole head
                if answer.done():
                    break
                writer.write(bytes([byte]))
                await asyncio.wait({answer}, timeout=1.0)
            got = await asyncio.wait_for(answer, 10)
            while chunk := await asyncio.wait_for(reader.read(65536), 10):
                got += chunk
        except (OSError, TimeoutError) as exc:
            got = f"[client: {exc!r}] ".encode() + got  # not an answer: counted below with what came
        finally:
            answer.cancel()
        writer.close()
        now = time.monotonic()
        return now - dialled, now - opened, got

    async def all_of_them() -> list[tuple[float, float, bytes]]:
        return await asyncio.gather(*(slow_client() for _ in range(500)))

    try:
        results = asyncio.run(all_of_them())
    finally:
        stop.set()
        good.join(30)
    at_least = min(since_dial for since_dial, _, _ in results)
    at_most = max(since_open for _, since_open, _ in results)
    wrong = Counter(got[:80] for _, _, got in results
                    if not (status_of(got) == 408 and error_type(got) == "request_timeout"))
    assert not wrong, f"{sum(wrong.values())} of 500 not answered 408 request_timeout: {wrong.most_common(5)}"
    assert deadline <= at_least and at_most < deadline + 2.5, (at_least, at_most)  # trickling never extended it
    assert refusals("head_timeout") >= before + 500
    assert len(latencies) >= 20 and max(latencies) < 1.0, latencies
    assert gateway.usage("trial-good").requests == len(latencies)


def test_a_body_that_does_not_arrive_in_time_gets_408(gateway_factory: Any, upstream_factory: Any) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream, front_door={"body_timeout_seconds": 1.0})
    token = gateway.issue_token("trial-a")
    with connect(gateway) as sock:
        started = time.monotonic()  # before the head is sent: the gateway's body clock starts after it
        sock.sendall(head(token, length=len(CHAT)) + CHAT[:10])
        raw = read_all(sock)
    assert status_of(raw) == 408 and 1.0 <= time.monotonic() - started < 3.0
    assert gateway.usage("trial-a").requests == 0 and not upstream.mock.seen


# ----- caps --------------------------------------------------------------------------------------------------


def test_a_client_address_at_its_cap_is_closed_while_another_address_is_served(gateway_factory: Any,
                                                                               upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory(), front_door={"max_connections_per_client": 10})
    token = gateway.issue_token("trial-a")
    before = refusals("client_connections")
    held = [connect(gateway) for _ in range(10)]
    try:
        with connect(gateway) as extra:
            assert read_all(extra, 5) == b""  # closed at once, nothing said
        with connect(gateway, "127.0.0.2") as other:
            other.sendall(chat(token))
            assert read_answer(other)[0] == 200
        held[0].sendall(chat(token))  # the ones held are served
        assert read_answer(held[0])[0] == 200
    finally:
        for sock in held:
            sock.close()
    assert refusals("client_connections") == before + 1


def test_a_token_at_its_connection_cap_gets_429(gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory(), front_door={"max_connections_per_token": 2})
    token, other = gateway.issue_token("trial-a"), gateway.issue_token("trial-b")
    held = [connect(gateway) for _ in range(3)]
    try:
        for sock in held[:2]:
            sock.sendall(chat(token))
            assert read_answer(sock)[0] == 200
        held[2].sendall(chat(token))
        raw = read_all(held[2])
        assert status_of(raw) == 429 and error_type(raw) == "too_many_connections" and b"Retry-After: 1" in raw
        with connect(gateway) as sock:  # another trial's token is not held to trial-a's count
            sock.sendall(chat(other))
            assert read_answer(sock)[0] == 200
        held[0].close()  # a connection that closes frees its place
        time.sleep(0.2)
        with connect(gateway) as sock:
            sock.sendall(chat(token))
            assert read_answer(sock)[0] == 200
    finally:
        for sock in held:
            sock.close()
    assert gateway.usage("trial-a").requests == 3


def test_at_the_global_cap_a_new_connection_waits_then_is_served(gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory(), front_door={"max_connections": 4, "max_connections_per_client": 4,
                                                              "max_connections_per_token": 4})
    token = gateway.issue_token("trial-a")
    held = [connect(gateway, f"127.0.0.{i + 2}") for i in range(4)]
    time.sleep(0.2)
    assert REGISTRY.get_sample_value("anchorage_gateway_connections") == 4
    waiting = connect(gateway, "127.0.0.9")  # the kernel's backlog takes it; the gateway does not accept it
    waiting.sendall(chat(token))
    waiting.settimeout(1.0)
    with pytest.raises(TimeoutError):
        waiting.recv(1)
    held.pop().close()
    waiting.settimeout(10)
    assert read_answer(waiting)[0] == 200
    for sock in [*held, waiting]:
        sock.close()


def test_bytes_in_flight_are_capped_per_trial_and_in_all(gateway_factory: Any, upstream_factory: Any) -> None:
    mib = 2**20
    gateway = gateway_factory(upstream_factory(), front_door={
        "max_body_bytes": mib, "max_inflight_bytes_per_token": 2 * mib, "max_inflight_bytes": 3 * mib})
    a, b = gateway.issue_token("trial-a"), gateway.issue_token("trial-b")
    held = []
    try:
        for token in (a, a):  # two whole bodies announced, not sent: their bytes are held for them
            sock = connect(gateway)
            sock.sendall(head(token, length=mib))
            held.append(sock)
        time.sleep(0.2)
        assert REGISTRY.get_sample_value("anchorage_gateway_inflight_bytes") == 2 * mib
        with connect(gateway) as sock:
            sock.sendall(head(a, length=mib))
            raw = read_all(sock)
        assert status_of(raw) == 429 and error_type(raw) == "too_many_bytes_in_flight"
        sock = connect(gateway)
        sock.sendall(head(b, length=mib))
        held.append(sock)
        with connect(gateway) as sock:
            sock.sendall(head(b, length=mib // 2))
            raw = read_all(sock)
        assert status_of(raw) == 503 and error_type(raw) == "gateway_busy"
        held.pop(0).close()  # its bytes are released with it
        time.sleep(0.2)
        with connect(gateway) as sock:
            sock.sendall(chat(a))
            assert read_answer(sock)[0] == 200
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.2)
    assert REGISTRY.get_sample_value("anchorage_gateway_inflight_bytes") == 0


# ----- a trial's own socket ----------------------------------------------------------------------------------


def test_a_trials_socket_takes_its_own_token_only(gateway_factory: Any, upstream_factory: Any,
                                                  tmp_path: Path) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream, host=None, unix_socket=str(tmp_path / "gw.sock"))
    mine, theirs = gateway.issue_token("trial-a"), gateway.issue_token("trial-b")
    path = gateway.open_trial_socket("trial-a")
    assert gateway.open_trial_socket("trial-a") == path and path.is_socket()
    before = refusals("wrong_socket")
    with connect_unix(path) as sock:
        sock.sendall(chat(theirs))
        raw = read_all(sock)
    assert status_of(raw) == 401 and b"another trial" in raw
    with connect_unix(path) as sock:
        sock.sendall(chat(mine))
        assert read_answer(sock)[0] == 200
    assert refusals("wrong_socket") == before + 1
    assert gateway.usage("trial-a").requests == 1 and gateway.usage("trial-b").requests == 0  # billed to nobody
    with connect_unix(tmp_path / "gw.sock") as sock:  # the shared socket takes any valid token
        sock.sendall(chat(theirs))
        assert read_answer(sock)[0] == 200
    held = connect_unix(path)
    gateway.close_trial_socket("trial-a")
    assert not path.exists() and read_all(held, 5) == b""  # its connections go with it
    held.close()
    gateway.close_trial_socket("trial-a")  # again: nothing


def test_a_trials_socket_at_its_cap_stops_accepting_while_another_trial_is_served(
        gateway_factory: Any, upstream_factory: Any, tmp_path: Path) -> None:
    gateway = gateway_factory(upstream_factory(), host=None, unix_socket=str(tmp_path / "gw.sock"),
                              front_door={"max_connections_per_client": 8})
    flood, calm = gateway.open_trial_socket("flood"), gateway.open_trial_socket("calm")
    token = gateway.issue_token("calm")
    opened, refused = [], 0
    for _ in range(2000):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(str(flood))
            opened.append(sock)
        except BlockingIOError:  # its backlog is full: the kernel says so, the gateway spends nothing
            sock.close()
            refused += 1
    try:
        time.sleep(0.3)
        assert len(opened) <= 8 + 65 and refused >= 2000 - 8 - 65
        assert REGISTRY.get_sample_value("anchorage_gateway_connections") == 8
        with connect_unix(calm, 1.0) as sock:
            sock.sendall(chat(token))
            assert read_answer(sock)[0] == 200
    finally:
        for sock in opened:
            sock.close()


def test_refusals_are_logged_once_per_offender(gateway_factory: Any, upstream_factory: Any,
                                               caplog: pytest.LogCaptureFixture) -> None:
    gateway = gateway_factory(upstream_factory())
    before = refusals("unauthorized")
    with caplog.at_level(logging.WARNING, logger="anchorage.gateway"):
        for source in ("127.0.0.3",) * 30 + ("127.0.0.4",) * 5:
            with connect(gateway, source) as sock:
                sock.sendall(head(None, length=0))
                assert status_of(read_all(sock)) == 401
    said = [r.getMessage() for r in caplog.records if "(unauthorized)" in r.getMessage()]
    assert len(said) == 2 and "address 127.0.0.3" in said[0] and "address 127.0.0.4" in said[1], said
    assert refusals("unauthorized") == before + 35
