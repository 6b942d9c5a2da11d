"""A real Prometheus server scrapes the gateway's /metrics (on its admin listener); its HTTP API returns the
request counter."""

from __future__ import annotations

import urllib.request
from typing import Any
from urllib.parse import urlparse

import pytest


def chat(url: str, token: str) -> int:
    request = urllib.request.Request(
        url + "/v1/chat/completions", method="POST",
        data=b'{"model": "mock-model", "messages": [{"role": "user", "content": "count me"}]}',
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(response.status)


@pytest.mark.slow
def test_prometheus_scrapes_gateway_request_counter(gateway_factory: Any, upstream_factory: Any,
                                                    prometheus_factory: Any) -> None:
    gateway = gateway_factory(upstream_factory(), admin_port=0)
    token = gateway.issue_token("trial-prom", entry="demo-entry")
    assert [chat(gateway.url, token) for _ in range(3)] == [200, 200, 200]

    prometheus = prometheus_factory([urlparse(gateway.admin_url).netloc])
    expr = 'sum(anchorage_gateway_requests_total{endpoint="chat",model="mock-model",code="200"})'
    result = prometheus.wait_for(expr)
    assert result, f"no data for {expr}; targets: {prometheus.targets_up()}"
    # The counter is process-wide (other tests in this session add to it), so at least our three.
    assert float(result[0]["value"][1]) >= 3
    tokens = prometheus.wait_for('anchorage_tokens_total{entry="demo-entry",kind="input"}')
    assert tokens and float(tokens[0]["value"][1]) > 0
    # No trial id ever becomes a label.
    series = prometheus.api("series", **{"match[]": '{__name__=~"anchorage_.*"}'})["data"]
    assert series and all("trial-prom" not in str(labels) for labels in series)
    with pytest.raises(ValueError, match="parse"):
        prometheus.query("sum(anchorage_gateway_requests_total")
