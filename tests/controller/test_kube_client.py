"""The operator's API client reuses its Authorization header and refreshes it on a 401; watched bodies
stand in for GETs only when they pass the caller's check (``trials.Latest``)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import kubernetes
import pytest

from anchorage.controller import kube, trials


class _Api(http.server.BaseHTTPRequestHandler):
    """A tiny real HTTP server: answers 200 {} unless the token is in ``rejected`` (then 401)."""

    seen: ClassVar[list[str | None]] = []
    rejected: ClassVar[set[str]] = set()

    def do_GET(self) -> None:
        token = self.headers.get("Authorization")
        type(self).seen.append(token)
        status, body = (401, {"message": "Unauthorized"}) if token in self.rejected else (200, {"ok": True})
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    _Api.seen, _Api.rejected = [], set()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_token_is_read_once_per_ttl_and_refreshed_when_the_api_answers_401(api: str) -> None:
    configuration = kubernetes.client.Configuration()
    configuration.host = api
    tokens = iter(["Bearer one", "Bearer two", "Bearer three"])
    refreshes: list[str] = []

    def refresh(config: kubernetes.client.Configuration) -> None:  # as the kubeconfig/in-cluster loaders do
        refreshes.append(next(tokens))
        config.api_key["authorization"] = refreshes[-1]

    configuration.refresh_api_key_hook = refresh
    client = kube.Client(configuration)
    assert client.request("GET", "/a") == {"ok": True}
    assert client.request("GET", "/b") == {"ok": True}
    assert refreshes == ["Bearer one"], "the credentials hook ran again within the TTL"
    _Api.rejected.add("Bearer one")  # the token expired at the server
    assert client.request("GET", "/c") == {"ok": True}
    assert _Api.seen == ["Bearer one", "Bearer one", "Bearer one", "Bearer two"]
    assert refreshes == ["Bearer one", "Bearer two"]
    _Api.rejected.update({"Bearer two", "Bearer three"})
    with pytest.raises(kube.ApiError, match="401"):  # refreshed once; refused again, it is an error
        client.request("GET", "/d")
    assert _Api.seen[4:] == ["Bearer two", "Bearer three"]


def _trial(name: str, phase: str | None, job: str | None = None) -> dict[str, Any]:
    status = {"phase": phase, "jobName": job} if phase else {}
    return {"metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}"}, "spec": {}, "status": status}


def test_a_watched_body_replaces_the_get_only_when_it_passes_the_check() -> None:
    gets: list[tuple[str, str]] = []

    def mock_read(namespace: str, name: str) -> dict[str, Any]:  # stands in for the API's GET
        gets.append((namespace, name))
        return _trial(name, "Running", "from-the-api")

    latest = trials.Latest(mock_read, size=2)
    running = _trial("t1", "Running", "t1-a0")
    latest.note(running, ended=False)
    assert latest.current("ns", "t1", lambda t: t["status"].get("jobName") == "t1-a0") == running
    assert gets == []
    assert latest.current("ns", "t1", lambda t: t["status"].get("jobName") == "t1-a1")["status"]["jobName"] == \
        "from-the-api"
    assert gets == [("ns", "t1")]
    latest.note(running, ended=True)  # ended objects are forgotten
    latest.current("ns", "t1", lambda _: True)
    assert len(gets) == 2
    for name in ("t2", "t3", "t4"):  # bounded: the oldest goes first
        latest.note(_trial(name, "Running", f"{name}-a0"), ended=False)
    latest.current("ns", "t2", lambda _: True)
    latest.current("ns", "t4", lambda _: True)
    assert [g[1] for g in gets[2:]] == ["t2"]
