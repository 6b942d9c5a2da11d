"""kill -9 of `anchorage run` in the middle of a 60-trial campaign, then the same command again — with the run folder
alone, and with ``--store s3://…`` on the real S3 server (``store`` parameter: the hook that runs these kill tests
with another store)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import boto3
import pytest

from anchorage.runtime.local import cgroups
from anchorage.store import open_store
from engine.conftest import campaign_yaml

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
#: ``anchorage`` of this tree (not whichever the virtualenv's console script was installed from)
ANCHORAGE = [sys.executable, "-c", "from anchorage.cli import main; main()"]
ENV = {**os.environ, "PYTHONPATH": f"{REPO / 'operator'}:{REPO / 'devcluster'}"}
ENTRIES = """\
    - name: steady
      agent: {kind: replay, artifact: "%s/tasks/{task}/tests/expected_result.json"}
    - name: slow
      agent: {kind: command, command: ["/bin/sh", "-c", "sleep 0.3; echo '{}' > /root/results/{task}_result.json"]}"""


def _finished(directory: Path) -> dict[str, str]:
    return {p.parent.name: p.read_text() for p in directory.glob("*/trial.json")}


def _command(manifest: Path, runs: Path, store: str | None = None) -> list[str]:
    return [*ANCHORAGE, "run", str(manifest), "--runs-dir", str(runs), "--no-plots",
            *(["--store", store] if store else [])]


@pytest.fixture(params=["folder", "s3"])
def store(request: pytest.FixtureRequest) -> str | None:
    """None: the run folder alone; else the ``--store`` URI (a fresh bucket on the real S3 server, its endpoint and
    credentials in the environment the engine inherits)."""
    if request.param == "folder":
        return None
    server = request.getfixturevalue("s3_server_env")
    bucket = f"resume-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=server.endpoint).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/runs"


def test_kill_minus_nine_then_resume_equals_an_uninterrupted_run(mechanism: str, tmp_path: Path,
                                                                  store: str | None) -> None:
    manifest = tmp_path / "c.yaml"
    manifest.write_text(campaign_yaml("resume", ENTRIES % REPO, seeds=30, parallelism=3))
    runs = tmp_path / "runs"
    env = {**ENV, **{k: v for k, v in os.environ.items() if k.startswith("AWS_")}}
    process = subprocess.Popen(_command(manifest, runs, store), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True, env=env)
    deadline = time.monotonic() + 60
    while len(_finished(runs / "resume")) < 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    before = _finished(runs / "resume")
    assert 30 <= len(before) < 60, "the kill must land in the middle of the campaign"

    subprocess.run(_command(manifest, runs, store), check=True, capture_output=True, timeout=180, env=env)
    after = _finished(runs / "resume")
    assert len(after) == 60
    assert all(after[name] == text for name, text in before.items())  # finished trials were not redone
    names = json.loads((runs / "resume" / "campaign.json").read_text())["trials"]
    assert sorted(names) == sorted(after) and len(set(names)) == 60
    if store is not None:  # every record in the store, once, the same as the run folder's
        remote = open_store(store)
        assert remote.completed_prefixes("resume") == [f"resume/{name}" for name in sorted(after)]
        assert {name: remote.get_bytes(f"resume/{name}/trial.json").decode() for name in after} == after

    clean = tmp_path / "clean"
    subprocess.run(_command(manifest, clean), check=True, capture_output=True, timeout=120, env=ENV)
    resumed = json.loads((runs / "resume" / "leaderboard.json").read_text())
    uninterrupted = json.loads((clean / "resume" / "leaderboard.json").read_text())
    assert resumed == uninterrupted
    assert {row["entry"]: row["seeds"] for row in resumed["rows"]} == {"steady": 30, "slow": 30}
    cgroups.sweep_stale(min_age_sec=0)  # the groups of the trials in flight at the kill (empty by now)
