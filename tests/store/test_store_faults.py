"""S3 store under injected faults (the fault proxy in front of the real server, and of moto): 5xx, throttling,
resets mid-upload, corrupted downloads."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from faults import Fault, FaultProxy
from servers import Backend

from anchorage.errors import InfrastructureError
from anchorage.store import ArtifactStore

MB = 1024 * 1024


def big_file(path: Path, size: int) -> Path:
    path.write_bytes(os.urandom(size))
    return path


def test_throttling_and_5xx_are_retried(s3_store: Callable[..., ArtifactStore], fault_proxy: FaultProxy) -> None:
    store = s3_store()
    fault_proxy.add(Fault("status", method="PUT", status=503, code="SlowDown", times=2))
    fault_proxy.add(Fault("status", method="GET", status=500, code="InternalError", times=1))
    store.put_bytes("c/t/trial.json", b"payload")
    assert store.get_bytes("c/t/trial.json") == b"payload"
    assert len(fault_proxy.injected) == 3


def test_reset_in_the_middle_of_a_multipart_upload(s3_store: Callable[..., ArtifactStore],
                                                   fault_proxy: FaultProxy, tmp_path: Path) -> None:
    store = s3_store(multipart_threshold=5 * MB, multipart_chunksize=5 * MB)
    source = big_file(tmp_path / "big.bin", 11 * MB)  # three parts
    fault_proxy.add(Fault("reset", method="PUT", query_has="partNumber=2", after_bytes=MB))
    store.put_file("c/t/artifacts/big.bin", source)
    assert fault_proxy.injected and "partNumber=2" in fault_proxy.injected[0]
    back = tmp_path / "back.bin"
    store.get_file("c/t/artifacts/big.bin", back)
    assert back.read_bytes() == source.read_bytes()


def test_failed_upload_never_marks_the_prefix_complete(s3_store: Callable[..., ArtifactStore],
                                                       fault_proxy: FaultProxy, tmp_path: Path) -> None:
    store = s3_store(attempts=2, botocore_attempts=2, multipart_threshold=5 * MB, multipart_chunksize=5 * MB)
    folder = tmp_path / "trial"
    (folder / "artifacts").mkdir(parents=True)
    (folder / "trial.json").write_text("{}")
    store.upload_dir(folder, "c/done")  # an earlier trial, complete
    store.upload_dir(folder, "c/t")  # a first attempt of this trial, complete
    big_file(folder / "artifacts" / "big.bin", 6 * MB)  # the retried trial has a big artifact
    fault_proxy.add(Fault("reset", method="PUT", query_has="partNumber", after_bytes=64 * 1024, times=1000))
    with pytest.raises(InfrastructureError, match="failed after 2 attempts"):
        store.upload_dir(folder, "c/t")
    assert not store.is_complete("c/t")  # the old marker went before the new upload started
    assert store.completed_prefixes("c") == ["c/done"]
    assert "c/t/artifacts/big.bin" not in store.list("c")
    fault_proxy.clear()
    store.upload_dir(folder, "c/t")  # the retried trial completes
    assert store.completed_prefixes("c") == ["c/done", "c/t"]
    assert store.describe("c/t/artifacts/big.bin")["size"] == 6 * MB


def test_corrupted_download_is_detected_and_retried(s3_store: Callable[..., ArtifactStore],
                                                    fault_proxy: FaultProxy) -> None:
    store = s3_store()
    store.put_bytes("c/t/result.json", b'{"value": 42}')
    fault_proxy.add(Fault("corrupt", method="GET", times=1))
    assert store.get_bytes("c/t/result.json") == b'{"value": 42}'
    fault_proxy.add(Fault("corrupt", method="GET", times=100))
    with pytest.raises(InfrastructureError, match="does not match the stored"):
        store.get_bytes("c/t/result.json")


def test_object_changed_behind_our_back_fails_its_checksum(s3_store: Callable[..., ArtifactStore],
                                                           bucket: str, s3_backend: Backend) -> None:
    store = s3_store(attempts=2)
    store.put_bytes("c/t/result.json", b"original")
    client = s3_backend.client()
    sha = client.head_object(Bucket=bucket, Key="runs/c/t/result.json")["Metadata"]["sha256"]
    client.put_object(Bucket=bucket, Key="runs/c/t/result.json", Body=b"tampered", Metadata={"sha256": sha})
    with pytest.raises(InfrastructureError, match="sha256"):
        store.get_bytes("c/t/result.json")
