"""The S3 servers of the store's tests (a helper module, not fixtures): who they are and a fresh bucket on one."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

_buckets = itertools.count()


@dataclass
class Backend:
    """An S3 server the tests talk to: its name, endpoint and credentials."""

    name: str
    endpoint: str
    access_key: str
    secret_key: str

    def client(self, endpoint: str | None = None) -> Any:
        return boto3.client("s3", endpoint_url=endpoint or self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name="us-east-1")


def backend(request: pytest.FixtureRequest, name: str) -> Backend:
    """The server ``name`` (``versitygw`` or ``moto``) started for the session, its credentials in the environment."""
    if name == "versitygw":
        server = request.getfixturevalue("s3_server_env")
        return Backend("versitygw", server.endpoint, server.access_key, server.secret_key)
    request.getfixturevalue("s3_credentials")
    return Backend("moto", request.getfixturevalue("moto_endpoint"), "testing", "testing")


def new_bucket(server: Backend) -> str:
    name = f"anchorage-test-{next(_buckets)}"
    server.client().create_bucket(Bucket=name)
    return name
