"""The artifact store contract, the same for file:// and s3:// (the real S3 server, and moto, on loopback)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from servers import Backend

from anchorage.errors import InputError
from anchorage.store import COMPLETE_MARKER, ArtifactStore, FileStore, open_store


def test_bytes_and_files_round_trip(any_store: ArtifactStore, tmp_path: Path) -> None:
    any_store.put_bytes("camp/t1/trial.json", b'{"phase": "Succeeded"}', content_type="application/json")
    assert any_store.get_bytes("camp/t1/trial.json") == b'{"phase": "Succeeded"}'
    source = tmp_path / "result.json"
    source.write_bytes(os.urandom(70_000))
    any_store.put_file("camp/t1/artifacts/result.json", source)
    target = tmp_path / "back" / "result.json"
    any_store.get_file("camp/t1/artifacts/result.json", target)
    assert target.read_bytes() == source.read_bytes()
    assert any_store.exists("camp/t1/trial.json") and not any_store.exists("camp/t1/nope.json")
    assert any_store.list("camp") == ["camp/t1/artifacts/result.json", "camp/t1/trial.json"]
    assert any_store.list("camp/t1/artifacts") == ["camp/t1/artifacts/result.json"]
    assert any_store.list("other") == []
    described = any_store.describe("camp/t1/artifacts/result.json")
    assert described["size"] == 70_000 and len(described["sha256"]) == 64
    with pytest.raises(FileNotFoundError):
        any_store.get_bytes("camp/t1/nope.json")


def test_upload_dir_marks_complete_last_and_lists_for_resume(any_store: ArtifactStore, tmp_path: Path) -> None:
    for trial in ("t1", "t2"):
        folder = tmp_path / trial
        (folder / "artifacts").mkdir(parents=True)
        (folder / "trial.json").write_text(json.dumps({"trial": trial}))
        (folder / "artifacts" / "result.json").write_text("{}")
    assert not any_store.is_complete("camp/t1")
    keys = any_store.upload_dir(tmp_path / "t1", "camp/t1")
    assert keys == ["camp/t1/artifacts/result.json", "camp/t1/trial.json"]
    assert any_store.is_complete("camp/t1")
    any_store.put_bytes("camp/t2/trial.json", b"{}")  # partially uploaded, never marked
    assert any_store.completed_prefixes("camp") == ["camp/t1"]
    manifest = json.loads(any_store.get_bytes(f"camp/t1/{COMPLETE_MARKER}"))
    assert set(manifest["objects"]) == set(keys)
    assert manifest["objects"]["camp/t1/artifacts/result.json"]["size"] == 2
    any_store.clear_complete("camp/t1")
    assert not any_store.is_complete("camp/t1")


@pytest.mark.parametrize("key", ["", "/", "a/../b", "a//b", "./a"])
def test_bad_keys_are_refused(any_store: ArtifactStore, key: str) -> None:
    with pytest.raises(InputError, match="invalid store key"):
        any_store.put_bytes(key, b"x")


def test_open_store_uris(tmp_path: Path) -> None:
    assert isinstance(open_store(str(tmp_path)), FileStore)
    store = open_store(tmp_path.as_uri())
    assert isinstance(store, FileStore) and store.root == tmp_path
    for bad in ("ftp://host/x", "s3:///no-bucket", "file://remote-host/x"):
        with pytest.raises(InputError):
            open_store(bad)


def test_s3_uri_and_endpoint_from_environment(bucket: str, s3_backend: Backend,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_backend.endpoint)
    store = open_store(f"s3://{bucket}/deep/prefix")
    assert store.uri == f"s3://{bucket}/deep/prefix"
    store.put_bytes("x/y.txt", b"hello")
    assert store.list() == ["x/y.txt"]
    assert store.uri_of("x/y.txt") == f"s3://{bucket}/deep/prefix/x/y.txt"
    assert open_store(f"s3://{bucket}/deep").list() == ["prefix/x/y.txt"]


def test_the_file_stores_walk_and_manifest_are_what_they_were(tmp_path: Path) -> None:
    """The file store's own walk (``os.scandir``) lists what ``Path.rglob`` did — files and symlinks to files, not
    writes under way nor folders reached through a symlink — and its manifest holds each file's size and sha256."""
    store = FileStore(tmp_path / "root")
    store.put_bytes("camp/t1/trial.json", b"{}")
    store.put_bytes("camp/t1/agent/prompt.txt", b"do it")
    (tmp_path / "root/camp/t1/agent/.tmp-abc").write_bytes(b"half")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere/x.txt").write_bytes(b"x")
    (tmp_path / "root/camp/t1/linked").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "root/camp/t1/result.json").symlink_to(tmp_path / "elsewhere/x.txt")
    expected = ["camp/t1/agent/prompt.txt", "camp/t1/result.json", "camp/t1/trial.json"]
    assert store.list("camp") == expected
    assert store.list("camp/t1/trial.json") == [] and store.list("nowhere") == []
    store.mark_complete("camp/t1")
    manifest = json.loads(store.get_bytes(f"camp/t1/{COMPLETE_MARKER}"))
    assert manifest["objects"] == {key: store.describe(key) for key in expected}
    store.mark_complete("camp/t1")  # again: the marker is not in its own manifest
    assert set(json.loads(store.get_bytes(f"camp/t1/{COMPLETE_MARKER}"))["objects"]) == set(expected)
