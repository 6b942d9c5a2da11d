"""The alerting rules as the chart installs them (the PrometheusRule rendered by Helm from
files/alerts/anchorage.rules.yaml and the values): ``promtool check rules`` and ``promtool test rules``
(alerts/anchorage.rules.test.yaml) pass, every alert is unit-tested and has a runbook, thresholds and scrape
jobs come from the values, the down alerts come only with the monitors that scrape their targets, and every
expression parses and uses only series the components export."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from charts.conftest import Rendered
from charts.promql import problems

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
REPO = Path(__file__).resolve().parents[2]
MONITORED = {"prometheusRule": {"enabled": True},
             "metrics": {"podMonitor": {"enabled": True}, "serviceMonitor": {"enabled": True}}}


@pytest.fixture(scope="module")
def promtool() -> str:
    if not Path(PROMTOOL).exists():
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return PROMTOOL


def groups(render: Callable[..., Rendered], values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    merged = {**MONITORED, **(values or {})}
    rule = render(merged).one("PrometheusRule", "anchorage")
    found: list[dict[str, Any]] = rule["spec"]["groups"]
    return found


def alerts(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rule for group in found for rule in group["rules"] if "alert" in rule]


def promtool_test(promtool: str, found: list[dict[str, Any]], workdir: Path) -> subprocess.CompletedProcess[str]:
    """``promtool test rules`` of alerts/anchorage.rules.test.yaml against ``found`` (written as a rule file)."""
    (workdir / "anchorage.rules.yaml").write_text(yaml.safe_dump({"groups": found}, sort_keys=False))
    shutil.copy(REPO / "alerts" / "anchorage.rules.test.yaml", workdir / "test.yaml")
    return subprocess.run([promtool, "test", "rules", "test.yaml"], capture_output=True, text=True, cwd=workdir,
                          timeout=60)


def test_promtool_checks_the_rendered_rules(promtool: str, render: Callable[..., Rendered], tmp_path: Path) -> None:
    found = groups(render)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": found}, sort_keys=False))
    done = subprocess.run([promtool, "check", "rules", "rules.yaml"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts(found))} rules found" in done.stdout + done.stderr


def test_promtool_unit_tests_pass(promtool: str, render: Callable[..., Rendered], tmp_path: Path) -> None:
    done = promtool_test(promtool, groups(render), tmp_path)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


def test_thresholds_are_values_and_the_unit_tests_notice_them(promtool: str, render: Callable[..., Rendered],
                                                               tmp_path: Path) -> None:
    """A threshold changed through the values reaches the rule (and the unit tests, written for the defaults,
    catch it: they are not vacuous)."""
    loose = groups(render, {"prometheusRule": {"enabled": True, "thresholds": {"gatewayErrorRatio": 0.5}}})
    rule = next(a for a in alerts(loose) if a["alert"] == "AnchorageGatewayErrorRatioHigh")
    assert ") > 0.5\n" in rule["expr"]
    done = promtool_test(promtool, loose, tmp_path)
    assert done.returncode != 0 and "AnchorageGatewayErrorRatioHigh" in done.stdout + done.stderr


def test_down_alerts_follow_their_monitors_and_jobs(render: Callable[..., Rendered]) -> None:
    names = {a["alert"]: a for a in alerts(groups(render))}
    assert 'up{job="anchorage/anchorage-operator"}' in names["AnchorageOperatorDown"]["expr"]  # the PodMonitor's job
    assert 'up{job="anchorage-gateway"}' in names["AnchorageGatewayDown"]["expr"]  # the ServiceMonitor's job
    other = {a["alert"]: a for a in alerts(groups(render, {"prometheusRule": {
        "enabled": True, "operatorJob": "kubernetes-pods", "gatewayJob": "gw"}}))}
    assert 'up{job="kubernetes-pods"}' in other["AnchorageOperatorDown"]["expr"]
    unmonitored = render({"prometheusRule": {"enabled": True}}).one("PrometheusRule", "anchorage")["spec"]["groups"]
    left = {a["alert"] for a in alerts(unmonitored)}
    assert "AnchorageOperatorDown" not in left and "AnchorageGatewayDown" not in left  # they would always fire
    assert "AnchorageCampaignStalled" in left


def test_every_alert_has_a_firing_unit_test(render: Callable[..., Rendered]) -> None:
    tests = yaml.safe_load((REPO / "alerts" / "anchorage.rules.test.yaml").read_text())["tests"]
    fired = {case["alertname"] for test in tests for case in test["alert_rule_test"] if case.get("exp_alerts")}
    assert fired == {a["alert"] for a in alerts(groups(render))}


def test_rules_use_only_exported_series_and_their_labels(render: Callable[..., Rendered]) -> None:
    found = {a["alert"]: problems(a["expr"]) for a in alerts(groups(render))}
    assert {name: p for name, p in found.items() if p} == {}


def test_every_alert_says_what_to_do_and_links_its_runbook(render: Callable[..., Rendered]) -> None:
    for alert in alerts(groups(render)):
        name = alert["alert"]
        assert alert["labels"]["severity"] in {"info", "warning", "critical"}, name
        assert alert["annotations"]["summary"] and len(alert["annotations"]["description"]) > 40, name
        url = alert["annotations"]["runbook_url"]
        assert url == f"https://github.com/anchorage-dev/anchorage/blob/main/docs/runbooks/{name}.md", url
        runbook = REPO / "docs" / "runbooks" / f"{name}.md"
        assert runbook.is_file(), f"{name}: no runbook {runbook.relative_to(REPO)}"
        assert name in runbook.read_text() and "## " in runbook.read_text()


def test_a_missing_threshold_fails_the_install(helm: Any, chart_dir: Path, tmp_path: Path) -> None:
    """A placeholder the values do not fill is an install error, never a rule Prometheus would reject."""
    from charts.conftest import install

    with pytest.raises(helm.InstallError, match="thresholds"):
        install(helm, {"prometheusRule": {"enabled": True, "thresholds": {"budgetRefusals": None}}})
