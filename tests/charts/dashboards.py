"""The Grafana dashboards of the chart as data: every panel query, with Grafana's variables replaced by
values Prometheus accepts. Used by the static dashboard tests and by tests/observability, which runs the
queries through a real Prometheus.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DASHBOARDS = Path(__file__).resolve().parents[2] / "charts" / "anchorage" / "files" / "dashboards"
# Grafana's built-in interval variables, at values that suit a test Prometheus scraping every second.
BUILTINS = {"$__rate_interval": "1m", "$__interval": "5s", "$__range": "5m"}


@dataclass(frozen=True)
class Query:
    dashboard: str
    panel: str
    expr: str  # Grafana's variables replaced (see :func:`substitute`)
    raw: str = ""  # as written in the dashboard

    @property
    def id(self) -> str:
        return f"{self.dashboard}/{self.panel}"


def load() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))}


def variables(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in dashboard["templating"]["list"] if v["type"] == "query"]


def substitute(expr: str, names: list[str], chosen: dict[str, str] | None = None) -> str:
    """Grafana variables → PromQL: ``$var`` (regex matchers: ``chosen[var]``, else "All" = ``.*``) and the
    interval built-ins."""
    for builtin, value in BUILTINS.items():
        expr = expr.replace(builtin, value)
    for name in sorted(names, key=len, reverse=True):
        expr = re.sub(rf"\$(?:{name}\b|\{{{name}\}})", (chosen or {}).get(name, ".*"), expr)
    return expr


def queries(chosen: dict[str, str] | None = None) -> Iterator[Query]:
    """Every panel target of every dashboard, with the variables in ``chosen`` set and the others at "All"."""
    for name, dashboard in load().items():
        names = [v["name"] for v in variables(dashboard)]
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                yield Query(name, panel["title"], substitute(target["expr"], names, chosen), target["expr"])
