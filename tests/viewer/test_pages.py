"""The viewer's researcher pages on the demo run: the scored answer and the trial's other files open as pages
(confined: no link followed, no path out of the trial); a rescoring (runs/X/profiles/strict) is a switch on every
page, named after its campaign, never "campaign: strict"; the trial page labels the Robust BO-Eval the board used
and the trial's own, each with its F; per-seed tables."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from tests.conftest import anchorage_cli

from anchorage.report.pages import board_bo
from anchorage.report.runs import LocalRuns
from anchorage.viewer.app import make_app

MOCK = "demo-mock-smoke-inventory-s0"
ARTIFACT = "artifacts/smoke-inventory_result.json"


@pytest.fixture(scope="module")
def rescored(demo_runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the demo run, rescored under strict (runs/demo/profiles/strict)."""
    root = tmp_path_factory.mktemp("rescored") / "runs"
    shutil.copytree(demo_runs, root, symlinks=True)
    done = anchorage_cli("rescore", str(root / "demo"), "--profile", "strict", "--no-plots")
    assert done.returncode == 0, done.stderr
    return root


async def _get(runs: Path, *paths: str) -> list[tuple[int, str]]:
    async with TestClient(TestServer(make_app(LocalRuns(runs), ttl=0.0))) as client:
        out = []
        for path in paths:
            response = await client.get(path)
            out.append((response.status, await response.text()))
        return out


async def test_the_scored_answer_opens_from_the_trial_page(demo_runs: Path) -> None:
    [(status, trial), (shown, page)] = await _get(demo_runs, f"/campaigns/demo/trials/{MOCK}",
                                                   f"/campaigns/demo/trials/{MOCK}/show/{ARTIFACT}")
    assert status == 200 and shown == 200
    link = f'href="/campaigns/demo/trials/{MOCK}/show/{ARTIFACT}"'
    assert link in trial and "the scored answer" in trial
    expected = json.loads((demo_runs / "demo" / MOCK / ARTIFACT).read_text())
    assert "The answer this trial was scored on" in page
    assert f"&quot;problem_id&quot;: &quot;{expected['problem_id']}&quot;" in page      # pretty-printed, escaped
    [(prompt_status, prompt)] = await _get(demo_runs, f"/campaigns/demo/trials/{MOCK}/show/agent/prompt.txt")
    assert prompt_status == 200 and "Original Contest Problem" in prompt


async def test_file_pages_are_confined(demo_runs: Path, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    shutil.copytree(demo_runs, root, symlinks=True)
    (tmp_path / "secret.txt").write_text("HOST SECRET")
    (root / "demo" / MOCK / "artifacts" / "link.txt").symlink_to(tmp_path / "secret.txt")
    answers = await _get(root, f"/campaigns/demo/trials/{MOCK}/show/artifacts/link.txt",
                         f"/campaigns/demo/trials/{MOCK}/show/artifacts/..%2F..%2F..%2Fsecret.txt",
                         f"/campaigns/demo/trials/{MOCK}/show/artifacts/nope.json",
                         f"/campaigns/demo/trials/{MOCK}")
    assert [status for status, _ in answers[:3]] == [404, 404, 404]
    assert all("HOST SECRET" not in text for _, text in answers)
    assert "link.txt" not in answers[3][1]                          # a link is never listed


async def test_the_trial_page_labels_both_bo_evals(demo_runs: Path) -> None:
    run = LocalRuns(demo_runs).campaign("demo")
    record = run.record(MOCK)
    assert record is not None
    value, why = board_bo(record, run.board)
    assert value is not None and "campaign baseline 'mock'" in why
    [(status, page)] = await _get(demo_runs, f"/campaigns/demo/trials/{MOCK}")
    assert status == 200
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert f"Robust BO-Eval, on the board{value + 0.0:+.4f} — against the board's F = " in text
    assert "Robust BO-Eval, as scored (this trial)" in text and "against this trial's F = 0.000000" in text


async def test_per_seed_tables(demo_runs: Path) -> None:
    [(_, campaign), (_, entry)] = await _get(demo_runs, "/campaigns/demo/", "/campaigns/demo/entries/mock/")
    data = json.loads(re.search(r'id="data-per-seed">(.*?)</script>', campaign).group(1))   # type: ignore[union-attr]
    assert len(data["rows"]) == 6                                    # 2 entries × 3 seeds
    board = LocalRuns(demo_runs).campaign("demo").board
    mock = next(row for row in board.rows if row.entry == "mock")
    seeds = [row for row in data["rows"] if data["strings"][row[0]] == "mock"]
    assert [row[3] for row in seeds] == pytest.approx([s.bo_eval for s in mock.per_seed])
    assert 'id="entry-seeds"' in entry and "Per seed" in entry


async def test_a_rescored_profile_is_a_switch_and_keeps_the_campaigns_name(rescored: Path) -> None:
    pages = await _get(rescored, "/", "/campaigns/demo/", "/campaigns/demo@strict/",
                       f"/campaigns/demo@strict/trials/{MOCK}", f"/campaigns/demo@strict/trials/{MOCK}/show/{ARTIFACT}",
                       "/campaigns/demo@stirct/")
    (_, index), (_, paper), (strict_status, strict), (trial_status, trial), (show_status, _), (typo, unknown) = pages
    assert 'href="/campaigns/demo@strict/"' in index
    assert 'href="/campaigns/demo@strict/"' in paper and "rescored under strict" in paper      # the switch
    assert strict_status == 200 and "Campaign demo <span class='muted'>rescored under strict@1" in strict
    assert "<dt>campaign</dt><dd>demo</dd>" in strict and "<dd>strict</dd>" not in strict
    assert "Leaderboard — scoring profile strict@1" in strict and 'href="/campaigns/demo/"' in strict
    assert trial_status == 200 and "strict@1" in trial and "stdout.log" in trial   # logs: the run's own
    assert show_status == 200
    assert typo == 404 and "did you mean 'strict'" in html.unescape(unknown)


def test_the_rescored_report_names_its_campaign(rescored: Path) -> None:
    report = (rescored / "demo" / "profiles" / "strict" / "report.html").read_text()
    assert "<dt>campaign</dt><dd>demo</dd>" in report and "<dd>strict</dd>" not in report
    assert "<dt>rescored</dt><dd>under strict@1 from " in report
