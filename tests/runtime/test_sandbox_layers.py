"""The sandbox's layers one by one: the seccomp program and its cache, the agents' id range and leases, views."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anchorage.runtime import seccomp_policy
from anchorage.runtime.local import mounts, seccomp, uids, views


def test_the_program_is_compiled_once_and_cached_by_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANCHORAGE_CACHE", str(tmp_path))
    seccomp._compiled.cache_clear()
    try:
        first = seccomp.compiled()
        stamp = first.path.stat().st_mtime_ns
        seccomp._compiled.cache_clear()
        again = seccomp.compiled()
    finally:
        seccomp._compiled.cache_clear()
    assert again.path == first.path and again.path.stat().st_mtime_ns == stamp  # read from the cache, not rebuilt
    assert first.path.parent == tmp_path / "seccomp" and first.path.name == f"{first.digest}.bpf"
    size = first.path.stat().st_size
    assert size > 0 and size % 8 == 0  # struct sock_filter instructions
    assert first.skipped == ()  # libseccomp knows every name of the list on this machine's architectures


def test_a_policy_change_is_a_new_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANCHORAGE_CACHE", str(tmp_path))
    seccomp._compiled.cache_clear()
    try:
        before = seccomp.compiled()
        shorter = tuple(d for d in seccomp_policy.DENIED if d.name != "syslog")
        monkeypatch.setattr(seccomp_policy, "DENIED", shorter)
        seccomp._compiled.cache_clear()
        after = seccomp.compiled()
    finally:
        seccomp._compiled.cache_clear()
    assert after.digest != before.digest and after.path.stat().st_size < before.path.stat().st_size


def test_the_oci_profile_carries_the_same_list() -> None:
    profile = seccomp_policy.oci_profile("x86_64")
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    assert profile["architectures"] == ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"]
    named = {name for rule in profile["syscalls"] for name in rule["names"]}
    assert named == {d.name for d in seccomp_policy.DENIED}
    for denied in seccomp_policy.DENIED:
        rules = [r for r in profile["syscalls"] if denied.name in r["names"]]
        assert all(r["errnoRet"] == seccomp_policy.ERRNO_NUMBERS[denied.errno] for r in rules)
        if denied.any_bit_of:  # one masked rule per bit, and no unconditional rule
            assert sorted(r["args"][0]["value"] for r in rules) == sorted(denied.any_bit_of)
            assert all(r["args"][0]["op"] == "SCMP_CMP_MASKED_EQ" for r in rules)
        else:
            assert len(rules) == 1 and "args" not in rules[0]
    printed = subprocess.run([sys.executable, "-m", "anchorage.runtime.seccomp_policy", "x86_64"], capture_output=True,
                             text=True, check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert json.loads(printed.stdout) == profile
    refused = subprocess.run([sys.executable, "-m", "anchorage.runtime.seccomp_policy", "sparc"], capture_output=True,
                             text=True, check=False, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert refused.returncode == 2 and "sparc" in refused.stderr and "x86_64" in refused.stderr


def test_the_id_range_comes_from_subuid_or_the_default(tmp_path: Path) -> None:
    (tmp_path / "subuid").write_text("someone:100000:65536\nanchorage:300000:1000\n")
    assert uids._subordinate(tmp_path / "subuid") == (300000, 1000)
    (tmp_path / "other").write_text("someone:100000:65536\n")
    assert uids._subordinate(tmp_path / "other") is None
    assert uids._subordinate(tmp_path / "missing") is None
    found = uids.id_range()
    assert found.count >= 2 and found.start > 65535  # never a system or regular account's id
    assert uids.sandbox_group() == found.start


@pytest.mark.skipif(os.geteuid() != 0, reason="leases live in /run/anchorage (root)")
def test_leases_are_exclusive_across_processes() -> None:
    first, second = uids.lease(), uids.lease()
    try:
        assert first.uid != second.uid and first.uid == first.gid
        assert uids.id_range().start < first.uid < uids.id_range().start + uids.id_range().count
        probe = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR)\n"
                 "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\n"
                 "except BlockingIOError:\n    print('held')")
        lock = str(uids.LOCK_DIR / f"{first.uid}.lock")
        held = subprocess.run([sys.executable, "-c", probe, lock], capture_output=True, text=True, check=True).stdout
        first.release()
        free = subprocess.run([sys.executable, "-c", probe, lock], capture_output=True, text=True, check=True).stdout
    finally:
        first.release()
        second.release()
    assert (held.strip(), free.strip()) == ("held", "free")


@pytest.mark.skipif(os.geteuid() != 0, reason="views are mounted by a root engine")
def test_a_view_shows_the_folder_read_only_without_its_path(tmp_path: Path) -> None:
    source = tmp_path / "secret-checkout-name" / "data"
    source.mkdir(parents=True)
    (source / "input.csv").write_text("a,b\n")
    view = views.of(source)
    assert view.hidden and view.path != source
    assert (view.path / "input.csv").read_text() == "a,b\n"
    with pytest.raises(OSError):
        (view.path / "new.txt").write_text("x")
    line = next(line for line in Path("/proc/self/mountinfo").read_text().splitlines() if f" {view.path} " in line)
    assert "secret-checkout-name" not in line and "lowerdir=/proc/self/fd/" in line, line
    assert views.of(source) == view  # made once
    folder = view.path.parent
    assert folder.stat().st_gid == uids.sandbox_group() and folder.stat().st_mode & 0o777 == 0o710
    assert any(target == str(view.path) for _, _, target in mounts.table())


@pytest.mark.skipif(os.geteuid() != 0, reason="socket links are made by a root engine")
def test_a_socket_link_lives_as_long_as_its_sandboxes(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "private" / "trial.sock"
    path.parent.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen()
        link = views.file(path)
        assert link != path and link.parent.name.startswith(views.FOLDER_PREFIX)
        assert views.file(path) == link  # a second sandbox of the same trial: the same link, counted
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(link))  # the link reaches the socket
        views.release_file(link)
        assert link.exists()  # one sandbox still uses it
        views.release_file(link)
        assert not link.exists()  # one link per trial socket would pile up for the engine's life otherwise
        views.release_file(link)  # more releases than uses: nothing
        again = views.file(path)
        assert again.exists() and again != link
        views.release_file(again)
        assert not again.exists()
