"""The gateway's own HTTP/1.1 client (anchorage.gateway.upstream) against raw TCP servers that answer byte for byte:
framing (content-length, chunked, until close), repeated headers, keep-alive reuse, a kept-alive connection the
server closed, an answer broken off, an upstream that goes quiet, and garbage instead of HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from anchorage.gateway.upstream import (
    UpstreamBadResponse,
    UpstreamConnectError,
    UpstreamDisconnected,
    UpstreamPool,
    UpstreamTimeout,
    request_head,
)

Answer = Callable[[int, bytes], bytes | None]  # (request number on this server, request bytes) -> what to send back


class RawServer:
    """Answers each request with scripted bytes; ``close_after`` closes the connection after the answer."""

    def __init__(self, answer: Answer, *, close_after: bool = False) -> None:
        self.answer, self.close_after = answer, close_after
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                out = self.answer(len(self.requests), request)
                if out is None:  # hold: say nothing
                    await asyncio.sleep(30)
                    return
                writer.write(out)
                await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            for writer in self.writers:
                writer.close()
            await self.server.wait_closed()


SERVERS: list[RawServer] = []


@pytest.fixture
async def pool() -> AsyncIterator[UpstreamPool]:
    made = UpstreamPool()
    yield made
    await made.close()
    while SERVERS:
        await SERVERS.pop().stop()


async def serve(answer: Answer, **options: Any) -> tuple[RawServer, str]:
    server = RawServer(answer, **options)
    SERVERS.append(server)
    return server, await server.start()


async def post(pool: UpstreamPool, url: str, body: bytes = b"{}", *,
               timeout: float = 5.0) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    origin = pool.origin(url)
    response = await pool.request(origin, request_head(b"POST", origin, b"/v1/chat/completions?x=1",
                                                       b"Content-Type: application/json\r\n", len(body)),
                                  body, read_timeout=timeout)
    try:
        return response.status, response.headers, await response.read()
    finally:
        response.close()


async def test_a_content_length_answer_is_read_and_its_connection_reused(pool: UpstreamPool) -> None:
    server, url = await serve(lambda n, _: b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-N: %d\r\n\r\nhello" % n)
    for n in (1, 2, 3):
        status, headers, body = await post(pool, url)
        assert (status, body, (b"X-N", str(n).encode()) in headers) == (200, b"hello", True)
    assert server.connections == 1 and pool.idle_connections(url) == 1
    assert server.requests[0].startswith(b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: 127.0.0.1:")
    assert server.requests[0].endswith(b"Content-Length: 2\r\n\r\n{}")


async def test_chunked_and_close_delimited_bodies_and_repeated_headers(pool: UpstreamPool) -> None:
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nSet-Thing: a\r\nSet-Thing: b\r\n\r\n"
               b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n")
    _server, url = await serve(lambda n, _: chunked)
    status, headers, body = await post(pool, url)
    assert (status, body) == (200, b"abcdefg")
    assert [v for k, v in headers if k.lower() == b"set-thing"] == [b"a", b"b"]
    assert pool.idle_connections(url) == 1
    _until_close, url2 = await serve(lambda n, _: b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it",
                                     close_after=True)
    assert (await post(pool, url2))[::2] == (200, b"all of it")
    assert pool.idle_connections(url2) == 0  # the connection ended the body: never reused


async def test_a_kept_alive_connection_the_server_closed_is_replaced_without_an_error(pool: UpstreamPool) -> None:
    """The server says keep-alive, then closes after each answer (as an upstream's idle timeout does)."""
    server, url = await serve(lambda n, _: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", close_after=True)
    assert (await post(pool, url))[2] == b"ok"
    await asyncio.sleep(0.05)  # the close reached the pool: the connection left it
    assert (await post(pool, url))[2] == b"ok"
    assert server.connections == 2


async def test_a_request_that_meets_a_just_closed_connection_is_sent_once_more(pool: UpstreamPool) -> None:
    server, url = await serve(lambda n, _: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", close_after=True)
    origin = pool.origin(url)
    assert (await post(pool, url))[2] == b"ok"
    # the close has not been seen yet when the next request goes out on the pooled connection
    conn = pool._idle[origin][-1]
    conn.alive = True
    assert (await post(pool, url))[2] == b"ok"
    assert server.connections == 2 and len(server.requests) == 2


async def test_an_answer_broken_off_mid_body_raises(pool: UpstreamPool) -> None:
    _server, url = await serve(lambda n, _: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this",
                              close_after=True)
    with pytest.raises(UpstreamDisconnected) as caught:
        await post(pool, url)
    assert not caught.value.before_answer
    assert pool.open_connections() == 0


async def test_an_upstream_that_goes_quiet_times_out(pool: UpstreamPool) -> None:
    _server, url = await serve(lambda n, _: None)
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(UpstreamTimeout, match="timeout_seconds"):
        await post(pool, url, timeout=0.2)
    assert 0.15 <= loop.time() - start <= 0.25 * 1.25 + 1.0


async def test_garbage_instead_of_http_and_nothing_listening(pool: UpstreamPool) -> None:
    server, url = await serve(lambda n, _: b"SSH-2.0-OpenSSH\r\n\r\n")
    with pytest.raises(UpstreamBadResponse):
        await post(pool, url)
    await server.stop()
    with pytest.raises(UpstreamConnectError):
        await post(pool, url)


async def test_a_body_attached_to_a_sink_gets_each_piece_as_it_arrives(pool: UpstreamPool) -> None:
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(2)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await release.wait()
        writer.write(b"6\r\nsecond\r\n0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    origin = pool.origin(url)
    response = await pool.request(origin, request_head(b"POST", origin, b"/", b"", 2), b"{}", read_timeout=5)
    pieces: list[bytes] = []
    done = response.attach(pieces.append)
    for _ in range(100):
        if pieces:
            break
        await asyncio.sleep(0.01)
    assert pieces == [b"first"] and not done.done()  # the first piece came before the body ended
    release.set()
    await asyncio.wait_for(done, 5)
    assert pieces == [b"first", b"second"] and response.complete
    server.close()
    await server.wait_closed()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (made by openssl, as a private CA would)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=upstream",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


async def test_an_https_upstream_is_verified_and_spoken_to_over_tls(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0]))
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret")
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=served)
    url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    trusting = UpstreamPool(ssl_context=ssl.create_default_context(cafile=str(cert)))
    default = UpstreamPool()
    try:
        for _ in range(2):
            assert (await post(trusting, url))[::2] == (200, b"secret")
        assert trusting.open_connections() == 1  # kept alive over TLS
        with pytest.raises(UpstreamConnectError, match="certificate"):  # not signed by a CA the system trusts
            await post(default, url)
    finally:
        await trusting.close()
        await default.close()
        server.close()
        await server.wait_closed()
