"""Fixtures of the verification tests: the real gateway in front of the labelled mock upstream."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from anchorage.gateway import BackgroundServer, Gateway, GatewayConfig, start_gateway
from anchorage.gateway.mock import MockConfig, MockUpstream
from anchorage.verify.models import GatewayClient

DATA = Path(__file__).parent / "data"


@dataclass
class MockGateway:
    """A running gateway + mock upstream, and a client holding a trial token of the gateway."""

    mock: MockUpstream
    gateway: Gateway
    client: GatewayClient
    trial: str


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def mock_gateway() -> Iterator[MockGateway]:
    mock = MockUpstream(MockConfig.load(DATA / "panel" / "replies.yaml"))
    upstream = BackgroundServer(mock.app(), name="verify-mock-upstream").start()
    gateway = start_gateway(GatewayConfig.model_validate({"upstreams": [{"name": "mock", "base_url": upstream.url}]}))
    assert gateway.url is not None
    try:
        yield MockGateway(mock, gateway, GatewayClient(gateway.url, gateway.issue_token("verify-test")), "verify-test")
    finally:
        gateway.stop()
        upstream.stop()
