"""TEST DOUBLE of the model gateway: an HTTP server on a unix socket that answers chat completions.

Stands in for ``anchorage.gateway`` in the sandbox tests, which prove that the sandbox's only way
out is the socket bound into it; it records the bearer tokens it saw. The engine tests use the real
gateway when it is importable.
"""

from __future__ import annotations

import json
import socketserver
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    tokens: list[str]
    reply: dict[str, Any]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def address_string(self) -> str:
        return "unix"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        self.server.tokens.append(self.headers.get("Authorization", ""))
        body = json.dumps(self.server.reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class FakeGateway:
    """Serve on ``path`` until :meth:`stop`; ``content`` is the assistant message returned."""

    def __init__(self, path: Path, content: str) -> None:
        self.path = path
        self.server = _Server(str(path), _Handler)
        self.server.tokens = []
        self.server.reply = {"choices": [{"message": {"role": "assistant", "content": content}}], "model": "fake"}
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def tokens(self) -> list[str]:
        return self.server.tokens

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
