"""Store fixtures: the S3 servers (the real one, versitygw; and moto), a fault proxy in front, a fresh bucket per test.

``s3_backend`` is parametrized: every test that uses it runs against the real server and against moto. A test that
needs what only the real server does (it checks checksums and signatures; moto accepts anything) asks for
``real_s3`` instead, or skips moto saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from faults import FaultProxy
from servers import Backend, backend, new_bucket

from anchorage.store import ArtifactStore, open_store


@pytest.fixture(params=["versitygw", "moto"])
def s3_backend(request: pytest.FixtureRequest) -> Backend:
    return backend(request, request.param)


@pytest.fixture
def real_s3(request: pytest.FixtureRequest) -> Backend:
    """The real server only (a test of what moto does not do: checksum and signature checks)."""
    return backend(request, "versitygw")


@pytest.fixture
def fault_proxy(s3_backend: Backend) -> Iterator[FaultProxy]:
    proxy = FaultProxy(s3_backend.endpoint)
    yield proxy
    proxy.stop()


@pytest.fixture
def bucket(s3_backend: Backend) -> str:
    return new_bucket(s3_backend)


@pytest.fixture
def s3_store(bucket: str, fault_proxy: FaultProxy) -> Callable[..., ArtifactStore]:
    """``make(**options)``: an S3 store on the test bucket, talking through the fault proxy."""

    def make(**options: Any) -> ArtifactStore:
        options = {"backoff_seconds": 0.01, **options}
        return open_store(f"s3://{bucket}/runs", endpoint_url=fault_proxy.url, **options)

    return make


@pytest.fixture(params=["file", "s3-versitygw", "s3-moto"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ArtifactStore]:
    """The same contract tests run against both stores (the s3 one against both servers, through a fault proxy)."""
    if request.param == "file":
        yield open_store((tmp_path / "store").as_uri())
        return
    server = backend(request, request.param.removeprefix("s3-"))
    proxy = FaultProxy(server.endpoint)
    try:
        yield open_store(f"s3://{new_bucket(server)}/runs", endpoint_url=proxy.url, backoff_seconds=0.01)
    finally:
        proxy.stop()
