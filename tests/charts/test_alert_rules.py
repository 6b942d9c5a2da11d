"""The alerting rules: ``promtool check rules`` and ``promtool test rules`` (alerts/anchorage.rules.test.yaml)
pass, every alert is unit-tested, and every expression uses only metrics and labels anchorage.metrics
defines."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from charts.promql import problems

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


@pytest.fixture(scope="module")
def promtool() -> str:
    if not Path(PROMTOOL).exists():
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return PROMTOOL


def rules_file(repo_root: Path) -> Path:
    return repo_root / "charts" / "anchorage" / "files" / "alerts" / "anchorage.rules.yaml"


def alerts(repo_root: Path) -> list[dict[str, Any]]:
    groups = yaml.safe_load(rules_file(repo_root).read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def run(promtool: str, *args: str, cwd: Path) -> str:
    done = subprocess.run([promtool, *args], capture_output=True, text=True, cwd=cwd, timeout=60)
    assert done.returncode == 0, f"promtool {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def test_promtool_checks_the_rules(promtool: str, repo_root: Path) -> None:
    out = run(promtool, "check", "rules", str(rules_file(repo_root)), cwd=repo_root)
    assert f"SUCCESS: {len(alerts(repo_root))} rules found" in out


def test_promtool_unit_tests_pass(promtool: str, repo_root: Path) -> None:
    out = run(promtool, "test", "rules", "anchorage.rules.test.yaml", cwd=repo_root / "alerts")
    assert "SUCCESS" in out


def test_promtool_unit_tests_catch_a_broken_threshold(promtool: str, repo_root: Path, tmp_path: Path) -> None:
    """The unit tests are not vacuous: loosening one threshold makes them fail."""
    broken = rules_file(repo_root).read_text().replace(") > 0.05", ") > 0.5")
    assert broken != rules_file(repo_root).read_text()
    (tmp_path / "rules.yaml").write_text(broken)
    tests = (repo_root / "alerts" / "anchorage.rules.test.yaml").read_text()
    (tmp_path / "test.yaml").write_text(tests.replace("../charts/anchorage/files/alerts/anchorage.rules.yaml", "rules.yaml"))
    done = subprocess.run([promtool, "test", "rules", "test.yaml"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=60)
    assert done.returncode != 0 and "AnchorageGatewayErrorRatioHigh" in done.stdout + done.stderr


def test_every_alert_has_a_firing_unit_test(repo_root: Path) -> None:
    tests = yaml.safe_load((repo_root / "alerts" / "anchorage.rules.test.yaml").read_text())["tests"]
    fired = {case["alertname"] for test in tests for case in test["alert_rule_test"] if case.get("exp_alerts")}
    assert fired == {a["alert"] for a in alerts(repo_root)}


def test_rules_use_only_defined_metrics_and_labels(repo_root: Path) -> None:
    found = {a["alert"]: problems(a["expr"]) for a in alerts(repo_root)}
    assert {name: p for name, p in found.items() if p} == {}


def test_every_alert_says_what_to_do(repo_root: Path) -> None:
    for alert in alerts(repo_root):
        assert alert["labels"]["severity"] in {"info", "warning", "critical"}, alert["alert"]
        assert alert["annotations"]["summary"] and len(alert["annotations"]["description"]) > 40, alert["alert"]
