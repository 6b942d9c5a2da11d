"""Fixtures of the gateway tests: a running mock upstream and a factory of gateways in front of it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from anchorage.gateway import BackgroundServer, Gateway, GatewayConfig, start_gateway
from anchorage.gateway.mock import MockConfig, MockUpstream

PROVIDER_KEY = "sk-provider-secret-0123"

# Round prices (USD per 1M tokens) so expected costs are easy to state in the tests.
PRICES = """
version: test-1
models:
  mock-model: {input: 1.0, cached_input: 0.5, output: 4.0}
  peak-model:
    peak: {input: 2.0, cached_input: 1.0, output: 8.0}
    off_peak: {input: 1.0, cached_input: 0.5, output: 4.0}
aliases:
  mock-alias: mock-model
"""


@pytest.fixture(scope="session")
def provider_key() -> str:
    return PROVIDER_KEY


@pytest.fixture(scope="session")
def prices_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prices") / "test-1.yaml"
    path.write_text(PRICES)
    return path


class Upstream:
    """A mock upstream served from a background thread."""

    def __init__(self, config: MockConfig) -> None:
        self.mock = MockUpstream(config)
        self.server = BackgroundServer(self.mock.app(), name="mock-upstream").start()
        assert self.server.url is not None
        self.url: str = self.server.url


@pytest.fixture
def upstream_factory() -> Iterator[Callable[..., Upstream]]:
    started: list[Upstream] = []

    def make(**config: Any) -> Upstream:
        upstream = Upstream(MockConfig(expected_api_key=PROVIDER_KEY, **config))
        started.append(upstream)
        return upstream

    yield make
    for upstream in started:
        upstream.server.stop()


@pytest.fixture
def gateway_factory(prices_file: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Gateway]]:
    monkeypatch.setenv("TEST_PROVIDER_KEY", PROVIDER_KEY)
    started: list[Gateway] = []

    def make(upstream: Upstream, *, reasoning_in_output: bool = True, api: str = "openai",
             retry: dict[str, Any] | None = None, **config: Any) -> Gateway:
        upstreams = [{"name": "mock", "base_url": upstream.url, "api": "openai", "models": ["*"],
                      "api_key_env": "TEST_PROVIDER_KEY", "reasoning_in_output": reasoning_in_output},
                     {"name": "mock-anthropic", "base_url": upstream.url, "api": "anthropic",
                      "models": ["*"], "api_key_env": "TEST_PROVIDER_KEY"}]
        retry = {"base_delay_seconds": 0.01, "max_total_seconds": 10, **(retry or {})}
        gateway = start_gateway(GatewayConfig.model_validate(
            {"upstreams": upstreams, "prices": str(prices_file), "retry": retry, **config}))
        started.append(gateway)
        return gateway

    yield make
    for gateway in started:
        gateway.stop()
