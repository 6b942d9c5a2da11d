"""Store fixtures: a fault proxy in front of the session's moto server, a fresh bucket per test."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from faults import FaultProxy

from anchorage.store import ArtifactStore, open_store

_buckets = itertools.count()


@pytest.fixture
def fault_proxy(moto_endpoint: str) -> Iterator[FaultProxy]:
    proxy = FaultProxy(moto_endpoint)
    yield proxy
    proxy.stop()


@pytest.fixture
def bucket(moto_endpoint: str, s3_credentials: None) -> str:
    name = f"anchorage-test-{next(_buckets)}"
    boto3.client("s3", endpoint_url=moto_endpoint).create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_store(bucket: str, fault_proxy: FaultProxy) -> Callable[..., ArtifactStore]:
    """``make(**options)``: an S3 store on the test bucket, talking through the fault proxy."""

    def make(**options: Any) -> ArtifactStore:
        options = {"backoff_seconds": 0.01, **options}
        return open_store(f"s3://{bucket}/runs", endpoint_url=fault_proxy.url, **options)

    return make


@pytest.fixture(params=["file", "s3"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    """The same contract tests run against both stores."""
    if request.param == "file":
        return open_store((tmp_path / "store").as_uri())
    make: Callable[..., ArtifactStore] = request.getfixturevalue("s3_store")
    return make()
