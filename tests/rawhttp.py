"""HTTP/1.1 spoken byte for byte on raw sockets, for the tests of a server or client of this project's own: an answer's
bytes, a request or answer read off a connection, and an HTTP(S) proxy (the operator's API connections in
``tests/controller/``, the gateway's own HTTP server and front door in ``tests/gateway/``)."""

from __future__ import annotations

import socket
import ssl
import threading


def ok(body: bytes = b'{"ok":true}', extra: str = "") -> bytes:
    """A 200 answer with a JSON ``body`` (``extra``: more header lines, each ending in CRLF)."""
    return (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
            ).encode() + body


def read_message(sock: socket.socket, buffer: bytearray, *, head_only: bool = False) -> tuple[bytes, bytes] | None:
    """The next request or answer on ``sock``: its head and its body (framed by its Content-Length; ``head_only``:
    an answer to HEAD, which has none); what came after it stays in ``buffer``. None when the connection ends before
    the whole message (``buffer`` then holds what came)."""
    while b"\r\n\r\n" not in buffer:
        if not _receive(sock, buffer):
            return None
    head, _, _ = bytes(buffer).partition(b"\r\n\r\n")
    start = len(head) + 4
    end = start + (0 if head_only else int(_headers(head).get("content-length", "0")))
    while len(buffer) < end:
        if not _receive(sock, buffer):
            return None
    body = bytes(buffer[start:end])
    del buffer[:end]
    return head, body


def read_answer(sock: socket.socket, buffer: bytearray | None = None, *,
                head_only: bool = False) -> tuple[int, dict[str, str], bytes]:
    """The next answer on ``sock`` (:func:`read_message`; without a ``buffer``, what came after it is dropped): its
    status, its headers (names in lower case) and its body. The connection ending before it is an AssertionError."""
    received = bytearray() if buffer is None else buffer
    message = read_message(sock, received, head_only=head_only)
    assert message is not None, bytes(received)
    head, body = message
    return int(head.split(b" ", 2)[1]), _headers(head), body


def _receive(sock: socket.socket, buffer: bytearray) -> bool:
    """Append what ``sock`` sends next to ``buffer``; False when the connection ended instead."""
    chunk = sock.recv(65536)
    buffer += chunk
    return bool(chunk)


def _headers(head: bytes) -> dict[str, str]:
    """A head's header fields (names in lower case), after its first line."""
    lines = head.decode("latin-1").split("\r\n")[1:]
    return {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}


def _pipe(a: socket.socket, b: socket.socket) -> None:
    """Copy what ``a`` sends to ``b`` until either ends; then close both."""
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    finally:
        a.close()
        b.close()


def http_proxy(seen: list[bytes], tls: ssl.SSLContext | None = None) -> socket.socket:
    """An HTTP proxy (``tls``: an HTTPS one) listening on the returned socket (close it to stop): keeps each
    request's head in ``seen``, answers absolute-form requests itself (``{"via":"proxy"}``), pipes ``CONNECT``
    tunnels (to ``[v6]:port`` too)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        try:
            if tls is not None:
                conn = tls.wrap_socket(conn, server_side=True)
            message = read_message(conn, bytearray())
        except OSError:  # a client that does not trust it, or one gone
            message = None
        if message is None:
            conn.close()
            return
        head = message[0]
        seen.append(head)
        if head.startswith(b"CONNECT "):
            host, port = head.split(b" ")[1].decode().rsplit(":", 1)
            upstream = socket.create_connection((host.strip("[]"), int(port)))
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            threading.Thread(target=_pipe, args=(upstream, conn), daemon=True).start()
            _pipe(conn, upstream)
        else:
            conn.sendall(ok(b'{"via":"proxy"}', "Connection: close\r\n"))
            conn.close()

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener
