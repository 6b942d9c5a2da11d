"""What a PromQL expression refers to — the series it selects (metric name and label matchers) and the label
names it groups or matches on — read from the syntax tree of a real PromQL parser (``promql-parser``, the
Rust parser's Python binding), and checked against the series the components export (``anchorage.metrics``'
collectors, plus ``up``, which Prometheus itself writes for every target). Used by the alert-rule and
dashboard tests (static), before tests/observability runs the same expressions through a real Prometheus.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import promql_parser as promql

from anchorage import metrics

# Labels every scraped series may carry: Prometheus' own (job, instance), the target labels a Prometheus
# that scrapes several clusters and releases adds (cluster, namespace: the dashboards' variables), the
# histogram bucket label, and the name pseudo-label.
SCRAPE_LABELS = {"job", "instance", "cluster", "namespace", "le", "__name__"}
#: Series Prometheus writes itself for every scrape target (the operator-down and gateway-down alerts use them).
PROMETHEUS_SERIES = {"up": set()}


@dataclass
class Selector:
    """One vector selector: ``name{label op value, ...}``."""

    name: str | None
    matchers: dict[str, tuple[str, str]] = field(default_factory=dict)  # label -> (op, value)


@dataclass
class Parsed:
    """What an expression refers to."""

    selectors: list[Selector]
    grouping: set[str]  # labels of by/without, on/ignoring and group_left/right

    @property
    def metrics(self) -> set[str]:
        return {s.name for s in self.selectors if s.name}


_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}


def _op(matcher: Any) -> str:
    text = str(matcher.op)
    return next((sign for key, sign in _OPS.items() if text.endswith(f".{key}")), text)


def _children(node: Any) -> Iterator[Any]:
    if isinstance(node, promql.AggregateExpr):
        yield node.expr
        if node.param is not None:
            yield node.param
    elif isinstance(node, promql.BinaryExpr):
        yield node.lhs
        yield node.rhs
    elif isinstance(node, promql.Call):
        yield from node.args
    elif isinstance(node, promql.ParenExpr | promql.SubqueryExpr | promql.UnaryExpr):
        yield node.expr
    elif isinstance(node, promql.MatrixSelector):
        yield node.vector_selector


def _grouping(node: Any) -> set[str]:
    if isinstance(node, promql.AggregateExpr) and node.modifier is not None:
        return set(node.modifier.labels)
    if isinstance(node, promql.BinaryExpr) and node.modifier is not None:
        found = set(node.modifier.matching.labels) if node.modifier.matching is not None else set()
        return found | set(getattr(node.modifier, "group_labels", None) or ())
    return set()


def parse(expr: str) -> Parsed:
    """The selectors and grouping labels of ``expr``; raises ``ValueError`` with the parser's message."""
    root = promql.parse(expr)
    selectors: list[Selector] = []
    grouping: set[str] = set()
    pending = [root]
    while pending:
        node = pending.pop()
        grouping |= _grouping(node)
        if isinstance(node, promql.VectorSelector):
            found = Selector(node.name)
            for matcher in [*node.matchers.matchers, *(m for group in node.matchers.or_matchers for m in group)]:
                if matcher.name == "__name__":
                    found.name = found.name or matcher.value
                else:
                    found.matchers[matcher.name] = (_op(matcher), matcher.value)
            selectors.append(found)
        pending.extend(_children(node))
    return Parsed(selectors, grouping)


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


def exported_series() -> dict[str, set[str]]:
    """:func:`defined_series` and the series Prometheus writes itself (``up``)."""
    return {**defined_series(), **PROMETHEUS_SERIES}


def problems(expr: str) -> list[str]:
    """What is wrong with ``expr``: a parse error, a selector without a metric name, metrics no component
    exports, and label names (in matchers or grouping) that none of the selected series has."""
    try:
        parsed = parse(expr)
    except ValueError as exc:
        return [f"does not parse: {exc}"]
    series = exported_series()
    found: list[str] = []
    for selector in parsed.selectors:
        if selector.name is None:
            found.append(f"a selector without a metric name: {selector.matchers}")
        elif selector.name not in series:
            found.append(f"unknown metric {selector.name}")
        else:
            unknown = set(selector.matchers) - series[selector.name] - SCRAPE_LABELS
            found += [f"label {label!r} is not a label of {selector.name}" for label in sorted(unknown)]
    allowed = set().union(*(series.get(n, set()) for n in parsed.metrics)) | SCRAPE_LABELS
    found += [f"grouping label {label!r} is not a label of {sorted(parsed.metrics)}"
              for label in sorted(parsed.grouping - allowed)]
    if not parsed.metrics:
        found.append("no metric in the expression")
    return found
