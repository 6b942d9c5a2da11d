"""The operator's pod programs against the real S3 server, through the fault proxy: the upload sidecar (retries on
``503 SlowDown`` and a reset in the middle of a multipart upload, its ``upload.json`` written last), the completion
manifest the operator writes after it, and a ScoringRun's external artifacts fetched from the store and scored.

The programs run as their own processes with the store's URI and credentials in their environment, as in a pod
(the cluster itself is not needed for what they do with the store)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from faults import Fault, FaultProxy
from servers import Backend, new_bucket

from anchorage.store import COMPLETE_MARKER, open_store

REPO = Path(__file__).resolve().parents[2]
MB = 1024 * 1024


@pytest.fixture
def proxy(real_s3: Backend) -> FaultProxy:
    server = FaultProxy(real_s3.endpoint)
    yield server  # type: ignore[misc]
    server.stop()


def _pod(*argv: str, store: str, proxy: FaultProxy, dest: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'operator'}:{REPO / 'devcluster'}", "ANCHORAGE_STORE": store,
           "ANCHORAGE_DEST": dest, "AWS_ENDPOINT_URL": proxy.url}
    return subprocess.run([sys.executable, "-m", "anchorage.runtime.kube.pod", *argv], env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_the_upload_sidecar_retries_and_writes_its_marker_last(real_s3: Backend, proxy: FaultProxy,
                                                               tmp_path: Path) -> None:
    bucket = new_bucket(real_s3)
    results, logs, run = tmp_path / "results", tmp_path / "logs", tmp_path / "run"
    for folder in (results, logs, run):
        folder.mkdir()
    (results / "smoke-inventory_result.json").write_text('{"answer": 1}')
    (results / "big.bin").write_bytes(os.urandom(9 * MB))  # over the 8 MiB part size: two parts
    (logs / "stdout.log").write_text("hello\n")
    (run / "exit-code").write_text("0\n")
    proxy.add(Fault("status", method="PUT", status=503, code="SlowDown", times=2))
    proxy.add(Fault("reset", method="PUT", query_has="partNumber=2", after_bytes=MB))
    done = _pod("upload", "--wait", str(run), "--put", f"artifacts={results}", "--put", f"agent={logs}",
                store=f"s3://{bucket}/runs", proxy=proxy, dest="camp/trial")
    assert done.returncode == 0, done.stderr
    assert len(proxy.injected) == 3 and any("partNumber=2" in line for line in proxy.injected)
    writes = [line for line in proxy.seen if line.startswith(("PUT", "POST"))]
    assert "upload.json" in writes[-1]  # the marker is the last object written
    store = open_store(f"s3://{bucket}/runs", endpoint_url=real_s3.endpoint)
    marker = json.loads(store.get_bytes("camp/trial/upload.json"))
    assert marker == {"exit_code": 0, "files": {"artifacts": 2, "agent": 1}}

    proxy.chaos(0.2, seed=7)  # the operator's completion manifest, through a flaky network
    through = open_store(f"s3://{bucket}/runs", endpoint_url=proxy.url, backoff_seconds=0.01)
    through.mark_complete("camp/trial")
    manifest = json.loads(store.get_bytes(f"camp/trial/{COMPLETE_MARKER}"))["objects"]
    expected = {f"camp/trial/artifacts/{p.name}": p for p in results.iterdir()} | {
        "camp/trial/agent/stdout.log": logs / "stdout.log"}
    assert set(manifest) == set(expected) | {"camp/trial/upload.json"}
    for key, path in expected.items():
        assert manifest[key] == {"size": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    assert proxy.injected[3:], "the chaos injected faults"


def test_a_scoring_runs_external_artifacts_come_from_the_store(real_s3: Backend, proxy: FaultProxy,
                                                               tmp_path: Path) -> None:
    """``fetch-artifacts`` copies each external URI (a key prefix, or one object) out of the store, 503s retried; a
    missing one is left for the scorer to grade as missing; ``score`` scores them."""
    bucket = new_bucket(real_s3)
    store = open_store(f"s3://{bucket}/runs", endpoint_url=real_s3.endpoint)
    expected = REPO / "tasks" / "smoke-inventory" / "tests" / "expected_result.json"
    store.put_bytes("third-party/astra/smoke-inventory_result.json", expected.read_bytes())
    proxy.add(Fault("status", method="GET", status=503, code="SlowDown", times=2))
    fetched = _pod("fetch-artifacts", "--dest", str(tmp_path / "in"), "--artifact", "0=third-party/astra",
                   "--artifact", "1=third-party/missing/smoke-inventory_result.json", store=f"s3://{bucket}/runs",
                   proxy=proxy)
    assert fetched.returncode == 0, fetched.stderr
    assert (tmp_path / "in" / "0" / "smoke-inventory_result.json").read_bytes() == expected.read_bytes()
    assert not any((tmp_path / "in" / "1").iterdir()) and len(proxy.injected) == 2
    scored = _pod("score", "--task", "smoke-inventory", "--src", str(tmp_path / "in"), "--out", str(tmp_path / "out"),
                  "--item", "0=astra", "--item", "1=ghost", store=f"s3://{bucket}/runs", proxy=proxy)
    assert scored.returncode == 0, scored.stderr
    astra = json.loads((tmp_path / "out" / "astra" / "score.json").read_text())
    ghost = json.loads((tmp_path / "out" / "ghost" / "score.json").read_text())
    assert astra["o_eval"] == 1.0 and astra["gradable"] is True
    assert ghost["gradable"] is False and ghost["bo_eval"] == -1
