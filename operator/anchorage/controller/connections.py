"""The operator's API client's HTTP/1.1 connections: keep-alive sockets, responses parsed by httptools.

:class:`anchorage.controller.kube.Client` builds each request (URL, credentials, body, ``fieldValidation``) and
handles each answer (retries, ``Retry-After``, ``Warning`` headers, errors); this module only carries one request
and its response over a pooled connection — plain TCP, TLS with the client's :class:`ssl.SSLContext`, or through a
proxy (an ``http://`` server's requests in absolute form, an ``https://`` server's through a ``CONNECT`` tunnel; an
IPv6 server as ``[::1]:6443``). The proxy is an ``http://`` one, or an ``https://`` one (TLS to the proxy, its
certificate checked with the context the caller gives, then for an ``https://`` server TLS inside that TLS, by
urllib3's :class:`~urllib3.util.ssltransport.SSLTransport`); a ``socks`` proxy is refused when the client is made
(no SOCKS implementation among the dependencies: the kubernetes package too needs PySocks for it).

It replaced urllib3 and ``http.client`` there: their per-request machinery (header parsing through ``email.parser``,
response wrappers, decoders) cost ~0.4 (PATCH) to ~0.55 ms (GET) more CPU per request than a request here, seven
requests per trial (``bench/README.md``, "Operator", session 6); a request here costs a ``sendall`` of one buffer
and a few ``recv`` calls fed to httptools (the gateway's HTTP parser, :mod:`anchorage.gateway.http`).

Errors are :class:`OSError`\\ s (the socket's own, :class:`ssl.SSLError`, ``TimeoutError``, and
:class:`ConnectionLost` for a connection that ended or answered something that is not HTTP), which the client's
one retry layer retries. An idle connection the server has closed is noticed before reuse (it reads as ready),
and a reused connection that ends before any byte of the answer is replaced once at once (the server closed it
as the request went out).
"""

from __future__ import annotations

import base64
import select
import socket
import ssl
import threading
import urllib.parse
import weakref
from dataclasses import dataclass, field

import httptools
from urllib3.util.ssltransport import SSLTransport

#: Idle connections kept for reuse (more may be open at once: one per concurrent request).
MAX_IDLE = 32
#: A connection: a socket, a TLS socket, or TLS inside a proxy's TLS (what the requests use of them is alike).
Socket = socket.socket | SSLTransport


class ConnectionLost(ConnectionError):
    """The connection ended before the whole answer came, or the answer is not HTTP/1.1."""


@dataclass
class Response:
    """An answer: status, reason, headers (names in lower case, in order, repeated ones kept) and the body."""

    status: int
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    data: bytes = b""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (lower case), or None."""
        return next((v for k, v in self.headers if k == name), None)

    def header_values(self, name: str) -> list[str]:
        """Every value of header ``name`` (lower case), in order."""
        return [v for k, v in self.headers if k == name]


class _Reading:
    """httptools' callbacks for one response."""

    def __init__(self) -> None:
        self.reason = b""
        self.headers: list[tuple[str, str]] = []
        self.body: list[bytes] = []
        self.started = self.headed = self.complete = self.keep_alive = False
        self.parser: httptools.HttpResponseParser | None = None

    def on_message_begin(self) -> None:
        self.started = True

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1").lower(), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        self.headed = True
        # asked now: once the message is complete the parser has forgotten its headers
        self.keep_alive = self.parser is not None and self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


@dataclass(frozen=True)
class Proxy:
    """A proxy: where it listens, the headers it is sent (``Proxy-Authorization`` from its URL's user info, and the
    client configuration's ``proxy_headers``) and, for an ``https://`` proxy, the TLS settings its certificate is
    checked with."""

    host: str
    port: int
    headers: tuple[tuple[str, str], ...] = ()
    tls: ssl.SSLContext | None = None

    @classmethod
    def from_url(cls, url: str, headers: dict[str, str] | None = None, *, tls: ssl.SSLContext | None = None) -> Proxy:
        """``tls``: how an ``https://`` proxy's certificate is checked (default: the system's trusted CAs)."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https"):
            shown = f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}"  # no credentials
            raise ValueError(f"proxy {shown!r}: the operator's API client speaks to http:// and https:// proxies only "
                             "(no SOCKS implementation among its dependencies); give an http(s):// proxy in "
                             "HTTPS_PROXY/HTTP_PROXY or the kubeconfig's proxy-url, or exempt the server with NO_PROXY")
        extra = dict(headers or {})
        if parts.username is not None:
            user = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            extra.setdefault("Proxy-Authorization", "Basic " + base64.b64encode(user.encode()).decode())
        https = parts.scheme == "https"
        return cls(parts.hostname or "", parts.port or (443 if https else 80), tuple(extra.items()),
                   (tls or ssl.create_default_context()) if https else None)


class Connections:
    """Keep-alive HTTP/1.1 connections to one server (``scheme://host:port``), thread-safe.

    ``tls``: the TLS settings for an ``https`` server; ``server_hostname``: the name its certificate is checked
    against (and sent as SNI) when not the URL's host; ``proxy``: an HTTP proxy to go through.
    """

    def __init__(self, url: str, *, tls: ssl.SSLContext | None = None, server_hostname: str | None = None,
                 proxy: Proxy | None = None, connect_timeout: float = 5.0) -> None:
        parts = urllib.parse.urlsplit(url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.netloc = parts.netloc
        self.authority = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        self.tls, self.server_hostname, self.proxy = tls, server_hostname, proxy
        self.connect_timeout = connect_timeout
        self._idle: list[Socket] = []
        self._lock = threading.Lock()
        # Idle sockets are closed when the pool goes (as urllib3's pools do), never left to the garbage collector.
        weakref.finalize(self, _close_all, self._idle)

    def close(self) -> None:
        """Close the idle connections (one in use closes when its request ends)."""
        with self._lock:
            _close_all(self._idle)

    def request(self, method: str, target: str, headers: dict[str, str], body: bytes | None,
                read_timeout: float) -> Response:
        """Send one request (``target``: the path and query) and read its answer."""
        if self.proxy is not None and not self.https:
            target = f"http://{self.netloc}{target}"  # absolute form, through the proxy
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.netloc}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if self.proxy is not None and not self.https:
            lines += [f"{k}: {v}" for k, v in self.proxy.headers]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
        sock, reused = self._take()
        try:
            try:
                response = _exchange(sock, data, read_timeout)
            except _Unanswered:
                if not reused:
                    raise ConnectionLost(f"the connection to {self.netloc} ended before an answer") from None
                sock.close()  # an idle connection the server closed as the request went out: once, a new one
                sock = self._connect()
                response = _exchange(sock, data, read_timeout)
        except BaseException:
            sock.close()
            raise
        if response[1]:
            self._give_back(sock)
        else:
            sock.close()
        return response[0]

    def _take(self) -> tuple[Socket, bool]:
        while True:
            with self._lock:
                sock = self._idle.pop() if self._idle else None
            if sock is None:
                return self._connect(), False
            if not _readable(sock):  # an idle connection has nothing to say: anything there is its end
                return sock, True
            sock.close()

    def _give_back(self, sock: Socket) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(sock)
                return
        sock.close()

    def _connect(self) -> Socket:
        proxy = self.proxy
        where = (proxy.host, proxy.port) if proxy is not None else (self.host, self.port)
        raw = socket.create_connection(where, timeout=self.connect_timeout)
        sock: Socket = raw
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if proxy is not None and proxy.tls is not None:
                raw.settimeout(self.connect_timeout)
                sock = proxy.tls.wrap_socket(raw, server_hostname=proxy.host)
            if proxy is not None and self.https:
                self._tunnel(sock)
            if self.https:
                context = self.tls or ssl.create_default_context()
                name = self.server_hostname or self.host
                # TLS inside the proxy's TLS: the ssl module cannot wrap an SSLSocket, urllib3's transport can
                sock = SSLTransport(sock, context, server_hostname=name) if isinstance(sock, ssl.SSLSocket) \
                    else context.wrap_socket(raw, server_hostname=name)
        except BaseException:
            sock.close()
            raw.close()
            raise
        return sock

    def _tunnel(self, sock: Socket) -> None:
        assert self.proxy is not None
        lines = [f"CONNECT {self.authority} HTTP/1.1", f"Host: {self.authority}"]
        lines += [f"{k}: {v}" for k, v in self.proxy.headers]
        try:
            response, _ = _exchange(sock, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), self.connect_timeout,
                                    tunnel=True)
        except _Unanswered:
            raise ConnectionLost(f"the proxy {self.proxy.host}:{self.proxy.port} closed the tunnel") from None
        if response.status != 200:
            raise ConnectionLost(f"the proxy {self.proxy.host}:{self.proxy.port} refused the tunnel to "
                                 f"{self.authority}: {response.status} {response.reason}")


class _Unanswered(ConnectionLost):
    """The connection ended before any byte of the answer."""


def _exchange(sock: Socket, data: bytes, timeout: float, tunnel: bool = False) -> tuple[Response, bool]:
    """Send ``data``, read one response: (response, whether the connection may be reused). ``tunnel``: the answer to
    a ``CONNECT``, which ends with its headers (what follows is the tunnel's)."""
    sock.settimeout(timeout)
    try:
        sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        raise _Unanswered() from None
    reading = _Reading()
    parser = reading.parser = httptools.HttpResponseParser(reading)
    while not reading.complete and not (tunnel and reading.headed):
        try:
            received = sock.recv(65536)
            chunk = received if isinstance(received, bytes) else b""  # (SSLTransport's recv is typed bytes | int)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            if not reading.started:
                raise _Unanswered()
            if reading.headed and not any(k in ("content-length", "transfer-encoding") for k, _ in reading.headers):
                break  # a body delimited by the connection's end
            raise ConnectionLost("the connection ended in the middle of an answer")
        try:
            parser.feed_data(chunk)
        except httptools.HttpParserUpgrade:
            break
        except httptools.HttpParserError as exc:
            raise ConnectionLost(f"not an HTTP/1.1 answer: {exc}") from None
    reading.parser = None  # no reference cycle left for the garbage collector
    response = Response(parser.get_status_code(), reading.reason.decode("latin-1"), reading.headers,
                        b"".join(reading.body))
    return response, reading.complete and reading.keep_alive


def _readable(sock: Socket) -> bool:
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def _close_all(sockets: list[Socket]) -> None:
    while sockets:
        sockets.pop().close()
