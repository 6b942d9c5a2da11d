"""A campaign with an entry whose every trial failed for the platform (a codex entry whose CLI is not installed):
no board invents a score for it. The console, leaderboard.md/csv/json, report.html and the viewer (in Chromium)
show "—" for it with the reason and its fix, count its cells against the plan (0 of 2 scored), and the campaign's
total cost; the console names the failure's reason and fix as it happens."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import REPO
from tests.viewer.chromium import chromium, new_page, screenshot

from anchorage.gateway.running import BackgroundServer
from anchorage.report.runs import LocalRuns
from anchorage.viewer.app import make_app

MANIFEST = """\
apiVersion: anchorage.dev/v1alpha1
kind: VerificationCampaign
metadata: {name: failing}
spec:
  tasks: [smoke-inventory]
  entries:
    - {name: mock, agent: {kind: mock, model: mock-model}}
    - {name: broken, agent: {kind: codex, model: mock-model}}
  baseline: mock
  seeds: 2
  parallelism: 2
"""
FIX = "install it with: anchorage agents install codex"


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory, mechanism: object) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The campaign run by the real CLI with an empty agent cache (so the codex CLI is surely missing)."""
    root = tmp_path_factory.mktemp("failing")
    (root / "campaign.yaml").write_text(MANIFEST)
    env = {**os.environ, "ANCHORAGE_CACHE": str(root / "cache")}
    done = subprocess.run([sys.executable, "-c", "from anchorage.cli import main; main()", "run",
                           str(root / "campaign.yaml"), "--runs-dir", str(root / "runs")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 3, done.stdout + done.stderr     # an infrastructure failure: exit 3
    return root / "runs" / "failing", done


def test_the_console_shows_dash_the_reason_and_the_fix(failing: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    _, done = failing
    row = next(line for line in done.stdout.splitlines() if "broken" in line and "│" in line)
    assert "no score: 0/2 cells scored" in row and "—" in row and "0.0000" not in row
    out = " ".join(done.stdout.split())                       # Rich wraps long lines
    assert "broken: — no scored trial: 2 InfrastructureFailed (2 sandbox_error)" in out and FIX in out
    assert "2 trial(s) failed for the platform" in out and "Campaign total cost: $" in out
    assert "2 of 4 planned cells" in out
    progress = [line for line in done.stderr.splitlines() if "failing-broken" in line]
    assert any("InfrastructureFailed (sandbox_error)" in line for line in progress)
    assert any(FIX in line for line in progress)              # said as it happens, not only in trial.json


def test_the_files_show_no_score_for_it(failing: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    run, _ = failing
    markdown = (run / "leaderboard.md").read_text()
    row = next(line for line in markdown.splitlines() if line.startswith("| broken"))
    assert row.split(" | ")[1:4] == ["—", "—", "—"] and "0/2 cells scored" in row
    assert "broken: — no scored trial" in markdown and FIX in markdown and "Campaign total cost: $" in markdown
    rows = {r["entry"]: r for r in csv.DictReader(io.StringIO((run / "leaderboard.csv").read_text()))}
    broken = rows["broken"]
    assert (broken["o_eval_mean"], broken["bo_eval_mean"], broken["cost_per_seed_usd"]) == ("", "", "")
    assert (broken["cells_scored"], broken["cells_expected"]) == ("0", "2") and FIX in broken["no_score_reason"]
    assert float(broken["campaign_total_cost_usd"]) == pytest.approx(float(rows["mock"]["campaign_total_cost_usd"]))
    board = json.loads((run / "leaderboard.json").read_text())
    entry = next(r for r in board["rows"] if r["entry"] == "broken")
    assert entry["o_eval_mean"] is None and entry["bo_eval_mean"] is None and FIX in entry["no_score"]
    assert (board["cells_planned"], board["cells_scored"]) == (4, 2) and board["total_cost_usd"] > 0
    assert "mean raw panel score of the baseline entry 'mock'" in board["f_rule"]


@pytest.fixture(scope="module")
def viewer(failing: tuple[Path, subprocess.CompletedProcess[str]]) -> Iterator[str]:
    server = BackgroundServer(make_app(LocalRuns(failing[0].parent), ttl=0.0), name="viewer").start()
    yield f"http://127.0.0.1:{server.port}"
    server.stop()


@pytest.fixture
def page() -> Iterator[Any]:
    errors: list[str] = []
    with chromium() as browser, new_page(browser, errors) as opened:
        yield opened
    assert not errors, errors


def _board_row(page: Any, entry: str) -> list[str]:
    row = page.locator("#leaderboard tbody tr", has_text=entry).first
    return [t.strip() for t in row.locator("td").all_text_contents()]


def _assert_dash(page: Any) -> None:
    cells = _board_row(page, "broken (no score")
    assert cells[1] == "broken (no score: 0/2 cells scored)"
    assert cells[2:8] == ["—"] * 6                               # Art., O-Eval ± std, BO-Eval ± std, cost
    notes = page.locator("#board-notes").text_content()
    assert "broken: — no scored trial: 2 InfrastructureFailed" in notes and FIX in notes
    assert "Campaign total cost: $" in notes and "2 of 4 planned cells" in notes
    per_task = page.locator("#per-task-o-eval tbody tr").first.locator("td").all_text_contents()
    assert per_task[2].strip() == "—"


def test_the_viewer_shows_dash_and_the_reason(viewer: str, page: Any) -> None:
    page.goto(f"{viewer}/campaigns/failing/")
    _assert_dash(page)
    assert page.get_by_text("— no value, because").count() == 1 or "no value, because" in page.content()
    screenshot(page, "failed-entry-campaign")
    page.locator("#leaderboard").get_by_role("link", name="broken (no score: 0/2 cells scored)").click()
    assert "no scored trial: 2 InfrastructureFailed" in page.locator("main").text_content()
    trial = page.locator("#trials tbody tr").first.locator("td").all_text_contents()
    assert trial[4] == "InfrastructureFailed" and trial[7] == "—"    # no O-Eval: never a zero
    screenshot(page, "failed-entry-entry")


def test_the_report_shows_dash_and_the_reason(failing: tuple[Path, subprocess.CompletedProcess[str]],
                                              page: Any) -> None:
    page.goto((failing[0] / "report.html").as_uri())
    _assert_dash(page)
    screenshot(page, "failed-entry-report")
