"""What a PromQL expression refers to — metric names and label names — checked against the collectors of
``anchorage.metrics``. Used by the alert-rule and dashboard tests (static), before the end-to-end test
runs the same expressions through a real Prometheus.
"""

from __future__ import annotations

import re
from typing import Any

from anchorage import metrics

# Labels Prometheus adds to every scraped series, and the histogram bucket label.
SCRAPE_LABELS = {"job", "instance", "le", "__name__"}
FUNCTION_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset",
                  "bool"}
METRIC = re.compile(r"\banchorage_[a-z0-9_]+\b")
MATCHER = re.compile(r"\b([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")


def defined_series() -> dict[str, set[str]]:
    """Every series name the collectors export (with _total/_bucket/_sum/_count) → its label names."""
    series: dict[str, set[str]] = {}
    for value in vars(metrics).values():
        describe = getattr(value, "describe", None)
        labelnames: Any = getattr(value, "_labelnames", None)
        if describe is None or labelnames is None:
            continue
        for family in describe():
            labels = set(labelnames)
            if family.type == "histogram":
                for suffix in ("_bucket", "_sum", "_count"):
                    series[family.name + suffix] = labels | {"le"} if suffix == "_bucket" else labels
            elif family.type == "counter":
                series[family.name + "_total"] = labels
            else:
                series[family.name] = labels
    return series


def problems(expr: str) -> list[str]:
    """Metric names the collectors do not define and label names none of the expression's metrics has."""
    series = defined_series()
    names = set(METRIC.findall(expr))
    found = [f"unknown metric {n}" for n in sorted(names - set(series))]
    allowed = set().union(*(series.get(n, set()) for n in names)) | SCRAPE_LABELS
    used = set(MATCHER.findall(expr))
    for group in GROUPING.findall(expr):
        used |= {label.strip() for label in group.split(",") if label.strip()}
    found += [f"label {label!r} is not a label of {sorted(names)}" for label in sorted(used - allowed - FUNCTION_WORDS)]
    if not names:
        found.append("no anchorage_ metric in the expression")
    return found
