"""The operator's API client's own HTTP/1.1 connections (``anchorage.controller.connections``) against raw scripted
servers: one connection reused for sequential requests, an idle connection the server closed replaced (noticed
before reuse, or as the request goes out), ``Connection: close`` honoured, chunked bodies and bodies delimited by the
connection's end, an answer cut short or not HTTP as a connection error, and HTTP proxies (absolute form with the
proxy's credentials; a ``CONNECT`` tunnel to a TLS server whose certificate is still checked)."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import kubernetes
import pytest

from anchorage.controller import connections, kube
from anchorage_devcluster import pki
from rawhttp import http_proxy, ok, read_message

#: (connection number, request number on it, the request's head) → (raw answer, close the connection after it)
Script = Callable[[int, int, bytes], tuple[bytes, bool]]


@dataclass
class RawServer:
    """A TCP (or TLS) server answering what ``script`` says, counting connections and keeping request heads."""

    script: Script
    tls: ssl.SSLContext | None = None
    connections: int = 0
    heads: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            number = self.connections
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            buffer = bytearray()
            for index in range(1000):
                message = read_message(conn, buffer)
                if message is None:
                    return
                head = message[0]
                self.heads.append(head)
                answer, close = self.script(number, index, head)
                conn.sendall(answer)
                if close:
                    return
        except OSError:
            return
        finally:
            conn.close()

    def stop(self) -> None:
        self.stopped = True
        self.sock.close()


@pytest.fixture
def raw() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def start(script: Script, tls: ssl.SSLContext | None = None) -> RawServer:
        servers.append(RawServer(script, tls))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def _client(url: str, **settings: object) -> kube.Client:
    configuration = kubernetes.client.Configuration()
    configuration.host = url
    configuration.api_key = {"BearerToken": "Bearer t"}
    for key, value in settings.items():
        setattr(configuration, key, value)
    return kube.Client(configuration)


def test_sequential_requests_reuse_one_connection(raw: Callable[..., RawServer]) -> None:
    server = raw(lambda c, i, head: (ok(), False))
    client = _client(server.url)
    for _ in range(5):
        assert client.request("PATCH", "/a", {"x": 1}) == {"ok": True}
    assert server.connections == 1
    assert server.heads[0].startswith(b"PATCH /a?fieldValidation=Strict HTTP/1.1\r\n")
    assert b"Authorization: Bearer t" in server.heads[0] and b"Content-Length: 7" in server.heads[0]
    client.close()


def test_an_idle_connection_the_server_closed_is_replaced(raw: Callable[..., RawServer],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    server = raw(lambda c, i, head: (ok(), True))  # closes after every answer, without saying so
    client = _client(server.url)
    monkeypatch.setattr(kube.Client, "ATTEMPTS", 1)  # no retry layer: the connections replace it themselves
    for _ in range(3):
        assert client.request("GET", "/a") == {"ok": True}
    assert server.connections == 3
    # closed as the request goes out (its end not seen yet when it was taken): sent again once, on a new one
    monkeypatch.setattr(connections, "_readable", lambda sock: False)
    assert client.request("POST", "/b", {}) == {"ok": True}
    assert server.connections == 4 and [h.split(b" ")[1] for h in server.heads[-2:]] == [b"/a", b"/b?fieldValidation=Strict"]
    client.close()


def test_connection_close_is_honoured(raw: Callable[..., RawServer]) -> None:
    server = raw(lambda c, i, head: (ok(extra="Connection: close\r\n"), False))
    client = _client(server.url)
    client.request("GET", "/a")
    client.request("GET", "/b")
    assert server.connections == 2
    client.close()


def test_chunked_bodies_and_bodies_ending_with_the_connection(raw: Callable[..., RawServer]) -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n"
    until_end = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"b\":2}"
    server = raw(lambda c, i, head: (chunked, False) if b"/chunked" in head else (until_end, True))
    client = _client(server.url)
    assert client.request("GET", "/chunked") == {"a": 1}
    assert client.request("GET", "/chunked") == {"a": 1}
    assert client.request("GET", "/end") == {"b": 2}
    assert client.request("GET", "/chunked") == {"a": 1}
    assert server.connections == 2, "kept alive after the chunked answers, not after the one ending with it"
    client.close()


@pytest.mark.parametrize("answer", [b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"cut", b"SSH-2.0-OpenSSH\r\n\r\n"])
def test_an_answer_cut_short_or_not_http_is_a_connection_error(raw: Callable[..., RawServer], answer: bytes,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    server = raw(lambda c, i, head: (answer, True))
    monkeypatch.setattr(kube.Client, "ATTEMPTS", 2)
    client = _client(server.url)
    with pytest.raises(connections.ConnectionLost):
        client.request("GET", "/a")
    assert server.connections == 2, "the retry layer tried it again"
    client.close()


def test_http_proxies_absolute_form_and_connect_tunnels(raw: Callable[..., RawServer], tmp_path: Path) -> None:
    seen: list[bytes] = []
    proxy = http_proxy(seen)
    proxy_url = f"http://user:p%40ss@127.0.0.1:{proxy.getsockname()[1]}"
    try:
        plain = _client("http://api.internal:8080", proxy=proxy_url, proxy_headers={"X-Proxy-Tag": "t"})
        assert plain.request("GET", "/api") == {"via": "proxy"}
        assert seen[0].startswith(b"GET http://api.internal:8080/api HTTP/1.1\r\n")
        assert b"Proxy-Authorization: Basic dXNlcjpwQHNz" in seen[0] and b"X-Proxy-Tag: t" in seen[0]
        authority = pki.Authority(tmp_path / "pki")
        pair = authority.issue("server", "api", server=True, hosts=("127.0.0.1",))
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(str(pair.cert), str(pair.key))
        server = raw(lambda c, i, head: (ok(), False), tls)
        tunnelled = _client(server.url, proxy=proxy_url, ssl_ca_cert=str(authority.pair.cert))
        assert tunnelled.request("GET", "/a") == {"ok": True}
        assert tunnelled.request("GET", "/b") == {"ok": True}
        assert seen[1].startswith(f"CONNECT 127.0.0.1:{server.port} HTTP/1.1\r\n".encode())
        assert len(seen) == 2 and server.connections == 1, "one tunnel, kept alive"
        assert [h.split(b"\r\n")[0] for h in server.heads] == [b"GET /a HTTP/1.1", b"GET /b HTTP/1.1"]
        untrusted = _client(server.url, proxy=proxy_url)  # the tunnel does not skip the certificate check
        with pytest.raises(ssl.SSLError):
            untrusted.request("GET", "/c")
        for client in (plain, tunnelled, untrusted):
            client.close()
        with pytest.raises(ValueError, match="http:// and https:// proxies only") as refused:  # when made
            _client(server.url, proxy=f"socks5://user:secret@127.0.0.1:{proxy.getsockname()[1]}")
        assert "secret" not in str(refused.value) and "NO_PROXY" in str(refused.value), "the fix, no credentials"
    finally:
        proxy.close()


def _tls_server(raw: Callable[..., RawServer], authority: pki.Authority, host: str = "127.0.0.1") -> RawServer:
    pair = authority.issue(f"server-{host.replace(':', '_')}", "api", server=True, hosts=(host,))
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(str(pair.cert), str(pair.key))
    return raw(lambda c, i, head: (ok(), False), tls)


def test_an_ipv6_server_is_tunnelled_as_brackets_host_port(raw: Callable[..., RawServer], tmp_path: Path) -> None:
    authority = pki.Authority(tmp_path / "pki")
    pair = authority.issue("server6", "api", server=True, hosts=("::1",))
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(str(pair.cert), str(pair.key))
    listener = socket.create_server(("::1", 0), family=socket.AF_INET6)
    port = listener.getsockname()[1]

    def answer() -> None:
        conn, _ = listener.accept()
        with tls.wrap_socket(conn, server_side=True) as inner:
            read_message(inner, bytearray())
            inner.sendall(ok(b'{"over":"v6"}'))

    threading.Thread(target=answer, daemon=True).start()
    seen: list[bytes] = []
    proxy = http_proxy(seen)
    try:
        client = _client(f"https://[::1]:{port}", proxy=f"http://127.0.0.1:{proxy.getsockname()[1]}",
                         ssl_ca_cert=str(authority.pair.cert))
        assert client.request("GET", "/a") == {"over": "v6"}
        assert seen[0].split(b"\r\n")[:2] == [f"CONNECT [::1]:{port} HTTP/1.1".encode(), f"Host: [::1]:{port}".encode()]
        client.close()
    finally:
        proxy.close()
        listener.close()


def test_https_proxies_tls_to_the_proxy_and_tls_inside_it(raw: Callable[..., RawServer], tmp_path: Path) -> None:
    authority = pki.Authority(tmp_path / "pki")
    proxy_pair = authority.issue("proxy", "proxy", server=True, hosts=("127.0.0.1",))
    proxy_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    proxy_tls.load_cert_chain(str(proxy_pair.cert), str(proxy_pair.key))
    seen: list[bytes] = []
    proxy = http_proxy(seen, proxy_tls)
    proxy_url = f"https://user:pw@127.0.0.1:{proxy.getsockname()[1]}"
    server = _tls_server(raw, authority)
    try:
        # an https server: CONNECT over TLS to the proxy, then the server's own TLS inside it, its certificate checked
        tunnelled = _client(server.url, proxy=proxy_url, ssl_ca_cert=str(authority.pair.cert))
        assert tunnelled.request("GET", "/a") == {"ok": True}
        assert tunnelled.request("GET", "/b") == {"ok": True}
        assert seen[0].startswith(f"CONNECT 127.0.0.1:{server.port} HTTP/1.1\r\n".encode())
        assert b"Proxy-Authorization: Basic dXNlcjpwdw==" in seen[0]
        assert len(seen) == 1 and server.connections == 1, "one tunnel, kept alive"
        # an http server: absolute form, over TLS to the proxy (whose certificate is checked with the same settings)
        plain = _client("http://api.internal:8080", proxy=proxy_url, ssl_ca_cert=str(authority.pair.cert))
        assert plain.request("GET", "/api") == {"via": "proxy"}
        assert seen[1].startswith(b"GET http://api.internal:8080/api HTTP/1.1\r\n")
        # a proxy whose certificate is not trusted is not spoken to
        untrusting = _client("http://api.internal:8080", proxy=proxy_url)
        with pytest.raises(ssl.SSLError):
            untrusting.request("GET", "/api")
        assert len(seen) == 2
        for client in (tunnelled, plain, untrusting):
            client.close()
    finally:
        proxy.close()
