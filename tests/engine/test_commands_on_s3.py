"""The researcher's commands on a campaign ``anchorage run --store`` published to the real S3 server: ``report`` and
``rescore`` read the store prefix and write their files back under it, ``view`` serves it — the same leaderboard
as from the run folder."""

from __future__ import annotations

import json
import os
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
from tests.viewer.view_process import anchorage_view, page_when_up
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.store import open_store
from engine.conftest import campaign_yaml

pytestmark = [pytest.mark.sandbox]

REPO = Path(__file__).resolve().parents[2]
ENTRIES = """\
    - name: replayed
      agent: {kind: replay, artifact: "%s/tasks/{task}/tests/expected_result.json"}
    - name: empty
      agent: {kind: command, command: ["/bin/sh", "-c", "echo '{}' > /root/results/{task}_result.json"]}"""


def _cli(*args: str) -> Any:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_report_rescore_and_view_on_a_store_prefix(mechanism: str, s3_server_env: Any, tmp_path: Path) -> None:
    bucket = f"commands-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    manifest = tmp_path / "c.yaml"
    manifest.write_text(campaign_yaml("cmds", ENTRIES % REPO, seeds=2))
    run = _cli("run", str(manifest), "--runs-dir", str(tmp_path / "runs"), "--no-plots", "--store", f"s3://{bucket}/r")
    store = open_store(f"s3://{bucket}/r")
    records = {key: store.get_bytes(key) for key in store.list("cmds") if key.endswith("/trial.json")}
    assert len(records) == 4
    store.delete("cmds/leaderboard.json")

    reported = _cli("report", f"s3://{bucket}/r/cmds")
    assert reported["outputs"]["json"] == f"s3://{bucket}/r/cmds/leaderboard.json"
    assert json.loads(store.get_bytes("cmds/leaderboard.json"))["rows"] == reported["leaderboard"]["rows"]
    local = json.loads((tmp_path / "runs" / "cmds" / "leaderboard.json").read_text())
    assert reported["leaderboard"]["rows"] == local["rows"]
    assert b"Leaderboard" in store.get_bytes("cmds/report.html")
    assert [row["entry"] for row in run["results"][0]["leaderboard"]] == [row["entry"] for row in local["rows"]]

    rescored = _cli("rescore", f"s3://{bucket}/r/cmds", "--profile", "strict", "--no-plots")
    assert rescored["run"] == f"s3://{bucket}/r/cmds/profiles/strict" and rescored["profile"].startswith("strict")
    assert json.loads(store.get_bytes("cmds/profiles/strict/campaign.json"))["rescored_from"] == f"s3://{bucket}/r/cmds"
    by_folder = _cli("rescore", str(tmp_path / "runs" / "cmds"), "--profile", "strict", "--no-plots")
    assert rescored["leaderboard"]["rows"] == by_folder["leaderboard"]["rows"]
    assert {key: store.get_bytes(key) for key in store.list("cmds") if key.endswith("/trial.json")
            and "/profiles/" not in key} == records  # the run's records, untouched by the commands

    env = {**os.environ, "PYTHONPATH": f"{REPO / 'operator'}:{REPO / 'devcluster'}"}
    with anchorage_view(f"s3://{bucket}/r", env) as (url, _):
        page = page_when_up(url + "campaigns/cmds/")
        assert "Leaderboard" in page and "replayed" in page and f"s3://{bucket}/r" in urllib.request.urlopen(
            url, timeout=10).read().decode()
