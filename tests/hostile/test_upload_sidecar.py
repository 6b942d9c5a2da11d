"""Hostile results against the cluster's upload sidecar (``python -m anchorage.runtime.kube.pod upload``).

The sidecar is the only container holding the store's credentials; the folders it uploads are the
agent's. A symlink to the credentials, a FIFO, a device link, a forged exit-code file: the sidecar
uploads only regular files found beneath each folder, lists what it left out, and always finishes
(a sidecar that hangs or crashes would leave the trial looking like the platform's failure).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CREDENTIAL = "AKIA-storage-credential-of-the-sidecar"


def _upload(tmp_path: Path, results: Path, logs: Path, **kw: int) -> dict[str, object]:
    """Run the real sidecar program (its own process, as in the pod) against a file:// store."""
    store = tmp_path / "store"
    store.mkdir()
    env = {**os.environ, "ANCHORAGE_STORE": store.as_uri(), "ANCHORAGE_DEST": "camp/trial"}
    argv = [sys.executable, "-m", "anchorage.runtime.kube.pod", "upload", "--wait", str(tmp_path / "run"),
            "--put", f"artifacts={results}", "--put", f"agent={logs}", "--marker", "upload.json",
            "--max-files", str(kw.get("max_files", 20_000)), "--max-bytes", str(kw.get("max_bytes", 2 * 1024**3))]
    if "quota" in kw:
        argv += ["--quota", f"artifacts={kw['quota']}"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    uploaded = {str(p.relative_to(store)) for p in store.rglob("*") if p.is_file()}
    marker = json.loads((store / "camp" / "trial" / "upload.json").read_text())
    return {"files": uploaded, "marker": marker, "store": store}


def _folders(tmp_path: Path) -> tuple[Path, Path]:
    results, logs, run = tmp_path / "results", tmp_path / "logs", tmp_path / "run"
    for folder in (results, logs, run):
        folder.mkdir()
    secret = tmp_path / "secrets" / "aws-credentials"
    secret.parent.mkdir()
    secret.write_text(CREDENTIAL)
    (results / "task_result.json").write_text('{"answer": 1}')
    (results / "creds.json").symlink_to(secret)
    (results / "dir-link").symlink_to(secret.parent)
    (results / "zero").symlink_to("/dev/zero")
    os.mkfifo(results / "pipe.json")
    os.link(results / "task_result.json", results / "again.json")
    (logs / "stdout.log").write_text("hello")
    (logs / "stderr.log").symlink_to(secret)
    (run / "exit-code").write_text("0; rm -rf /\n" * 10)
    return results, logs


def test_only_regular_files_are_uploaded(tmp_path: Path) -> None:
    results, logs = _folders(tmp_path)
    out = _upload(tmp_path, results, logs)
    assert out["files"] == {"camp/trial/artifacts/task_result.json", "camp/trial/artifacts/again.json",
                            "camp/trial/agent/stdout.log", "camp/trial/upload.json"}
    store = out["store"]
    assert isinstance(store, Path)
    for path in store.rglob("*"):
        assert not path.is_file() or CREDENTIAL not in path.read_text(errors="replace")
    marker = out["marker"]
    assert isinstance(marker, dict)
    assert marker["exit_code"] is None  # a forged, malformed exit-code file is unknown, not a crash
    assert marker["files"] == {"artifacts": 2, "agent": 1}
    assert any("pipe.json" in item for item in marker["skipped"])


def test_caps_on_entries_and_bytes(tmp_path: Path) -> None:
    results, logs = _folders(tmp_path)
    for i in range(30):
        (results / f"f{i}.txt").write_text("x" * 100)
    out = _upload(tmp_path, results, logs, max_files=10, max_bytes=500)
    marker = out["marker"]
    assert isinstance(marker, dict)
    assert marker["files"]["artifacts"] <= 5  # 500 bytes of 100-byte files (plus the tiny artifact)
    assert any("entries" in item for item in marker["skipped"])


def test_a_folder_over_its_quota_is_reported_by_the_sidecar(tmp_path: Path) -> None:
    """In the cluster the agent's folders are memory-backed emptyDirs of the quota + 1 MiB; the sidecar —
    not the agent — measures them, and the operator classifies the attempt as the model's oversized_result."""
    from anchorage.controller.evidence import attempt_end
    from anchorage.trials import classify

    results, logs = _folders(tmp_path)
    (results / "big.bin").write_bytes(b"x" * 5000)
    out = _upload(tmp_path, results, logs, quota=1000)
    marker = out["marker"]
    assert isinstance(marker, dict) and "over the 1000-byte quota" in marker["oversized"]
    outcome = classify(attempt_end("Complete", marker, 60.0))
    assert (str(outcome.phase), str(outcome.reason)) == ("Failed", "oversized_result")
    assert "1000-byte quota" in outcome.message
    within = _upload(tmp_path / "again", *_folders_again(tmp_path), quota=10**6)["marker"]
    assert isinstance(within, dict) and "oversized" not in within


def _folders_again(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "again").mkdir()
    return _folders(tmp_path / "again")
