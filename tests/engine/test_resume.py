"""kill -9 of `anchorage run` in the middle of a 60-trial campaign, then the same command again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from anchorage.runtime.local import cgroups
from engine.conftest import campaign_yaml

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

ANCHORAGE = str(Path(sys.prefix) / "bin" / "anchorage")
ENTRIES = """\
    - name: steady
      agent: {kind: replay, artifact: "%s/tasks/{task}/tests/expected_result.json"}
    - name: slow
      agent: {kind: command, command: ["/bin/sh", "-c", "sleep 0.3; echo '{}' > /root/results/{task}_result.json"]}"""


def _finished(directory: Path) -> dict[str, str]:
    return {p.parent.name: p.read_text() for p in directory.glob("*/trial.json")}


def _command(manifest: Path, runs: Path) -> list[str]:
    return [ANCHORAGE, "run", str(manifest), "--runs-dir", str(runs), "--no-plots"]


def test_kill_minus_nine_then_resume_equals_an_uninterrupted_run(mechanism: str, tmp_path: Path) -> None:
    manifest = tmp_path / "c.yaml"
    manifest.write_text(campaign_yaml("resume", ENTRIES % Path.cwd(), seeds=30, parallelism=3))
    runs = tmp_path / "runs"
    process = subprocess.Popen(_command(manifest, runs), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    deadline = time.monotonic() + 60
    while len(_finished(runs / "resume")) < 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    before = _finished(runs / "resume")
    assert 30 <= len(before) < 60, "the kill must land in the middle of the campaign"

    subprocess.run(_command(manifest, runs), check=True, capture_output=True, timeout=120)
    after = _finished(runs / "resume")
    assert len(after) == 60
    assert all(after[name] == text for name, text in before.items())  # finished trials were not redone
    names = json.loads((runs / "resume" / "campaign.json").read_text())["trials"]
    assert sorted(names) == sorted(after) and len(set(names)) == 60

    clean = tmp_path / "clean"
    subprocess.run(_command(manifest, clean), check=True, capture_output=True, timeout=120)
    resumed = json.loads((runs / "resume" / "leaderboard.json").read_text())
    uninterrupted = json.loads((clean / "resume" / "leaderboard.json").read_text())
    assert resumed == uninterrupted
    assert {row["entry"]: row["seeds"] for row in resumed["rows"]} == {"steady": 30, "slow": 30}
    cgroups.sweep_stale(min_age_sec=0)  # the groups of the trials in flight at the kill (empty by now)
