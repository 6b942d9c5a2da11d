"""anchorage.confined: reads beneath a folder never follow links, never leave it, never exceed a cap."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from anchorage import confined


@pytest.fixture(params=["openat2", "fallback"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with the kernel's openat2 and with the component-by-component fallback."""
    if request.param == "fallback":
        monkeypatch.setattr(confined, "_openat2_usable", False)
    return str(request.param)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    (root / "sub").mkdir(parents=True)
    (root / "a.json").write_text('{"a": 1}')
    (root / "sub" / "b.txt").write_text("bee")
    (tmp_path / "secret").write_text("host secret")
    return root


def test_plain_files_are_read(folder: Path, resolver: str) -> None:
    assert confined.read_bytes(folder, "a.json", limit=100) == b'{"a": 1}'
    assert confined.read_bytes(folder, "sub/b.txt", limit=100) == b"bee"
    assert confined.read_path(folder / "a.json", limit=100) == b'{"a": 1}'


@pytest.mark.parametrize("target", ["../secret", "SECRET_ABS", "sub", "/dev/zero"])
def test_a_symlink_is_never_followed(folder: Path, resolver: str, target: str) -> None:
    link_target = str(folder.parent / "secret") if target == "SECRET_ABS" else target
    (folder / "link.json").symlink_to(link_target)
    with pytest.raises(confined.ConfinedError) as caught:
        confined.read_bytes(folder, "link.json", limit=100)
    assert caught.value.reason == "symlink"
    assert confined.tail(folder, "link.json") == ""


def test_a_symlinked_directory_on_the_way_is_refused(folder: Path, resolver: str) -> None:
    (folder / "via").symlink_to(folder.parent)
    with pytest.raises(confined.ConfinedError) as caught:
        confined.read_bytes(folder, "via/secret", limit=100)
    assert caught.value.reason in ("symlink", "not_regular")


@pytest.mark.parametrize("relative", ["../secret", "/etc/passwd", "sub/../../secret", ""])
def test_paths_leaving_the_folder_are_refused(folder: Path, resolver: str, relative: str) -> None:
    with pytest.raises(confined.ConfinedError) as caught:
        confined.read_bytes(folder, relative, limit=100)
    assert caught.value.reason == "escapes"


def test_a_fifo_is_refused_without_blocking(folder: Path, resolver: str) -> None:
    os.mkfifo(folder / "pipe.json")
    done = threading.Event()

    def read() -> None:
        with pytest.raises(confined.ConfinedError) as caught:
            confined.read_bytes(folder, "pipe.json", limit=100)
        assert caught.value.reason == "not_regular" and "FIFO" in caught.value.message
        done.set()

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(10)
    assert done.is_set(), "reading a FIFO blocked"


def test_directories_and_missing_files(folder: Path, resolver: str) -> None:
    with pytest.raises(confined.ConfinedError) as caught:
        confined.read_bytes(folder, "sub", limit=100)
    assert caught.value.reason == "not_regular"
    with pytest.raises(confined.ConfinedError) as caught:
        confined.read_bytes(folder, "nope.json", limit=100)
    assert caught.value.reason == "missing"


def test_size_is_checked_before_reading(folder: Path, resolver: str) -> None:
    big = folder / "big.bin"
    with big.open("wb") as handle:
        handle.truncate(10**12)  # sparse: a terabyte of apparent size
    with pytest.raises(confined.ConfinedError) as caught:
        confined.read_bytes(folder, "big.bin", limit=1024)
    assert caught.value.reason == "too_large" and str(10**12) in caught.value.message


def test_tail_reads_only_the_window(folder: Path, resolver: str) -> None:
    big = folder / "stderr.log"
    with big.open("wb") as handle:
        handle.truncate(10**12)
        handle.seek(10**12)
        handle.write(b"the end\n")
    assert confined.tail(folder, "stderr.log", window=8) == "the end\n"


def test_walk_reports_links_and_is_bounded(tmp_path: Path) -> None:
    root = tmp_path / "r"
    deep = root
    for i in range(80):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    (root / "f").write_text("x")
    (root / "l").symlink_to("/etc")
    limits = confined.WalkLimits(max_entries=1000, max_depth=10)
    entries = {e.relative: e for e in confined.walk(root, limits)}
    assert stat.S_ISLNK(entries["l"].info.st_mode)
    assert not any(name.startswith("l/") for name in entries)  # the link was not entered
    assert limits.too_deep and max(name.count("/") for name in entries) <= 11
    capped = confined.WalkLimits(max_entries=5)
    assert len(list(confined.walk(root, capped))) == 5 and capped.truncated


def test_usage_counts_hard_links_once(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / "a").write_bytes(b"x" * 1000)
    os.link(root / "a", root / "b")
    (root / "s").symlink_to("a")
    usage = confined.usage(root)
    assert (usage.bytes, usage.files, usage.links) == (1000, 2, 1)


def test_copy_tree_keeps_only_plain_files_and_folders(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "sub").mkdir(parents=True)
    dst.mkdir()
    (src / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(src / "run.sh", 0o4755)  # set-uid: must not survive
    (src / "sub" / "x.json").write_text("{}")
    os.link(src / "sub" / "x.json", src / "y.json")
    (src / "link").symlink_to("/etc/passwd")
    os.mkfifo(src / "fifo")
    (dst / "run.sh").write_text("engine's own")  # an existing destination file wins
    fd = os.open(dst, os.O_RDONLY | os.O_DIRECTORY)
    try:
        report = confined.copy_tree(src, fd, max_bytes=10**6)
    finally:
        os.close(fd)
    assert (dst / "run.sh").read_text() == "engine's own"
    assert (dst / "sub" / "x.json").read_text() == "{}" and (dst / "y.json").read_text() == "{}"
    assert os.stat(dst / "sub" / "x.json").st_ino == os.stat(dst / "y.json").st_ino  # linked, copied once
    assert not (dst / "link").exists() and not (dst / "link").is_symlink() and not (dst / "fifo").exists()
    assert any("link" in s for s in report.skipped) and any("FIFO" in s for s in report.skipped)


def _copy(src: Path, dst: Path, **kwargs: object) -> confined.CopyReport:
    dst.mkdir()
    fd = os.open(dst, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return confined.copy_tree(src, fd, **kwargs)  # type: ignore[arg-type]
    finally:
        os.close(fd)


def test_copy_tree_strips_set_id_bits(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "tool").write_bytes(b"\x7fELF")
    os.chmod(src / "tool", 0o6755)
    _copy(src, tmp_path / "dst", max_bytes=100)
    assert stat.S_IMODE(os.stat(tmp_path / "dst" / "tool").st_mode) == 0o755


def test_copy_tree_caps_bytes_keeping_a_log_tail(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.log").write_bytes(b"a" * 100 + b"TAIL")
    report = _copy(src, tmp_path / "tail", max_bytes=10, keep_tail=True)
    copied = (tmp_path / "tail" / "big.log").read_bytes()
    assert copied.endswith(b"TAIL") and len(copied) == 10 and report.truncated == ["big.log"]
    report = _copy(src, tmp_path / "skip", max_bytes=10)
    assert not (tmp_path / "skip" / "big.log").exists() and "big.log" in report.note()
