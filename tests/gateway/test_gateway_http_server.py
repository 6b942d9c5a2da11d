"""The gateway's own HTTP/1.1 server (anchorage.gateway.http) spoken to byte for byte: keep-alive and pipelined
requests, chunked request bodies, Expect: 100-continue, HEAD, body limits, malformed requests, HTTP/1.0."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest

from rawhttp import read_answer

CHAT = json.dumps({"model": "mock-model", "messages": [{"role": "user", "content": "hi"}]}).encode()


def port_of(gateway: Any) -> int:
    return int(gateway.url.rsplit(":", 1)[1])


def request(token: str, body: bytes = CHAT, *, path: str = "/v1/chat/completions", extra: bytes = b"",
            method: str = "POST", version: str = "1.1") -> bytes:
    return (f"{method} {path} HTTP/{version}\r\nHost: gw\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n").encode() + extra + b"\r\n" + body


def closed(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def connect(gateway: Any) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port_of(gateway)), timeout=10)


def test_keep_alive_and_pipelined_requests_are_answered_in_order_on_one_connection(
        gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory())
    token = gateway.issue_token("trial-a")
    with connect(gateway) as sock:
        buffer = bytearray()
        sock.sendall(request(token))
        assert read_answer(sock, buffer)[0] == 200
        sock.sendall(request(token) + request(token, path="/v1/nope") + request(token))  # three at once
        answers = [read_answer(sock, buffer) for _ in range(3)]
        assert [a[0] for a in answers] == [200, 404, 200]
        assert json.loads(answers[1][2])["error"]["type"] == "not_found"
        assert all("connection" not in a[1] for a in answers)
    assert gateway.usage("trial-a").requests == 3


def test_a_chunked_request_body_is_read_whole(gateway_factory: Any, upstream_factory: Any) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream)
    token = gateway.issue_token("trial-a")
    half = len(CHAT) // 2
    body = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (half, CHAT[:half], len(CHAT) - half, CHAT[half:])
    with connect(gateway) as sock:
        sock.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {token}\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n".encode() + body)
        status, _, answer = read_answer(sock, bytearray())
    assert status == 200 and json.loads(answer)["usage"]["prompt_tokens"] > 0
    assert upstream.mock.seen[-1].body["messages"][0]["content"] == "hi"


def test_expect_100_continue_is_answered_before_the_body_is_sent(gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory())
    token = gateway.issue_token("trial-a")
    whole = request(token, extra=b"Expect: 100-continue\r\n")
    head, body = whole[:-len(CHAT)], CHAT
    with connect(gateway) as sock:
        sock.sendall(head)
        buffer = bytearray()
        interim = read_answer(sock, buffer, head_only=True)
        assert interim[0] == 100
        sock.sendall(body)
        assert read_answer(sock, buffer)[0] == 200


def test_head_requests_get_headers_only(gateway_factory: Any, upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory())
    token = gateway.issue_token("trial-a")
    with connect(gateway) as sock:
        buffer = bytearray()
        sock.sendall(b"HEAD / HTTP/1.1\r\nHost: gw\r\n\r\n")
        assert read_answer(sock, buffer, head_only=True)[0] == 200
        sock.sendall(request(token, b"", path="/v1/models", method="HEAD"))
        status, headers, _ = read_answer(sock, buffer, head_only=True)
        assert status == 200 and int(headers["content-length"]) > 0
        sock.sendall(request(token, b"", path="/v1/models", method="GET"))  # nothing of HEAD's body came before it
        status, _, body = read_answer(sock, buffer)
        assert status == 200 and json.loads(body)["object"] == "list"


@pytest.mark.parametrize("raw", [b"NOT HTTP AT ALL\r\n\r\n", b"POST /v1/chat/completions HTTP/1.1\r\nBad Header\r\n\r\n",
                                 b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: x\r\n\r\n"])
def test_a_malformed_request_gets_one_400_json_error_and_the_connection_closes(
        gateway_factory: Any, upstream_factory: Any, raw: bytes) -> None:
    gateway = gateway_factory(upstream_factory())
    with connect(gateway) as sock:
        sock.sendall(raw)
        status, headers, body = read_answer(sock, bytearray())
        assert status == 400 and headers["connection"] == "close"
        assert json.loads(body)["error"]["type"] == "invalid_request"
        assert closed(sock)


def test_a_body_over_the_limit_gets_413(gateway_factory: Any, upstream_factory: Any) -> None:
    upstream = upstream_factory()
    gateway = gateway_factory(upstream, front_door={"max_body_bytes": 1024})
    token = gateway.issue_token("trial-a")
    big = json.dumps({"model": "mock-model", "messages": [{"role": "user", "content": "x" * 2000}]}).encode()
    for framing in ("length", "chunked"):
        with connect(gateway) as sock:
            if framing == "length":
                sock.sendall(request(token, big))
            else:
                sock.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {token}\r\n"
                             "Transfer-Encoding: chunked\r\n\r\n".encode() + b"%x\r\n%s\r\n0\r\n\r\n" % (len(big), big))
            status, _, body = read_answer(sock, bytearray())
            assert status == 413 and json.loads(body)["error"]["type"] == "request_too_large", framing
            assert closed(sock)
    assert not upstream.mock.seen and gateway.usage("trial-a").requests == 0


def test_an_http10_client_gets_its_answer_and_the_connection_closes(gateway_factory: Any,
                                                                    upstream_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory())
    token = gateway.issue_token("trial-a")
    with connect(gateway) as sock:
        sock.sendall(request(token, version="1.0"))
        status, headers, _ = read_answer(sock, bytearray())
        assert status == 200 and headers["connection"] == "close"
        assert closed(sock)


async def test_a_client_that_leaves_before_its_json_answer_does_not_disturb_others(
        gateway_factory: Any, upstream_factory: Any) -> None:
    upstream = upstream_factory(reply_delay_seconds=0.3)
    gateway = gateway_factory(upstream)
    token = gateway.issue_token("trial-a")
    with connect(gateway) as sock:
        sock.sendall(request(token))
    await asyncio.sleep(0.5)  # its request was forwarded and answered; nobody reads it
    with connect(gateway) as sock:
        sock.sendall(request(token))
        assert read_answer(sock, bytearray())[0] == 200
    assert gateway.usage("trial-a").requests == 2  # the one whose client left was billed too


class BrokenUpstream:
    """An upstream that promises a longer json answer than it sends, then closes (raw sockets, a thread)."""

    def __init__(self) -> None:
        import socketserver
        import threading

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += self.request.recv(65536)
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n"
                                     b'{"choices": [')

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_an_upstream_that_breaks_its_json_answer_off_gives_a_502_counted_as_an_error(gateway_factory: Any) -> None:
    upstream = BrokenUpstream()
    try:
        gateway = gateway_factory(upstream)
        token = gateway.issue_token("trial-a")
        with connect(gateway) as sock:
            sock.sendall(request(token))
            status, _, body = read_answer(sock, bytearray())
        assert status == 502 and json.loads(body)["error"]["type"] == "upstream_broken"
        assert "closed the connection" in json.loads(body)["error"]["message"]
        usage = gateway.usage("trial-a")
        assert (usage.requests, usage.errors) == (1, 1)
    finally:
        upstream.stop()
