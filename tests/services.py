"""Session fixtures that start real services on loopback: a real S3 server, moto's S3 server, Prometheus.

Loaded from ``tests/conftest.py`` (``pytest_plugins``). ``s3_server`` is versitygw (``make s3`` builds it:
``anchorage_devcluster.s3server``), the S3 endpoint of the store's tests (behind the fault-injecting proxy of
``tests/store``), the viewer's and the exports' S3 sources and the local engine's ``--store`` tests; moto stays
where a test says why. Prometheus serves the gateway's metrics test and the dashboard query tests. Each skips
with a reason when its program is missing; the session header names the S3 server and its version.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from anchorage_devcluster.ports import free_port

PROMETHEUS = "/usr/bin/prometheus"


def pytest_report_header(config: pytest.Config) -> str:
    """``s3 server: versitygw v1.8.0 (path)``, as the binary itself reports its version, or why it is missing."""
    from anchorage_devcluster import s3server

    found = s3server.find()
    if isinstance(found, str):
        return f"s3 server: none ({found})"
    try:
        printed = subprocess.run([str(found), "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"s3 server: {s3server.S3_NAME} at {found} does not run: {exc}"
    version = next((line.split(":", 1)[1].strip() for line in printed.splitlines() if line.startswith("Version")),
                   "unknown version")
    return f"s3 server: {s3server.S3_NAME} {version} ({found})"


# ----- S3 (versitygw; moto) ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The real S3 server (:class:`anchorage_devcluster.s3server.S3Server`), one per session on a free loopback
    port with its own data folder and a random root key; buckets per test. Skips with the reason when not built."""
    from anchorage_devcluster import s3server

    found = s3server.find()
    if isinstance(found, str):
        pytest.skip(found)
    server = s3server.start(tmp_path_factory.mktemp("s3-server"))
    yield server
    server.stop()


@pytest.fixture
def s3_server_env(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The real server's endpoint and root credentials in the environment (as a user sets them), no AWS config
    file or profile read; returns the server."""
    for name, value in {**s3_server.env(), "AWS_CONFIG_FILE": "/dev/null",
                        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_ROLE_ARN",
                 "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    return s3_server


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of moto's standalone server (one per session; buckets per test)."""
    server_module = pytest.importorskip("moto.server", reason="moto[server] is not installed")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and region for boto3 (moto accepts any); no real AWS config is read."""
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": "/dev/null",
                        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)


# ----- Prometheus ------------------------------------------------------------------------------------


class Prometheus:
    """A running Prometheus scraping ``targets`` every second; query it through its HTTP API."""

    def __init__(self, workdir: Path, targets: list[str], *, metrics_path: str = "/metrics",
                 labels: dict[str, str] | None = None) -> None:
        """``labels``: target labels added to every scraped series (e.g. the ``cluster`` and ``namespace`` a
        Prometheus scraping several clusters adds, which the dashboards' variables select)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        static: dict[str, Any] = {"targets": targets, **({"labels": labels} if labels else {})}
        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                  "scrape_configs": [{"job_name": "anchorage", "metrics_path": metrics_path,
                                      "static_configs": [static]}]}
        (workdir / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
        self.log = (workdir / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={workdir / 'prometheus.yml'}",
             f"--storage.tsdb.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        self._wait_ready(workdir)

    def _wait_ready(self, workdir: Path, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {(workdir / 'prometheus.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"prometheus was not ready within {timeout} s")

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:  # bad queries answer 400 with a JSON error
            return json.loads(exc.read())

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; raises with Prometheus' message when the expression does not parse."""
        answer = self.api("query", query=expr)
        if answer.get("status") != "success":
            raise ValueError(f"query {expr!r} failed: {answer.get('error')}")
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def wait_for(self, expr: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Poll ``expr`` until it returns data (scrapes run every second)."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if result or time.monotonic() > deadline:
                return result
            time.sleep(0.5)

    def targets_up(self) -> list[dict[str, Any]]:
        return list(self.api("targets")["data"]["activeTargets"])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


@pytest.fixture
def prometheus_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Prometheus]]:
    """``start(targets, metrics_path="/metrics") -> Prometheus``; every server is stopped afterwards."""
    if not Path(PROMETHEUS).exists() and shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    started: list[Prometheus] = []

    def start(targets: list[str], *, metrics_path: str = "/metrics") -> Prometheus:
        server = Prometheus(tmp_path_factory.mktemp("prometheus"), targets, metrics_path=metrics_path)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
