"""Size and inode quotas on a trial's writable folders while the agent runs, and leftovers of killed runs.

Called by :mod:`anchorage.runtime.local.sandbox` around every sandboxed run (as root). The agent's
``/root/results`` and ``/logs/agent`` are not the trial's folders themselves but two tmpfs with
``size=`` and ``nr_inodes=`` (``nosuid,nodev``), so a full disk or a million files stop at the quota
with ``ENOSPC`` instead of reaching the host's disk; the tmpfs's pages count against the agent's memory
cgroup. What the engine put in the trial's folders first (``prompt.txt``, a model call's request) is
copied in before the run; after it, the contents are copied out into the trial's folders by
:func:`anchorage.confined.copy_tree` (no link followed, no set-id bit kept, hard links copied once,
bytes capped; an engine file already there wins).

Mounting and especially unmounting cost milliseconds each (an unmount waits for an RCU grace
period: ~15 ms on a loaded machine), so the tmpfs come from a :class:`Pool` that mounts them once per
engine process and reuses them: between trials a tmpfs is emptied and its limits set again by a
remount; one the agent filled with many entries is unmounted by a background thread instead. At exit
the pool unmounts what it holds. Each mount's source names its engine (``anchorage-quota-<pid>.<start
time>``): :func:`sweep_stale` unmounts those whose engine is gone (killed with -9). Where mounting is not
possible (not root, no tmpfs), :meth:`Pool.acquire` returns the reason and the sandbox binds the trial's
folders themselves and checks their sizes after the run, with bounded walks.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from anchorage import confined
from anchorage.runtime.local import leftovers, mounts, uids

SOURCE_PREFIX = "anchorage-quota-"
FOLDER_PREFIX = "anchorage-quota-"
SLACK_BYTES = 1024 * 1024
"""Room above the byte quota, so that "over the quota" is seen (a write beyond it fails with ENOSPC)."""
REUSE_MAX_ENTRIES = 512
"""A tmpfs left with more entries than this is unmounted (in the background) rather than emptied."""

def _mount_tmpfs(source: str, target: Path, options: str, *, remount: bool = False) -> None:
    mounts.mount(source, target, "tmpfs", mounts.MS_NOSUID | mounts.MS_NODEV | (mounts.MS_REMOUNT if remount else 0),
                 options)


@dataclass(frozen=True)
class Quota:
    """At most ``max_bytes`` (apparent size of the files) and ``max_entries`` files and folders."""

    max_bytes: int
    max_entries: int

    def options(self) -> str:
        return f"size={self.max_bytes + SLACK_BYTES},nr_inodes={self.max_entries + 2}"


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
    """A pooled tmpfs holding one trial folder's contents while the agent runs (bound in its place)."""

    path: Path
    quota: Quota
    folder: Path
    pool: Pool
    released: bool = False

    def collect(self, *, keep_tail: bool = False) -> Collected:
        """Measure, copy the contents into the trial's folder, give the tmpfs back. Never raises for contents."""
        usage = confined.Usage()
        try:
            usage = confined.usage(self.path, max_entries=self.quota.max_entries + 2)
            over, why = _verdict(usage, self.quota, _statvfs(self.path))
            with confined.folder_fd(self.folder) as dest:
                report = confined.copy_tree(self.path, dest, max_bytes=self.quota.max_bytes, keep_tail=keep_tail,
                                            max_entries=self.quota.max_entries + 2)
        finally:
            self.release(usage.entries)
        return Collected(usage, over, why, report.note(), details={"copied_files": report.files,
                                                                    "copied_bytes": report.bytes})

    def release(self, entries: int = REUSE_MAX_ENTRIES + 1) -> None:
        if not self.released:
            self.released = True
            self.pool.give_back(self.path, reuse=entries <= REUSE_MAX_ENTRIES)


def _statvfs(path: Path) -> os.statvfs_result | None:
    with contextlib.suppress(OSError):
        return os.statvfs(path)
    return None


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


class Pool:
    """Quota tmpfs mounted once per engine process and reused (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: list[Path] = []
        self._mounted: set[Path] = set()
        self._folder: Path | None = None
        self._count = 0
        self._doomed: queue.Queue[Path | None] = queue.Queue()
        self._reaper: threading.Thread | None = None

    def acquire(self, folder: Path, quota: Quota, *, uid: int, gid: int) -> QuotaMount | str:
        """A tmpfs with ``quota`` holding a copy of ``folder``'s files, owned by ``uid``/``gid``; or why not."""
        if os.geteuid() != 0:
            return "not root: sizes are checked after the run"
        try:
            path = self._take()
            _mount_tmpfs(SOURCE_PREFIX + leftovers.owner_tag(), path, quota.options(), remount=True)
            os.chown(path, uid, gid)
            os.chmod(path, 0o755)
        except OSError as exc:
            return f"cannot mount a tmpfs quota: {exc.strerror}"
        mount = QuotaMount(path, quota, folder, self)
        try:  # what the engine put there first (prompt.txt, a request) stays visible to the agent
            with confined.folder_fd(path) as top:
                confined.copy_tree(folder, top, max_bytes=quota.max_bytes, max_entries=quota.max_entries)
        except (OSError, confined.ConfinedError) as exc:
            mount.release()
            return f"cannot fill the tmpfs quota: {exc}"
        return mount

    def _take(self) -> Path:
        with self._lock:
            if self._free:
                return self._free.pop()
            if self._folder is None:
                self._folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{leftovers.owner_tag()}-"))
                uids.grant_traverse(self._folder)  # the unprivileged bubblewrap binds the tmpfs from here
            self._count += 1
            path = self._folder / str(self._count)
        path.mkdir()
        _mount_tmpfs(SOURCE_PREFIX + leftovers.owner_tag(), path, "size=4096,nr_inodes=16,mode=0755")
        with self._lock:
            self._mounted.add(path)
        return path

    def give_back(self, path: Path, *, reuse: bool) -> None:
        """Empty ``path`` for the next trial, or (many entries, or emptying failed) unmount it in the background."""
        if reuse:
            try:
                _empty(path)
            except (OSError, RecursionError):
                reuse = False
        if reuse:
            with self._lock:
                self._free.append(path)
            return
        with self._lock:
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap, name="quota-umount", daemon=True)
                self._reaper.start()
        self._doomed.put(path)

    def _reap(self) -> None:
        while (path := self._doomed.get()) is not None:
            self._unmount(path)

    def _unmount(self, path: Path) -> None:
        with contextlib.suppress(OSError):
            mounts.umount(path)
        with contextlib.suppress(OSError):
            path.rmdir()
        with self._lock:
            self._mounted.discard(path)

    def close(self) -> None:
        """Unmount everything (at exit)."""
        if self._reaper is not None:
            self._doomed.put(None)
            self._reaper.join(timeout=30)
        with self._lock:
            paths = list(self._mounted)
            self._free.clear()
        for path in paths:
            self._unmount(path)
        if self._folder is not None:
            with contextlib.suppress(OSError):
                self._folder.rmdir()


def _empty(path: Path) -> None:
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


POOL = Pool()
atexit.register(POOL.close)


def acquire(folder: Path, quota: Quota, *, uid: int, gid: int) -> QuotaMount | str:
    """:meth:`Pool.acquire` of this process's pool."""
    return POOL.acquire(folder, quota, uid=uid, gid=gid)


def check_unmounted(path: Path, quota: Quota) -> Collected:
    """Without a tmpfs: the same verdict from a bounded walk after the run (nothing to copy)."""
    usage = confined.usage(path, max_entries=quota.max_entries + 2)
    over, why = _verdict(usage, quota, None)
    return Collected(usage, over, why, mounted=False)


def sweep_stale() -> int:
    """Unmount quota tmpfs left by engines that are gone, and remove their folders; returns how many."""
    if os.geteuid() != 0:
        return 0
    removed = 0
    for source, target in _mounts():
        if source.startswith(SOURCE_PREFIX) and not leftovers.owner_alive(source.removeprefix(SOURCE_PREFIX)):
            with contextlib.suppress(OSError):
                mounts.umount(target)
                removed += 1
    for folder in Path(tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}*"):
        tag = folder.name.removeprefix(FOLDER_PREFIX).rsplit("-", 1)[0]
        if folder.is_dir() and not folder.is_symlink() and not leftovers.owner_alive(tag):
            for child in folder.iterdir():
                with contextlib.suppress(OSError):
                    child.rmdir()
            with contextlib.suppress(OSError):
                folder.rmdir()
    return removed


def _mounts() -> list[tuple[str, str]]:
    """(source, mount point) of every tmpfs in this mount namespace."""
    return [(source, target) for kind, source, target in mounts.table() if kind == "tmpfs"]
