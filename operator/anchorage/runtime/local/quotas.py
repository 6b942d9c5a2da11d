"""Size and inode quotas on a trial's writable folders while the agent runs, and leftovers of killed runs.

Called by :mod:`anchorage.runtime.local.sandbox` around every sandboxed run (as root). The trial's
``artifacts/`` (the agent's ``/root/results``) and ``agent/`` (``/logs/agent``) folders each get a tmpfs
mounted over them with ``size=`` and ``nr_inodes=`` (``nosuid,nodev``), so a full disk or a million
files stop at the quota with ``ENOSPC`` instead of reaching the host's disk. The tmpfs's pages count
against the agent's memory cgroup. After the run, the contents are copied (by
:func:`anchorage.confined.copy_tree`: no link followed, no set-id bit kept, hard links copied once,
bytes capped) into the folder underneath — reached through a descriptor opened before the mount, so
files the engine wrote there first (``prompt.txt``) stay and win — and the tmpfs is unmounted.

Each mount's source names its owner (``anchorage-quota-<pid>.<start time>``): :func:`sweep_stale`
unmounts those whose engine is gone (killed with -9), so the next run can reuse the folders.
Where mounting is not possible (not root, no tmpfs), :func:`mount` returns the reason and the sandbox
checks sizes after the run instead, with bounded walks.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from dataclasses import dataclass, field
from pathlib import Path

from anchorage import confined
from anchorage.runtime.local import leftovers

_MS_NOSUID, _MS_NODEV = 0x2, 0x4
_MNT_DETACH = 0x2
SOURCE_PREFIX = "anchorage-quota-"
SLACK_BYTES = 1024 * 1024
"""Room above the byte quota, so that "over the quota" is seen (a write beyond it fails with ENOSPC)."""

_libc: ctypes.CDLL | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _mount_tmpfs(source: str, target: Path, options: str) -> None:
    result = _c().mount(source.encode(), os.fsencode(target), b"tmpfs", ctypes.c_ulong(_MS_NOSUID | _MS_NODEV),
                        options.encode())
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(target))


def _umount(target: Path | str) -> None:
    if _c().umount2(os.fsencode(target), _MNT_DETACH) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(target))


@dataclass(frozen=True)
class Quota:
    """At most ``max_bytes`` (apparent size of the files) and ``max_entries`` files and folders."""

    max_bytes: int
    max_entries: int


@dataclass
class Collected:
    """How a quota'd folder ended: its usage, whether it went over, and what the copy left out."""

    usage: confined.Usage
    over: bool
    why: str = ""
    copy_note: str = ""
    mounted: bool = True
    details: dict[str, object] = field(default_factory=dict)


@dataclass
class QuotaMount:
    """A tmpfs over ``path``; ``under_fd`` is the folder beneath it, where the contents end up."""

    path: Path
    quota: Quota
    under_fd: int
    source: str

    def _statvfs(self) -> os.statvfs_result | None:
        with contextlib.suppress(OSError):
            return os.statvfs(self.path)
        return None

    def collect(self, *, keep_tail: bool = False) -> Collected:
        """Measure, copy the contents into the folder underneath, unmount. Never raises for contents."""
        try:
            usage = confined.usage(self.path, max_entries=self.quota.max_entries + 2)
            vfs = self._statvfs()
            over, why = _verdict(usage, self.quota, vfs)
            report = confined.copy_tree(self.path, self.under_fd, max_bytes=self.quota.max_bytes,
                                        keep_tail=keep_tail, max_entries=self.quota.max_entries + 2)
        finally:
            self.release()
        return Collected(usage, over, why, report.note(), details={"copied_files": report.files,
                                                                    "copied_bytes": report.bytes})

    def release(self) -> None:
        with contextlib.suppress(OSError):
            _umount(self.path)
        with contextlib.suppress(OSError):
            os.close(self.under_fd)
        self.under_fd = -1


def _verdict(usage: confined.Usage, quota: Quota, vfs: os.statvfs_result | None) -> tuple[bool, str]:
    if usage.bytes > quota.max_bytes:
        return True, f"{usage.bytes} bytes, over the {quota.max_bytes}-byte quota"
    if usage.truncated or usage.entries > quota.max_entries:
        return True, f"more than {quota.max_entries} files and folders (the quota)"
    if vfs is not None and vfs.f_files and vfs.f_ffree == 0:
        return True, f"the {quota.max_entries}-entry quota is exhausted"
    if vfs is not None and vfs.f_bfree * vfs.f_frsize < SLACK_BYTES // 2:
        return True, f"the folder's {quota.max_bytes}-byte quota is full (small files use whole pages)"
    return False, ""


def mount(path: Path, quota: Quota, *, uid: int, gid: int) -> QuotaMount | str:
    """Mount a tmpfs with ``quota`` over the existing folder ``path`` (its current files copied in, owned by
    ``uid``/``gid`` like the tmpfs itself); the reason it cannot, as text."""
    if os.geteuid() != 0:
        return "not root: sizes are checked after the run"
    try:
        under = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return f"cannot open {path}: {exc.strerror}"
    source = SOURCE_PREFIX + leftovers.owner_tag()
    size = quota.max_bytes + SLACK_BYTES
    options = f"size={size},nr_inodes={quota.max_entries + 2},mode=0755,uid={uid},gid={gid}"
    try:
        _mount_tmpfs(source, path, options)
    except OSError as exc:
        os.close(under)
        return f"cannot mount a tmpfs quota on {path}: {exc.strerror}"
    quota_mount = QuotaMount(path, quota, under, source)
    try:  # what the engine put there first (prompt.txt, a request) stays visible to the agent
        with confined.folder_fd(path) as top:
            confined.copy_tree(under, top, max_bytes=quota.max_bytes, max_entries=quota.max_entries)
    except (OSError, confined.ConfinedError) as exc:
        quota_mount.release()
        return f"cannot fill the tmpfs quota on {path}: {exc}"
    return quota_mount


def check_unmounted(path: Path, quota: Quota) -> Collected:
    """Without a mount: the same verdict from a bounded walk after the run (nothing to copy)."""
    usage = confined.usage(path, max_entries=quota.max_entries + 2)
    over, why = _verdict(usage, quota, None)
    return Collected(usage, over, why, mounted=False)


def sweep_stale() -> int:
    """Unmount quota tmpfs left by engines that are gone; returns how many were unmounted."""
    if os.geteuid() != 0:
        return 0
    removed = 0
    for source, target in _mounts():
        if source.startswith(SOURCE_PREFIX) and not leftovers.owner_alive(source.removeprefix(SOURCE_PREFIX)):
            with contextlib.suppress(OSError):
                _umount(target)
                removed += 1
    return removed


def _mounts() -> list[tuple[str, str]]:
    """(source, mount point) of every tmpfs in this mount namespace."""
    out: list[tuple[str, str]] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(fields) >= 5 and len(rest) >= 2 and rest[0] == "tmpfs":
            out.append((rest[1], _unescape(fields[4])))
    return out


def _unescape(text: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        text = text.replace(code, char)
    return text
