"""``anchorage view`` in a real headless Chromium (Debian's ``chromium``, driven by Playwright) on the demo run:
the leaderboard sorts (and the sort survives in a shared link), the trials table filters, a trial page shows
its failed gates with their messages, a transcript page renders, the drill-down links lead where they say.
Every page is screenshotted into ``test-output/viewer/`` and each screenshot is checked for content."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anchorage.gateway.running import BackgroundServer
from anchorage.report.runs import LocalRuns
from anchorage.viewer.app import make_app

from .chromium import chromium, new_page, screenshot

MOCK = "demo-mock-smoke-inventory-s0"


@pytest.fixture(scope="module")
def viewer(demo_runs: Path) -> Iterator[str]:
    server = BackgroundServer(make_app(LocalRuns(demo_runs), ttl=0.0), name="viewer").start()
    yield f"http://127.0.0.1:{server.port}"
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    errors: list[str] = []
    with new_page(browser, errors, console=True) as opened:
        yield opened
    assert not errors, f"the page reported errors: {errors}"   # e.g. a script refused by the CSP


def cells(page: Any, table: str, column: int) -> list[str]:
    return [t.strip() for t in page.locator(f"#{table} tbody tr").evaluate_all(
        f"rows => rows.filter(r => r.style.display !== 'none').map(r => r.cells[{column}].textContent)")]


def entries(page: Any) -> list[str]:
    """The leaderboard's entries in their shown order (without their "(incomplete: ...)" flag: the demo fixture
    runs the smoke task only, 6 of the 24 planned cells)."""
    return [text.split(" (")[0] for text in cells(page, "leaderboard", 1)]


def test_leaderboard_sorts_and_the_link_keeps_the_sort(viewer: str, page: Any) -> None:
    page.goto(f"{viewer}/campaigns/demo/")
    assert entries(page) == ["oracle", "mock"]              # ranked
    header = page.locator("#leaderboard thead th", has_text="O-Eval").first
    header.click()
    assert entries(page) == ["mock", "oracle"]              # O-Eval ascending
    assert header.get_attribute("aria-sort") == "ascending"
    header.click()
    assert entries(page) == ["oracle", "mock"]
    page.locator("#leaderboard thead th", has_text="entry").first.click()
    assert entries(page) == ["mock", "oracle"]              # by name
    shared = page.url
    assert "sort.leaderboard=1.asc" in shared
    screenshot(page, "campaign")
    page.goto(shared)                                                        # the shared link shows the same
    assert entries(page) == ["mock", "oracle"]


def test_trials_filter_and_numeric_sort(viewer: str, page: Any) -> None:
    page.goto(f"{viewer}/campaigns/demo/")
    page.fill("input[data-filter-for='trials']", "mock")
    assert cells(page, "trials", 1) == ["mock"] * 3
    assert page.locator("[data-count-for='trials']").text_content() == "3 of 6 rows"
    assert "q.trials=mock" in page.url
    page.locator("#trials thead th", has_text="O-Eval").first.click()
    values = [float(v) for v in cells(page, "trials", 7)]
    assert values == sorted(values) and len(set(values)) > 1
    page.goto(page.url)
    assert page.locator("input[data-filter-for='trials']").input_value() == "mock"
    assert len(cells(page, "trials", 1)) == 3


def test_a_trial_page_shows_the_failed_gates_with_their_messages(viewer: str, page: Any, demo_runs: Path) -> None:
    score = json.loads((demo_runs / "demo" / MOCK / "score.json").read_text())
    failed = [g for g in score["gates"] if g["status"] == "failed"]
    assert failed, "the mock's smoke-inventory answer fails gates (the demo shows them)"
    page.goto(f"{viewer}/campaigns/demo/trials/{MOCK}")
    outcome = page.locator("main p").first.text_content()
    assert "Succeeded" in outcome and all(g["name"] in outcome for g in failed)   # the message names them
    rows = page.locator("#gates tbody tr")
    shown = {rows.nth(i).locator("td").nth(0).text_content(): rows.nth(i).locator("td").nth(4).text_content()
             for i in range(rows.count())}
    for gate in failed:
        assert shown[gate["name"]] == gate["message"]
    first = [rows.nth(i).locator("td").nth(1).text_content() for i in range(len(failed))]
    assert first == ["failed"] * len(failed)                                 # failed gates come first
    metrics = page.locator("#metrics tbody tr")
    assert metrics.count() == len(score["metrics"])
    assert page.get_by_text("price snapshot").count() and page.get_by_text("paper@1").count()
    cost = page.locator("dl.facts dt", has_text="cost").locator("xpath=following-sibling::dd[1]").first.text_content()
    assert cost.startswith("$0.00") and "gateway metering" in cost
    assert page.locator("pre").count() >= 1                                  # the agent's log tails
    screenshot(page, "trial")


def test_a_transcript_page_renders(viewer: str, page: Any, demo_runs: Path) -> None:
    line = json.loads((demo_runs / "demo" / MOCK / "transcript.jsonl").read_text().splitlines()[0])
    page.goto(f"{viewer}/campaigns/demo/trials/{MOCK}")
    page.get_by_role("link", name="1 model calls", exact=False).click()
    assert page.url.endswith(f"/campaigns/demo/trials/{MOCK}/transcript")
    assert page.locator("h3", has_text="Call #1").count() == 1
    assert page.locator("#calls tbody tr").count() == 1
    answer = page.locator(".turn.assistant pre").first.text_content()
    assert answer.strip() == line["response"]["choices"][0]["message"]["content"].strip()
    system = page.locator(".turn.system pre").first.text_content()
    assert system == line["request"]["messages"][0]["content"]
    screenshot(page, "transcript")


def test_drill_down_from_the_campaigns_to_a_trial(viewer: str, page: Any) -> None:
    page.goto(viewer)
    screenshot(page, "campaigns")
    page.get_by_role("link", name="demo", exact=True).click()
    assert page.url == f"{viewer}/campaigns/demo/"
    page.locator("#leaderboard").get_by_role("link", name="mock").click()
    assert page.url == f"{viewer}/campaigns/demo/entries/mock/"
    screenshot(page, "entry")
    page.get_by_role("link", name="smoke-inventory").first.click()
    assert page.url == f"{viewer}/campaigns/demo/entries/mock/tasks/smoke-inventory"
    assert page.locator("#seeds tbody tr").count() == 3
    assert page.locator("#cell-gates thead th").all_text_contents()[1:4] == ["seed 0", "seed 1", "seed 2"]
    screenshot(page, "entry-task")
    page.get_by_role("link", name=MOCK).click()
    assert page.url == f"{viewer}/campaigns/demo/trials/{MOCK}"
    page.goto(f"{viewer}/campaigns/demo/trials/demo-mock-smoke-inventory-s7")
    assert "no trial" in page.locator("main").text_content() and "did you mean" in page.locator("main").text_content()


def test_the_report_is_sortable_offline(demo_runs: Path, page: Any, tmp_path: Path) -> None:
    """report.html is the same drill-down as a file: sortable without a server, sections per trial."""
    from anchorage.report.writing import rebuild

    run = tmp_path / "demo"
    shutil.copytree(demo_runs / "demo", run, symlinks=True)
    report = rebuild(run)["html"]
    page.goto(report.as_uri())
    assert entries(page) == ["oracle", "mock"]
    page.locator("#leaderboard thead th", has_text="O-Eval").first.click()
    assert entries(page) == ["mock", "oracle"]
    page.locator("#trials").get_by_role("link", name=MOCK).click()
    assert page.url.endswith(f"#trial-{MOCK}")
    assert page.locator(f"#trial-{MOCK} table").count() >= 2                 # metrics and gates of that trial
    screenshot(page, "report")


@pytest.fixture(scope="module")
def big_viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """800 trials written directly (tests/report/bigrun.py): more rows than a page holds."""
    from tests.report.bigrun import write_run

    root = tmp_path_factory.mktemp("big-runs")
    write_run(root, 800)
    server = BackgroundServer(make_app(LocalRuns(root), ttl=60.0), name="viewer").start()
    yield f"http://127.0.0.1:{server.port}"
    server.stop()


def test_the_trials_table_pages_sorts_and_filters_every_row(big_viewer: str, page: Any) -> None:
    """The trials travel as JSON and are drawn 100 at a time; sorting and filtering work on all of them, and the
    page, like the sort and the filter, is kept in the link."""
    page.goto(f"{big_viewer}/campaigns/big/")
    assert page.locator("[data-count-for='trials']").text_content() == "800 rows"
    assert page.locator("#trials tbody tr").count() == 100
    pager = page.locator("[data-pager-for='trials'] .pages")
    assert pager.text_content() == "rows 1–100 of 800 · page 1 of 8"
    page.locator("[data-pager-for='trials'] .next").click()
    assert pager.text_content() == "rows 101–200 of 800 · page 2 of 8" and "page.trials=2" in page.url
    page.fill("input[data-filter-for='trials']", "oracle")
    assert page.locator("[data-count-for='trials']").text_content() == "400 of 800 rows"
    assert pager.text_content() == "rows 1–100 of 400 · page 1 of 4"           # a new filter starts at page 1
    page.fill("input[data-filter-for='trials']", "mock")
    page.locator("#trials thead th", has_text="O-Eval").first.click()
    lowest = float(cells(page, "trials", 7)[0])
    page.locator("#trials thead th", has_text="O-Eval").first.click()        # descending: the other end of all 400
    highest = float(cells(page, "trials", 7)[0])
    assert lowest < 0.07 and highest > 0.58                                  # the rows' range spans 0.05–0.6
    shared = page.url
    page.locator("[data-pager-for='trials'] .next").click()
    page.goto(page.url)
    assert "page.trials=2" in page.url and pager.text_content() == "rows 101–200 of 400 · page 2 of 4"
    assert page.locator("input[data-filter-for='trials']").input_value() == "mock" and "sort.trials=7.desc" in shared
    screenshot(page, "campaign-paged")
