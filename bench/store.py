"""Benchmark of the artifact stores: a finished trial's publication to the real S3 server and to the file store,
measured side by side.

Run: ``.venv/bin/python bench/store.py [--trials 100] [--rounds 4] [--big-mb 64]`` (needs the S3 server ``make s3``
builds; it starts one on loopback with a folder of its own). Prints, per store:

1. **trials' artifacts per second**: synthetic finished trials (the run-folder layout: ``trial.json``, ``score.json``,
   ``verifier/reward.json``, ``agent/{prompt.txt,stdout.log,stderr.log}``, ``artifacts/<task>_result.json``; 9 files,
   ~60 KB) published the way ``anchorage run --store`` publishes them
   (:meth:`anchorage.runtime.local.publishing.Publisher.publish`: the files, the record create-once, the
   ``_COMPLETE`` manifest), with the bytes per second that makes and the client's CPU per trial;
2. **bytes per second** of one ``--big-mb`` artifact (``put_file``: multipart in 8 MiB parts on S3, each part's
   SHA-256 sent; verified after) and of reading it back (``get_file``, its SHA-256 checked).

``--rounds`` alternates the stores (file, S3, S3, file, ...) so both see the same load; the figures are medians over
the rounds. The S3 server and this client share the machine's two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "devcluster")]

import boto3  # noqa: E402

from anchorage.runtime.local.publishing import Publisher  # noqa: E402
from anchorage.store import ArtifactStore, open_store  # noqa: E402
from anchorage_devcluster import s3server  # noqa: E402

FILES = {"trial.json": 3_000, "score.json": 6_000, "verifier/reward.json": 200, "agent/prompt.txt": 2_500,
         "agent/stdout.log": 30_000, "agent/stderr.log": 1_500, "artifacts/smoke-inventory_result.json": 12_000,
         "artifacts/notes.md": 4_000}


def make_trials(root: Path, count: int) -> list[Path]:
    """``count`` finished trial folders of random content (sizes above), ``transcript.jsonl`` included."""
    folders = []
    for i in range(count):
        folder = root / f"bench-quick-smoke-inventory-s{i}"
        for name, size in {**FILES, "transcript.jsonl": 3_000}.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if name == "trial.json":
                path.write_text(json.dumps({"name": folder.name, "phase": "Succeeded", "pad": "x" * size}))
            else:
                path.write_bytes(os.urandom(size))
        folders.append(folder)
    return folders


def publish_all(store: ArtifactStore, campaign: str, folders: list[Path]) -> dict[str, float]:
    publisher = Publisher(store, campaign)
    size = sum(p.stat().st_size for folder in folders for p in folder.rglob("*") if p.is_file())
    wall, cpu = time.perf_counter(), time.process_time()
    for folder in folders:
        publisher.publish(folder.name, folder)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(store.completed_prefixes(campaign)) == len(folders)
    return {"trials_per_s": len(folders) / wall, "mb_per_s": size / wall / 1e6,
            "client_cpu_ms_per_trial": cpu / len(folders) * 1000}


def big_file(store: ArtifactStore, source: Path, scratch: Path) -> dict[str, float]:
    size = source.stat().st_size
    started = time.perf_counter()
    store.put_file("big/artifact.bin", source)
    up = time.perf_counter() - started
    started = time.perf_counter()
    store.get_file("big/artifact.bin", scratch / "back.bin")
    down = time.perf_counter() - started
    (scratch / "back.bin").unlink()
    store.delete("big/artifact.bin")
    return {"put_mb_per_s": size / up / 1e6, "get_mb_per_s": size / down / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--big-mb", type=int, default=64)
    args = parser.parse_args()
    found = s3server.find()
    if isinstance(found, str):
        sys.exit(found)
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        root = Path(tmp)
        server = s3server.start(root / "server")
        try:
            os.environ.update({**server.env(), "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"})
            boto3.client("s3").create_bucket(Bucket="bench")
            folders = make_trials(root / "trials", args.trials)
            big = root / "big.bin"
            big.write_bytes(os.urandom(args.big_mb * 1024 * 1024))
            results: dict[str, list[dict[str, float]]] = {"file": [], "s3": []}
            order = ["file", "s3"]
            for round_ in range(args.rounds):
                for kind in order if round_ % 2 == 0 else order[::-1]:
                    campaign = f"c{uuid.uuid4().hex[:8]}"
                    store = (open_store((root / "filestore").as_uri()) if kind == "file"
                             else open_store("s3://bench/runs"))
                    figures = publish_all(store, campaign, folders)
                    figures |= big_file(store, big, root)
                    results[kind].append(figures)
                    print(f"round {round_ + 1} {kind}: " + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()),
                          flush=True)
        finally:
            server.stop()
    print(f"\n{args.trials} trials x {args.rounds} rounds, {len(FILES) + 1} files per trial, big artifact "
          f"{args.big_mb} MiB; server {server.version}; load {os.getloadavg()[0]:.1f}")
    medians: dict[str, dict[str, Any]] = {}
    for kind, runs in results.items():
        medians[kind] = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        print(f"{kind:>4}: " + ", ".join(f"{k} {v:.1f}" for k, v in medians[kind].items()))
    print("s3/file: " + ", ".join(f"{k} {medians['s3'][k] / medians['file'][k]:.2f}" for k in medians["file"]))


if __name__ == "__main__":
    main()
