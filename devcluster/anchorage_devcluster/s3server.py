"""The real S3 server of the tests and the dev cluster: versitygw (Apache-2.0) on its posix backend, as a process.

``tools/s3/build.sh`` (``make s3``) builds the version ``tools/s3/versitygw/go.mod`` pins into
``<cache>/s3/<S3_VERSION>/versitygw``; :func:`find` says where it is (or why it is not), :func:`start` runs it on
loopback over a folder of its own (a bucket is a sub-folder; object metadata in extended attributes) with one
access key, and waits until it answers. Used by the tests' session fixture (``tests/services.py``) and, as a host
process, by whoever needs a real S3 endpoint; the dev cluster will run the same binary as a pod. Why versitygw,
and what it does not do: docs/design-notes.md, "Store".
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from anchorage_devcluster.binaries import GO_FALLBACK, cache_root
from anchorage_devcluster.ports import free_port

S3_NAME = "versitygw"
S3_VERSION = "v1.8.0"
HEALTH = "/_anchorage_health"


def binary() -> Path:
    return cache_root() / "s3" / S3_VERSION / S3_NAME


def find() -> Path | str:
    """The server's binary, or a sentence saying why it is missing and how to get it."""
    path = binary()
    if os.access(path, os.X_OK):
        return path
    go = shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.exists() else None)
    how = ("run `make s3` (tools/s3/build.sh builds it with Go and the Go module proxy, about a minute once)" if go
           else "Go is not installed, so tools/s3/build.sh cannot build it: install Go >= 1.25, then run `make s3`")
    return f"the S3 server ({S3_NAME} {S3_VERSION}) is not built ({path} missing): {how}"


@dataclass
class S3Server:
    """A running server: ``endpoint`` (``http://host:port``), its root credentials, its data folder."""

    process: subprocess.Popen[bytes]
    endpoint: str
    access_key: str
    secret_key: str
    data_dir: Path
    log_path: Path
    region: str = "us-east-1"
    version: str = field(default=f"{S3_NAME} {S3_VERSION}")

    def env(self) -> dict[str, str]:
        """The AWS_* variables a client (boto3, the aws CLI, ``anchorage``) needs to use this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_DEFAULT_REGION": self.region}

    def log_tail(self, size: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-size:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start(workdir: Path, *, host: str = "127.0.0.1", port: int | None = None, access_key: str | None = None,
          secret_key: str | None = None, program: Path | None = None, timeout: float = 30.0) -> S3Server:
    """Start the server on ``host:port`` (a free port when None) over ``workdir/data``; its log is
    ``workdir/s3.log``. Raises ``FileNotFoundError`` (with :func:`find`'s reason) when it is not built, and
    ``RuntimeError`` with the log's end when it does not come up."""
    found = program or find()
    if isinstance(found, str):
        raise FileNotFoundError(found)
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    access_key = access_key or "anchorage" + secrets.token_hex(4)
    secret_key = secret_key or secrets.token_urlsafe(24)
    port = port or free_port(host)
    log_path = workdir / "s3.log"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir),
           "ROOT_ACCESS_KEY": access_key, "ROOT_SECRET_KEY": secret_key}
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [str(found), "--port", f"{host}:{port}", "--health", HEALTH, "--quiet", "posix", str(data)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    server = S3Server(process, f"http://{host}:{port}", access_key, secret_key, data, log_path)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{S3_NAME} exited with {process.returncode}: {server.log_tail()}")
        try:
            with urllib.request.urlopen(server.endpoint + HEALTH, timeout=2) as response:
                if response.status == 200:
                    return server
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"{S3_NAME} did not answer on {server.endpoint} within {timeout} s: {server.log_tail()}")
        time.sleep(0.05)
