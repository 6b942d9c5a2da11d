"""The Grafana dashboards, statically: well-formed for Grafana, queries that use only the metrics and the
bounded labels anchorage.metrics defines, variables that resolve. tests/observability runs the same
queries through a real Prometheus."""

from __future__ import annotations

import re

import pytest

from charts import dashboards
from charts.promql import defined_series, problems

QUERIES = list(dashboards.queries())
EXPECTED = {"campaign-overview", "trials-health", "gateway-spend", "verification"}
# DESIGN.md: bounded labels only — never a trial or a pod.
UNBOUNDED = {"trial", "pod", "trial_id", "job_name", "token"}


def test_the_four_dashboards_exist_with_unique_uids() -> None:
    loaded = dashboards.load()
    assert set(loaded) == EXPECTED
    uids = [d["uid"] for d in loaded.values()]
    assert len(set(uids)) == len(uids) and all(u.startswith("anchorage-") for u in uids)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_dashboard_is_well_formed(name: str) -> None:
    dashboard = dashboards.load()[name]
    assert dashboard["schemaVersion"] >= 36 and dashboard["title"].startswith("Anchorage / ")
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(set(ids)) == len(ids), "panel ids must be unique"
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"] and panel["description"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(set(refs)) == len(refs), panel["title"]
    kinds = {v["name"]: v["type"] for v in dashboard["templating"]["list"]}
    assert kinds["datasource"] == "datasource"


@pytest.mark.parametrize("query", QUERIES, ids=[q.id for q in QUERIES])
def test_query_uses_only_defined_metrics_and_labels(query: dashboards.Query) -> None:
    assert problems(query.expr) == []
    assert "$" not in query.expr, f"unresolved Grafana variable in {query.expr}"


def test_no_query_groups_or_filters_by_an_unbounded_label() -> None:
    for query in QUERIES:
        words = set(re.findall(r"[a-z_]+", query.expr))
        assert not words & UNBOUNDED, query.id


def test_variables_list_values_of_defined_labels() -> None:
    series = defined_series()
    for name, dashboard in dashboards.load().items():
        for variable in dashboards.variables(dashboard):
            found = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["query"]["query"])
            assert found, f"{name}: variable {variable['name']} is not a label_values query"
            metric, label = found.groups()
            assert label == variable["name"] and label in series[metric], f"{name}: {variable['query']}"
            assert variable["allValue"] == ".*" and variable["includeAll"] is True


def test_every_metric_appears_on_some_dashboard() -> None:
    """Nothing the code exports is left off the dashboards (histograms count by their buckets or sums)."""
    used = {m for q in QUERIES for m in re.findall(r"anchorage_[a-z0-9_]+", q.expr)}
    families = {re.sub(r"_(bucket|sum|count)$", "", s) for s in defined_series()}
    covered = {re.sub(r"_(bucket|sum|count)$", "", m) for m in used}
    assert families - covered == set()


def test_campaign_overview_has_progress_leaderboard_and_cost() -> None:
    overview = {q.panel for q in QUERIES if q.dashboard == "campaign-overview"}
    assert {"Progress", "Leaderboard", "Spend by entry"} <= overview
