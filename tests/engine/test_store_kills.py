"""A 300-trial campaign on the local engine with ``--store s3://…`` on the real S3 server, killed with SIGKILL five
times and run again to the end: 300 records in the store, each once, none changed after it was stored — with a clean
network, and with the fault proxy answering 5 % of the requests ``503 SlowDown`` or resetting the connection.

The agent is a trivial ``command`` (the cost is the engine's and the store's). The kills land when the run folder
holds 50, 100, …, 250 finished trials, so each falls among trials that are running, being scored and being uploaded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from anchorage.store import ArtifactStore, open_store
from engine.conftest import campaign_yaml
from store.faults import FaultProxy

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
ANCHORAGE = [sys.executable, "-c", "from anchorage.cli import main; main()"]
COMMAND = """{kind: command, command: ["/bin/sh", "-c", "echo '{}' > /root/results/{task}_result.json"]}"""
ENTRIES = "\n".join(f"    - name: {name}\n      agent: {COMMAND}" for name in ("a", "b", "c"))
SEEDS, KILLS, CAMPAIGN = 100, 5, "kills"
TRIALS = 3 * SEEDS  # three entries (a manifest has at most 100 seeds)


def _records(store: ArtifactStore) -> dict[str, bytes]:
    """Trial name → its record's bytes, for every record in the store."""
    return {key.split("/")[1]: store.get_bytes(key) for key in store.list(CAMPAIGN)
            if key.count("/") == 2 and key.endswith("/trial.json")}


def _finished_here(runs: Path) -> int:
    return sum(1 for _ in (runs / CAMPAIGN).glob("*/trial.json")) if (runs / CAMPAIGN).is_dir() else 0


@pytest.mark.parametrize("fault_rate", [0.0, 0.05], ids=["clean", "5pct-503-and-resets"])
def test_300_trials_after_5_kills_are_stored_once_each(mechanism: str, s3_server_env: Any, tmp_path: Path,
                                                        fault_rate: float) -> None:
    bucket = f"kills-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    uri = f"s3://{bucket}/runs"
    proxy = FaultProxy(s3_server_env.endpoint)
    if fault_rate:
        proxy.chaos(fault_rate, seed=29)
    manifest = tmp_path / "c.yaml"
    manifest.write_text(campaign_yaml(CAMPAIGN, ENTRIES, seeds=SEEDS, parallelism=4))
    runs = tmp_path / "runs"
    command = [*ANCHORAGE, "run", str(manifest), "--runs-dir", str(runs), "--no-plots", "--store", uri]
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'operator'}:{REPO / 'devcluster'}", "AWS_ENDPOINT_URL": proxy.url}
    store = open_store(uri, endpoint_url=s3_server_env.endpoint)  # the test reads past the proxy
    stored: dict[str, bytes] = {}
    try:
        for kill in range(1, KILLS + 1):
            log = tmp_path / f"run-{kill}.log"
            with log.open("wb") as output:
                process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT,
                                           start_new_session=True)
            deadline = time.monotonic() + 300
            while (_finished_here(runs) < kill * TRIALS // (KILLS + 1) and process.poll() is None
                   and time.monotonic() < deadline):
                time.sleep(0.05)
            assert process.poll() is None, f"the run ended before kill {kill}: {log.read_text()[-3000:]}"
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            now = _records(store)
            assert all(now[name] == record for name, record in stored.items()), "a stored record changed"
            assert len(now) < TRIALS, "the kill must land before the end"
            stored = now
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    finally:
        proxy.stop()
    final = _records(store)
    planned = json.loads((runs / CAMPAIGN / "campaign.json").read_text())["trials"]
    assert len(planned) == len(set(planned)) == TRIALS
    assert sorted(final) == sorted(planned)  # 300 records: none lost
    assert store.completed_prefixes(CAMPAIGN) == sorted(f"{CAMPAIGN}/{name}" for name in planned)
    assert all(final[name] == record for name, record in stored.items())  # none stored twice, none redone
    names = [json.loads(record)["name"] for record in final.values()]
    assert sorted(names) == sorted(planned)
    assert all((runs / CAMPAIGN / name / "trial.json").read_bytes() == final[name] for name in planned)
    if fault_rate:
        requests, injected = len(proxy.seen), len(proxy.injected)
        assert injected > 0.02 * requests, (injected, requests)
