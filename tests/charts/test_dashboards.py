"""The Grafana dashboards, statically: well-formed for Grafana; every query parses (a real PromQL parser) and
uses only metrics some component exports and their bounded labels; every query is scoped by the cluster and
namespace variables (a Prometheus of several clusters or releases); variables resolve, ``$entry`` within the
chosen ``$campaign``. tests/observability runs the same queries through a real Prometheus."""

from __future__ import annotations

import re

import pytest

from charts import dashboards
from charts.promql import defined_series, parse, problems

QUERIES = list(dashboards.queries())
EXPECTED = {"campaign-overview", "trials-health", "gateway-spend", "verification"}
# DESIGN.md: bounded labels only — never a trial or a pod.
UNBOUNDED = {"trial", "pod", "trial_id", "job_name", "token"}
LABEL_VALUES = re.compile(r"label_values\((?P<selector>.+), (?P<label>\w+)\)")


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
    titles = [p["title"] for p in dashboard["panels"]]
    assert len(set(titles)) == len(titles), "panel titles must be unique"
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"] and panel["description"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(set(refs)) == len(refs), panel["title"]
    kinds = {v["name"]: v["type"] for v in dashboard["templating"]["list"]}
    assert kinds["datasource"] == "datasource"
    assert [v for v in kinds if v in ("cluster", "namespace")] == ["cluster", "namespace"], kinds


@pytest.mark.parametrize("query", QUERIES, ids=[q.id for q in QUERIES])
def test_query_uses_only_exported_metrics_and_their_labels(query: dashboards.Query) -> None:
    assert problems(query.expr) == []
    assert "$" not in query.expr, f"unresolved Grafana variable in {query.expr}"


@pytest.mark.parametrize("query", QUERIES, ids=[q.id for q in QUERIES])
def test_every_selector_is_scoped_by_cluster_and_namespace(query: dashboards.Query) -> None:
    raw = query.raw
    for builtin, value in dashboards.BUILTINS.items():  # Grafana's interval variables: not PromQL
        raw = raw.replace(builtin, value)
    for selector in parse(raw).selectors:
        assert selector.matchers.get("cluster") == ("=~", "$cluster"), (selector.name, query.raw)
        assert selector.matchers.get("namespace") == ("=~", "$namespace"), (selector.name, query.raw)
        if "campaign" in defined_series()[str(selector.name)]:
            assert selector.matchers.get("campaign") == ("=~", "$campaign"), (selector.name, query.raw)


def test_no_query_groups_or_filters_by_an_unbounded_label() -> None:
    for query in QUERIES:
        parsed = parse(query.expr)
        used = parsed.grouping | {label for s in parsed.selectors for label in s.matchers}
        assert not used & UNBOUNDED, query.id


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_variables_list_values_of_exported_labels_each_within_the_ones_before(name: str) -> None:
    """cluster → namespace → campaign → entry/task: each variable's query is filtered by the variables before it
    (so ``$entry`` lists only the entries of the chosen campaigns)."""
    series = defined_series()
    before: list[str] = []
    for variable in dashboards.variables(dashboards.load()[name]):
        found = LABEL_VALUES.fullmatch(variable["query"]["query"])
        assert found, f"{name}: variable {variable['name']} is not a label_values query"
        selector = parse(found["selector"]).selectors[0]
        label = found["label"]
        assert label == variable["name"] and label in series[str(selector.name)] | {"cluster", "namespace"}, variable
        scoped = [v for v in before if v in series[str(selector.name)] | {"cluster", "namespace"}]
        if label != "model":
            assert {k: m for k, m in selector.matchers.items()} == {v: ("=~", f"${v}") for v in scoped}, variable
        assert variable["allValue"] == ".*" and variable["includeAll"] is True
        before.append(label)
    assert "entry" not in before or before.index("campaign") < before.index("entry")


def test_every_metric_appears_on_some_dashboard() -> None:
    """Nothing the code exports is left off the dashboards (histograms count by their buckets or sums)."""
    used = {m for q in QUERIES for m in parse(q.expr).metrics}
    families = {re.sub(r"_(bucket|sum|count)$", "", s) for s in defined_series()}
    covered = {re.sub(r"_(bucket|sum|count)$", "", m) for m in used}
    assert families - covered == set()


def test_campaign_overview_has_progress_leaderboard_and_cost() -> None:
    overview = {q.panel for q in QUERIES if q.dashboard == "campaign-overview"}
    assert {"Progress", "Leaderboard", "Spend by entry"} <= overview


def test_scores_are_shown_with_their_scoring_profile() -> None:
    leaderboard = [q for q in QUERIES if (q.dashboard, q.panel) == ("campaign-overview", "Leaderboard")]
    assert all("profile" in parse(q.expr).grouping for q in leaderboard if "eval" in q.expr)


def test_the_parser_catches_what_a_regex_would_miss() -> None:
    assert problems('sum by (campaign) (rate(anchorage_cost_usd_total{trial="x"}[5m])') != []  # unbalanced
    assert problems('anchorage_tokens_total / on (pod) anchorage_cost_usd_total') == [
        "grouping label 'pod' is not a label of ['anchorage_cost_usd_total', 'anchorage_tokens_total']"]
    assert problems('{__name__="anchorage_nope_total"}') == ["unknown metric anchorage_nope_total"]
    assert problems("up == 0") == []
