"""The viewer's sources: a runs folder and an S3 prefix (the real S3 server) show the same pages; reads are
confined and bounded; ``anchorage view`` serves, and refuses what it cannot read with exit code 2."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import boto3
import pytest
from aiohttp.test_utils import TestClient, TestServer
from tests.conftest import anchorage_cli

from anchorage.report.runs import LocalRuns, StoreRuns
from anchorage.store import open_store
from anchorage.viewer.app import make_app

from .view_process import anchorage_view, page_when_up

MOCK = "demo-mock-smoke-inventory-s0"
PAGES = ["/", "/campaigns/demo/", "/campaigns/demo/entries/mock/", "/campaigns/demo/entries/mock/tasks/smoke-inventory",
         f"/campaigns/demo/trials/{MOCK}", f"/campaigns/demo/trials/{MOCK}/transcript"]


async def _pages(runs: LocalRuns | StoreRuns) -> dict[str, str]:
    async with TestClient(TestServer(make_app(runs, ttl=0.0))) as client:
        out = {}
        for path in PAGES:
            response = await client.get(path)
            assert response.status == 200, path
            assert "script-src 'unsafe-inline'" in response.headers["Content-Security-Policy"]
            out[path] = await response.text()
        return out


def _comparable(html: str) -> str:
    """A page without what names its source (the location, the moment)."""
    return re.sub(r"<dt>from</dt><dd>[^<]*</dd>|Campaigns in [^<]*", "", html)


async def test_an_s3_prefix_shows_the_same_pages_as_the_folder(demo_runs: Path, s3_server_env: Any) -> None:
    boto3.client("s3").create_bucket(Bucket="viewer-runs")
    store = open_store("s3://viewer-runs/runs")
    for trial in sorted(p for p in (demo_runs / "demo").iterdir() if p.is_dir()):
        store.upload_dir(trial, f"demo/{trial.name}")
    store.put_bytes("demo/campaign.json", (demo_runs / "demo" / "campaign.json").read_bytes())
    local, remote = await _pages(LocalRuns(demo_runs)), await _pages(StoreRuns(store))
    for path in PAGES:
        assert _comparable(remote[path]) == _comparable(local[path]), path
    assert "s3://viewer-runs/runs" in remote["/"]
    assert "binding_bit_finite_domain" in remote[f"/campaigns/demo/trials/{MOCK}"]


async def test_an_operator_prefix_without_campaign_json_is_found_by_its_records(demo_runs: Path,
                                                                                 s3_server_env: Any) -> None:
    """The operator stores trial folders and leaderboard.json (no campaign.json): campaigns are found by their
    trial records and the baseline is the leaderboard's."""
    boto3.client("s3").create_bucket(Bucket="operator-runs")
    store = open_store("s3://operator-runs")
    for trial in sorted(p for p in (demo_runs / "demo").iterdir() if p.is_dir()):
        store.put_bytes(f"demo/{trial.name}/trial.json", (trial / "trial.json").read_bytes())
    store.put_bytes("demo/leaderboard.json", json.dumps({"baseline": "mock", "rows": []}).encode())
    store.put_bytes("_trials/default/lone/trial.json", b"{}")
    runs = StoreRuns(store)
    assert runs.campaigns() == ["demo"]
    run = runs.campaign("demo")
    assert run.baseline == "mock" and len(run.records) == 6 and not run.problems


def test_logs_are_tails_and_links_are_not_followed(demo_runs: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "runs"
    shutil.copytree(demo_runs, root, symlinks=True)
    trial = root / "demo" / MOCK
    (trial / "agent" / "stdout.log").write_text("A" * 200_000 + "THE END\n")
    (tmp_path / "host-secret").write_text("HOST SECRET")
    (trial / "agent" / "stderr.log").unlink()
    (trial / "agent" / "stderr.log").symlink_to(tmp_path / "host-secret")
    runs = LocalRuns(root)
    text, size = runs.tail("demo", MOCK, "agent/stdout.log", window=1000)
    assert size == 200_008 and text.endswith("THE END\n") and len(text) == 1000
    assert runs.tail("demo", MOCK, "agent/stderr.log")[0] == ""       # a link: nothing read through it
    with pytest.raises(Exception, match="invalid name"):
        runs.read("demo", "../demo", "trial.json", limit=100)


def test_unknown_campaigns_and_trials_say_what_exists(demo_runs: Path) -> None:
    from anchorage.errors import InputError

    with pytest.raises(InputError) as caught:
        LocalRuns(demo_runs).campaign("dmeo")
    assert "did you mean 'demo'" in str(caught.value)


def test_anchorage_view_serves_and_bad_input_exits_2(demo_runs: Path) -> None:
    with anchorage_view(str(demo_runs / "demo")) as (url, line):
        assert "1 campaign(s)" in line, line
        page = page_when_up(url + "campaigns/demo/")
        assert "Leaderboard" in page and "oracle" in page
    missing = anchorage_cli("view", str(demo_runs / "nope"))
    assert missing.returncode == 2 and "is not a folder" in missing.stderr
