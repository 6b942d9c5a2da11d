"""The exports read a campaign the same way from a runs folder and from an S3 prefix (the real S3 server):
the Harbor job and the Inspect logs written from either hold the same trials, rewards, files and messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from anchorage.interop.harbor import export_harbor
from anchorage.report.runs import LocalRuns, StoreRuns
from anchorage.store import open_store


def _store(demo_runs: Path) -> StoreRuns:
    boto3.client("s3").create_bucket(Bucket="export-runs")
    store = open_store("s3://export-runs/runs")
    for trial in sorted(p for p in (demo_runs / "demo").iterdir() if p.is_dir()):
        store.upload_dir(trial, f"demo/{trial.name}")
    store.put_bytes("demo/campaign.json", (demo_runs / "demo" / "campaign.json").read_bytes())
    return StoreRuns(store)


def _files(job: Path) -> dict[str, bytes]:
    return {str(p.relative_to(job)): p.read_bytes() for p in sorted(job.rglob("*"))
            if p.is_file() and p.name not in ("result.json", "config.json", "anchorage.json")}


def test_exports_from_an_s3_prefix_match_the_folders(demo_runs: Path, s3_server_env: Any, tmp_path: Path) -> None:
    remote = _store(demo_runs)
    local = LocalRuns(demo_runs)
    assert remote.files("demo", "demo-mock-smoke-inventory-s0") == local.files("demo", "demo-mock-smoke-inventory-s0")
    from_s3, from_folder = export_harbor(remote, "demo", tmp_path / "s3"), export_harbor(local, "demo", tmp_path / "fs")
    assert _files(from_s3) == _files(from_folder) and len(_files(from_s3)) > 20
    for trial in (p.name for p in from_folder.iterdir() if p.is_dir()):
        a, b = (json.loads((job / trial / "result.json").read_text()) for job in (from_s3, from_folder))
        assert a["verifier_result"] == b["verifier_result"] and a["agent_result"] == b["agent_result"]

    inspect_log = pytest.importorskip("inspect_ai.log", reason="the inspect extra is not installed")
    from anchorage.interop.inspect_logs import export_inspect

    logs = {}
    for name, runs in (("s3", remote), ("fs", local)):
        files = export_inspect(runs, "demo", tmp_path / f"logs-{name}", fmt="json")
        logs[name] = {log.eval.metadata["entry"]: log for log in (inspect_log.read_eval_log(str(f)) for f in files)}
    for entry in ("mock", "oracle"):
        s3_samples, fs_samples = logs["s3"][entry].samples, logs["fs"][entry].samples
        assert [s.scores for s in s3_samples] == [s.scores for s in fs_samples]
        assert [[m.text for m in s.messages] for s in s3_samples] == [[m.text for m in s.messages] for s in fs_samples]
    assert logs["s3"]["mock"].samples[0].messages   # the transcript came through the store too
