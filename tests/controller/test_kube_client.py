"""The operator's API client against small real HTTP(S) servers: credentials as the kubernetes package stores
them (bearer token, tokenFile rotation, refresh on 401), the server URL's path prefix, NO_PROXY,
``tls-server-name``, timeouts, one retry layer that honours ``Retry-After``, ``fieldValidation=Strict`` on
writes, Warning headers in the log, optimistic concurrency on status; and watched bodies stand in for GETs
only when they pass the caller's check (``caches.Latest``)."""

from __future__ import annotations

import http.server
import json
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kopf
import kubernetes
import pytest
import yaml

from anchorage.controller import caches, kube
from anchorage_devcluster import pki

Answer = tuple[int, dict[str, Any], dict[str, str]]  # status, JSON body, headers


@dataclass
class Seen:
    """What the test server received."""

    method: str
    path: str
    auth: str | None
    body: Any


@dataclass
class Server:
    """A real HTTP(S) server whose answers the test scripts (``answers``: consumed first; then ``default``)."""

    url: str
    seen: list[Seen] = field(default_factory=list)
    answers: list[Answer | Callable[[Seen], Answer]] = field(default_factory=list)
    default: Callable[[Seen], Answer] = lambda s: (200, {"ok": True}, {})
    hang: bool = False


def _handler(state: Server) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            seen = Seen(self.command, self.path, self.headers.get("Authorization"), json.loads(raw) if raw else None)
            state.seen.append(seen)
            if state.hang:
                time.sleep(3)
                return
            answer = state.answers.pop(0) if state.answers else state.default
            status, body, headers = answer(seen) if callable(answer) else answer
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_PUT = _serve

        def log_message(self, *_: Any) -> None:
            pass

    return Handler


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """``serve(tls=None | (cert, key))`` → a running server (stopped after the test)."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(tls: pki.Pair | None = None) -> Server:
        state = Server("")
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
        server.daemon_threads = True
        if tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(str(tls.cert), str(tls.key))
            server.socket = context.wrap_socket(server.socket, server_side=True)
        state.url = f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return state

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _kubeconfig(path: Path, server: str, user: dict[str, Any], cluster: dict[str, Any] | None = None) -> Path:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
           "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
           "users": [{"name": "u", "user": user}], "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}
    path.write_text(yaml.safe_dump(doc))
    return path


def _client(kubeconfig: Path, **extra: Any) -> kube.Client:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    for key, value in extra.items():
        setattr(configuration, key, value)
    return kube.Client(configuration, token_file=kube.kubeconfig_token_file(str(kubeconfig)))


def test_a_kubeconfig_token_is_sent_as_the_kubernetes_package_stores_it(serve: Callable[..., Server],
                                                                        tmp_path: Path) -> None:
    server = serve()
    client = _client(_kubeconfig(tmp_path / "kc", server.url, {"token": "s3cret"}))
    assert client.request("GET", "/api") == {"ok": True}
    assert server.seen[0].auth == "Bearer s3cret"


def test_a_rotated_token_file_is_read_again(serve: Callable[..., Server], tmp_path: Path) -> None:
    server = serve()
    token = tmp_path / "token"
    token.write_text("first\n")
    client = _client(_kubeconfig(tmp_path / "kc", server.url, {"tokenFile": str(token)}))
    client.request("GET", "/a")
    token.write_text("second\n")  # rotated by whoever mints it (e.g. a projected ServiceAccount token)
    server.answers.append(lambda s: (401, {"message": "Unauthorized"}, {}) if s.auth == "Bearer first" else
                          (200, {}, {}))
    client.request("GET", "/b")  # the stale token is refused once, the file is read again at once
    assert [s.auth for s in server.seen] == ["Bearer first", "Bearer first", "Bearer second"]


def test_a_token_file_of_a_merged_kubeconfig_is_read_again(serve: Callable[..., Server], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """KUBECONFIG=a:b:c:d — the current context in a, the context and cluster in b, the user (a tokenFile relative
    to c's folder) in c, a user of the same name with a token in d (the first definition wins)."""
    server = serve()
    files = {name: tmp_path / name / "config" for name in "abcd"}
    for path in files.values():
        path.parent.mkdir()
    (tmp_path / "c" / "token").write_text("first\n")
    docs = {"a": {"current-context": "ctx"},
            "b": {"contexts": [{"name": "ctx", "context": {"cluster": "k", "user": "u"}}],
                  "clusters": [{"name": "k", "cluster": {"server": server.url}}]},
            "c": {"users": [{"name": "u", "user": {"tokenFile": "token"}}]},
            "d": {"users": [{"name": "u", "user": {"token": "decoy"}}]}}
    for name, doc in docs.items():
        files[name].write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", **doc}))
    joined = os.pathsep.join(str(files[name]) for name in "abcd")
    monkeypatch.setenv("KUBECONFIG", joined)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert kube.kubeconfig_token_file() == (tmp_path / "c" / "token").resolve()
    kube.client.cache_clear()
    try:
        client = kube.client()  # as the operator makes it
        client.request("GET", "/a")
        (tmp_path / "c" / "token").write_text("second\n")
        server.answers.append(lambda s: (401, {"message": "Unauthorized"}, {}) if s.auth == "Bearer first" else
                              (200, {}, {}))
        client.request("GET", "/b")
    finally:
        kube.client.cache_clear()
    assert [s.auth for s in server.seen] == ["Bearer first", "Bearer first", "Bearer second"]
    docs["c"]["users"][0]["user"]["token"] = "inline"  # with a token too, the package sends the token: no file
    files["c"].write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", **docs["c"]}))
    assert kube.kubeconfig_token_file(joined) is None


def test_the_token_is_read_once_per_ttl_and_refreshed_when_the_api_answers_401(serve: Callable[..., Server]) -> None:
    server = serve()
    configuration = kubernetes.client.Configuration()
    configuration.host = server.url
    tokens = iter(["Bearer one", "Bearer two", "Bearer three"])
    refreshes: list[str] = []

    def refresh(config: kubernetes.client.Configuration) -> None:  # as the exec-plugin and in-cluster loaders do
        refreshes.append(next(tokens))
        config.api_key["BearerToken"] = refreshes[-1]

    configuration.refresh_api_key_hook = refresh
    client = kube.Client(configuration)
    rejected: set[str] = set()
    server.default = lambda s: (401, {"message": "Unauthorized"}, {}) if s.auth in rejected else (200, {"ok": 1}, {})
    client.request("GET", "/a")
    client.request("GET", "/b")
    assert refreshes == ["Bearer one"], "the credentials hook ran again within the TTL"
    rejected.add("Bearer one")
    client.request("GET", "/c")
    assert [s.auth for s in server.seen] == ["Bearer one", "Bearer one", "Bearer one", "Bearer two"]
    rejected.update({"Bearer two", "Bearer three"})
    with pytest.raises(kube.ApiError, match="401"):  # read again once; refused again, it is an error
        client.request("GET", "/d")


def test_the_server_urls_path_prefix_is_kept(serve: Callable[..., Server], tmp_path: Path) -> None:
    server = serve()
    client = _client(_kubeconfig(tmp_path / "kc", f"{server.url}/k8s/clusters/c-1", {"token": "t"}))
    client.create_namespaced_job("ns", {"metadata": {"name": "j"}})
    assert server.seen[0].path == "/k8s/clusters/c-1/apis/batch/v1/namespaces/ns/jobs?fieldValidation=Strict"


def test_no_proxy_bypasses_the_kubeconfigs_proxy(serve: Callable[..., Server], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    server = serve()
    dead_proxy = "http://127.0.0.1:9"  # nothing listens there
    kubeconfig = _kubeconfig(tmp_path / "kc", server.url, {"token": "t"}, {"proxy-url": dead_proxy})
    monkeypatch.setattr(kube.Client, "ATTEMPTS", 1)
    with pytest.raises(OSError):
        _client(kubeconfig, no_proxy="").request("GET", "/a")
    assert _client(kubeconfig, no_proxy="localhost,127.0.0.0/8").request("GET", "/a") == {"ok": True}


def test_tls_server_name_verifies_the_certificate_for_that_name(serve: Callable[..., Server], tmp_path: Path) -> None:
    authority = pki.Authority(tmp_path / "pki")
    server = serve(authority.issue("server", "api", server=True, hosts=("kube.internal",)))
    plain = _kubeconfig(tmp_path / "kc", server.url, {"token": "t"},
                        {"certificate-authority": str(authority.pair.cert)})
    with pytest.raises(ssl.SSLError):  # the certificate is not for 127.0.0.1
        _client(plain).request("GET", "/a")
    named = _kubeconfig(tmp_path / "kc2", server.url, {"token": "t"},
                        {"certificate-authority": str(authority.pair.cert), "tls-server-name": "kube.internal"})
    assert _client(named).request("GET", "/a") == {"ok": True}


def test_a_hung_server_times_out(serve: Callable[..., Server], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = serve()
    server.hang = True
    monkeypatch.setattr(kube.Client, "READ_TIMEOUT", 0.5)
    monkeypatch.setattr(kube.Client, "ATTEMPTS", 2)
    client = _client(_kubeconfig(tmp_path / "kc", server.url, {"token": "t"}))
    started = time.monotonic()
    with pytest.raises(OSError):
        client.request("GET", "/a")
    assert time.monotonic() - started < 2.5 and len(server.seen) == 2


def test_retry_after_is_honoured_by_one_retry_layer(serve: Callable[..., Server], tmp_path: Path) -> None:
    server = serve()
    client = _client(_kubeconfig(tmp_path / "kc", server.url, {"token": "t"}))
    busy = (429, {"message": "too many requests"}, {"Retry-After": "1"})
    server.answers += [busy, busy]
    started = time.monotonic()
    assert client.request("GET", "/a") == {"ok": True}
    assert len(server.seen) == 3 and time.monotonic() - started >= 2.0
    server.seen.clear()
    server.answers.append((429, {"message": "slow down"}, {"Retry-After": "100"}))  # longer than the budget
    with pytest.raises(kube.ApiError) as caught:
        client.request("GET", "/b")
    assert len(server.seen) == 1 and caught.value.retry_after == 100
    server.answers.append((429, {"message": "slow down"}, {"Retry-After": "100"}))
    with pytest.raises(kopf.TemporaryError) as temporary:  # handed to kopf once, with the server's delay
        kube.call(lambda: client.request("GET", "/c"), what="get c")
    assert temporary.value.delay == 100


def test_writes_are_strict_and_warnings_are_logged_once(serve: Callable[..., Server], tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    server = serve()
    server.default = lambda s: (201, {}, {"Warning": '299 - "unknown field \\"spec.x\\""'})
    client = _client(_kubeconfig(tmp_path / "kc", server.url, {"token": "t"}))
    with caplog.at_level(logging.WARNING, logger="anchorage.kube"):
        client.create_namespaced_secret("ns", {"metadata": {"name": "s"}})
        client.create_namespaced_secret("ns", {"metadata": {"name": "s2"}})
        client.request("GET", "/api/v1/namespaces/ns/secrets/s")
    assert server.seen[0].path.endswith("?fieldValidation=Strict")
    assert "fieldValidation" not in server.seen[2].path
    warned = [r.getMessage() for r in caplog.records if "warns" in r.getMessage()]
    assert len(warned) == 1 and warned[0].endswith('POST /api/v1/namespaces/ns/secrets: unknown field "spec.x"')


def test_status_patches_carry_the_version_they_were_decided_on(serve: Callable[..., Server], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    server = serve()
    client = _client(_kubeconfig(tmp_path / "kc", server.url, {"token": "t"}))
    monkeypatch.setattr(kube, "client", lambda: client)
    assert kube.patch_status("trials", "ns", "t", {"phase": "Running"}, resource_version="41")
    assert server.seen[0].body == {"status": {"phase": "Running"}, "metadata": {"resourceVersion": "41"}}
    server.answers.append((409, {"message": "the object has been modified"}, {}))
    assert not kube.patch_status("trials", "ns", "t", {"phase": "Failed"}, resource_version="41")


def _trial(name: str, phase: str | None, job: str | None = None) -> dict[str, Any]:
    status = {"phase": phase, "jobName": job} if phase else {}
    return {"metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}"}, "spec": {}, "status": status}


def test_a_watched_body_replaces_the_get_only_when_it_passes_the_check() -> None:
    gets: list[tuple[str, str]] = []

    def mock_read(namespace: str, name: str) -> dict[str, Any]:  # stands in for the API's GET
        gets.append((namespace, name))
        return _trial(name, "Running", "from-the-api")

    latest = caches.Latest(mock_read, size=2)
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
