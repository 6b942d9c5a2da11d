"""Reading what an agent wrote: never following a link, never leaving the folder, never past a cap.

A trial's folders (``results/``, the agent's logs) hold whatever the agent put there: symlinks to the
answer key or a host secret, hard links, FIFOs that block a reader, sparse terabyte files, a million
entries, directories nested thousands deep. Everything Anchorage reads from them goes through this
module — the scorer (the artifact and its near-miss recovery), the local engine (log tails, results
usage, copying results out of their size-limited tmpfs), the report, and the cluster's upload sidecar
(``anchorage.runtime.kube.pod``).

* Paths are opened *beneath* a folder: ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
  RESOLVE_NO_MAGICLINKS)`` where the kernel has it (Linux ≥ 5.6), else component by component with
  ``O_NOFOLLOW`` (``..`` and absolute paths are refused up front). A symlink anywhere on the way is an
  error, never followed.
* A file is first opened ``O_PATH`` (no side effect, even for a device) and ``fstat``-ed; only a
  regular file is then opened for reading (``O_NONBLOCK``, the same inode checked again).
* Sizes are checked with ``fstat`` before reading and every read is capped; log tails seek to the end
  and read a bounded window.
* Walks are iterative with a depth and an entry cap, holding one directory fd per level.

Errors are :class:`ConfinedError` with a short ``reason`` (``missing``, ``symlink``, ``not_regular``,
``too_large``, ``escapes``, ``unreadable``) and a message naming the path. Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Reason = Literal["missing", "symlink", "not_regular", "too_large", "escapes", "unreadable"]

RECORD_LIMIT = 64 * 1024 * 1024
"""Cap for records the engine itself wrote into a trial folder (``trial.json``, ``score.json``)."""

MAX_DEPTH = 64
"""Directories deeper than this below a walked folder are not entered (reported as skipped)."""

_O_PATH = getattr(os, "O_PATH", 0o10000000)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the same number on every Linux architecture (added in 5.6)


class ConfinedError(Exception):
    """A path beneath a trial folder that cannot be read safely; ``reason`` says why."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.message = message


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc: ctypes.CDLL | None = None
_openat2_usable: bool | None = None


def _openat2(dir_fd: int, relative: str, flags: int) -> int | None:
    """``openat2`` beneath ``dir_fd`` without links; None when the kernel lacks it (use the fallback)."""
    global _libc, _openat2_usable
    if _openat2_usable is False:
        return None
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            _openat2_usable = False
            return None
    how = _OpenHow(flags | _CLOEXEC, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
    fd = int(_libc.syscall(_SYS_OPENAT2, dir_fd, os.fsencode(relative), ctypes.byref(how), ctypes.sizeof(how)))
    if fd >= 0:
        _openat2_usable = True
        return fd
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EPERM) and _openat2_usable is None:  # no openat2 (or a seccomp filter)
        _openat2_usable = False
        return None
    raise OSError(code, os.strerror(code), relative)


def _parts(relative: str | os.PathLike[str]) -> list[str]:
    text = os.fspath(relative)
    if not text or text.startswith("/") or "\0" in text:
        raise ConfinedError("escapes", f"{text!r} is not a relative path")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ConfinedError("escapes", f"{text!r} leaves its folder")
    return parts


def _fallback_open(dir_fd: int, parts: list[str], flags: int) -> int:
    """Component by component: every directory ``O_NOFOLLOW | O_DIRECTORY``, the last with ``flags``."""
    current = dir_fd
    try:
        for part in parts[:-1]:
            nxt = os.open(part, _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC, dir_fd=current)
            if current != dir_fd:
                os.close(current)
            current = nxt
        return os.open(parts[-1], flags | os.O_NOFOLLOW | _CLOEXEC, dir_fd=current)
    finally:
        if current != dir_fd:
            os.close(current)


def _open_beneath(dir_fd: int, relative: str | os.PathLike[str], flags: int) -> int:
    parts = _parts(relative)
    joined = "/".join(parts)
    try:
        fd = _openat2(dir_fd, joined, flags)
        if fd is None:
            fd = _fallback_open(dir_fd, parts, flags)
    except OSError as exc:
        raise _translate(exc, joined) from None
    return fd


def _translate(exc: OSError, where: str) -> ConfinedError:
    if exc.errno == errno.ENOENT:
        return ConfinedError("missing", f"{where} does not exist")
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return ConfinedError("symlink", f"{where} is (or passes through) a symbolic link; links are not followed")
    if exc.errno == errno.EXDEV:
        return ConfinedError("escapes", f"{where} leaves its folder")
    if exc.errno == errno.ENOTDIR:
        return ConfinedError("not_regular", f"{where}: a path component is not a directory (or is a link)")
    return ConfinedError("unreadable", f"cannot open {where}: {exc.strerror or exc}")


@contextlib.contextmanager
def folder_fd(folder: Path | str | int) -> Iterator[int]:
    """An fd for ``folder`` (the folder's own path is the caller's and may be followed); an int is used as is."""
    if isinstance(folder, int):
        yield folder
        return
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    except OSError as exc:
        raise _translate(exc, str(folder)) from None
    try:
        yield fd
    finally:
        os.close(fd)


def lstat(folder: Path | str | int, relative: str | os.PathLike[str]) -> os.stat_result | None:
    """The entry's own status (a symlink is reported as one), or None when it does not exist."""
    with folder_fd(folder) as dir_fd:
        try:
            fd = _open_beneath(dir_fd, relative, _O_PATH | os.O_NOFOLLOW)
        except ConfinedError as exc:
            if exc.reason == "missing":
                return None
            if exc.reason != "symlink":
                raise
            parent, _, name = "/".join(_parts(relative)).rpartition("/")
            if parent:
                raise
            return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)


def open_regular(dir_fd: int, relative: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    """A read-only fd of the regular file at ``relative`` beneath ``dir_fd``, and its status."""
    where = os.fspath(relative)
    probe = _open_beneath(dir_fd, relative, _O_PATH | os.O_NOFOLLOW)
    try:
        info = os.fstat(probe)
    finally:
        os.close(probe)
    if stat.S_ISLNK(info.st_mode):
        raise ConfinedError("symlink", f"{where} is a symbolic link; links are not followed")
    if not stat.S_ISREG(info.st_mode):
        raise ConfinedError("not_regular", f"{where} is not a regular file ({_kind(info.st_mode)})")
    fd = _open_beneath(dir_fd, relative, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    again = os.fstat(fd)
    if (again.st_dev, again.st_ino) != (info.st_dev, info.st_ino) or not stat.S_ISREG(again.st_mode):
        os.close(fd)
        raise ConfinedError("unreadable", f"{where} changed while it was being opened")
    return fd, again


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def _read_at_most(fd: int, count: int) -> bytes:
    chunks: list[bytes] = []
    left = count
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_bytes(folder: Path | str | int, relative: str | os.PathLike[str], *, limit: int) -> bytes:
    """The whole regular file, refused (``too_large``) when it is larger than ``limit`` bytes."""
    with folder_fd(folder) as dir_fd:
        fd, info = open_regular(dir_fd, relative)
        try:
            if info.st_size > limit:
                raise ConfinedError("too_large", f"{os.fspath(relative)} is {info.st_size} bytes, over the "
                                                 f"{limit}-byte limit")
            data = _read_at_most(fd, limit + 1)
        except OSError as exc:
            raise _translate(exc, os.fspath(relative)) from None
        finally:
            os.close(fd)
    if len(data) > limit:
        raise ConfinedError("too_large", f"{os.fspath(relative)} grew past the {limit}-byte limit while read")
    return data


def read_path(path: Path | str, *, limit: int) -> bytes:
    """:func:`read_bytes` of a file given by its path: the file's folder is trusted, the file is not."""
    path = Path(path)
    return read_bytes(path.parent, path.name, limit=limit)


def tail(folder: Path | str | int, relative: str | os.PathLike[str], *, window: int = 4096) -> str:
    """The last ``window`` bytes of a regular file as text ('' when it cannot be read safely)."""
    try:
        with folder_fd(folder) as dir_fd:
            fd, info = open_regular(dir_fd, relative)
            try:
                os.lseek(fd, max(0, info.st_size - window), os.SEEK_SET)
                data = _read_at_most(fd, window)
            finally:
                os.close(fd)
    except (ConfinedError, OSError):
        return ""
    return data.decode("utf-8", "replace")


@dataclass(frozen=True)
class Entry:
    """One entry met by :func:`walk`: its path relative to the folder, its own status, and where it is."""

    relative: str
    name: str
    info: os.stat_result
    dir_fd: int  # valid only while the walk is at this entry

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.info.st_mode)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.info.st_mode)


@dataclass
class WalkLimits:
    """Caps of one walk; ``truncated``/``too_deep`` say whether they were hit."""

    max_entries: int = 100_000
    max_depth: int = MAX_DEPTH
    entries: int = 0
    truncated: bool = False
    too_deep: list[str] = field(default_factory=list)


def walk(folder: Path | str | int, limits: WalkLimits | None = None) -> Iterator[Entry]:
    """Every entry beneath ``folder`` (directories before their contents), links reported, never followed.

    Iterative; stops after ``limits.max_entries`` entries (``truncated``) and does not enter directories
    deeper than ``limits.max_depth`` (listed in ``too_deep``).
    """
    limits = limits if limits is not None else WalkLimits()
    with folder_fd(folder) as root:
        stack: list[tuple[int, str, _Listing]] = []
        try:
            _push(stack, os.dup(root), "")
            while stack:
                dir_fd, prefix, listing = stack[-1]
                item = next(listing.entries, None)
                if item is None:
                    _pop(stack)
                    continue
                if limits.entries >= limits.max_entries:
                    limits.truncated = True
                    return
                limits.entries += 1
                try:
                    info = os.stat(item.name, dir_fd=dir_fd, follow_symlinks=False)
                except OSError:
                    continue
                relative = f"{prefix}{item.name}"
                yield Entry(relative, item.name, info, dir_fd)
                if stat.S_ISDIR(info.st_mode):
                    if len(stack) > limits.max_depth:
                        limits.too_deep.append(relative)
                        continue
                    with contextlib.suppress(OSError):
                        _push(stack, os.open(item.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC,
                                             dir_fd=dir_fd), relative + "/")
        finally:
            while stack:
                _pop(stack)


@dataclass
class _Listing:
    scandir: Any
    entries: Iterator[os.DirEntry[str]]


def _push(stack: list[tuple[int, str, _Listing]], fd: int, prefix: str) -> None:
    try:
        listing = os.scandir(fd)
    except OSError:
        os.close(fd)
        raise
    stack.append((fd, prefix, _Listing(listing, iter(listing))))


def _pop(stack: list[tuple[int, str, _Listing]]) -> None:
    fd, _, listing = stack.pop()
    listing.scandir.close()
    os.close(fd)


@dataclass
class Usage:
    """What a folder holds: apparent bytes of its regular files, entries, and what was not counted."""

    bytes: int = 0
    files: int = 0
    entries: int = 0
    truncated: bool = False
    links: int = 0
    special: int = 0


def usage(folder: Path | str | int, *, max_entries: int = 100_000) -> Usage:
    """Sizes by ``lstat`` (a hard link's bytes once); stops counting after ``max_entries`` (``truncated``)."""
    limits = WalkLimits(max_entries=max_entries)
    out = Usage()
    seen: set[tuple[int, int]] = set()
    for entry in walk(folder, limits):
        out.entries += 1
        if entry.is_file:
            out.files += 1
            key = (entry.info.st_dev, entry.info.st_ino)
            if key not in seen:
                seen.add(key)
                out.bytes += entry.info.st_size
        elif stat.S_ISLNK(entry.info.st_mode):
            out.links += 1
        elif not entry.is_dir:
            out.special += 1
    out.truncated = limits.truncated
    return out


def regular_files(folder: Path | str | int, *, max_entries: int = 100_000) -> tuple[list[str], WalkLimits]:
    """Relative paths of the regular files beneath ``folder`` (sorted), with the walk's limits."""
    limits = WalkLimits(max_entries=max_entries)
    names = sorted(entry.relative for entry in walk(folder, limits) if entry.is_file)
    return names, limits


@dataclass
class CopyReport:
    """What :func:`copy_tree` copied and what it left out (and why)."""

    files: int = 0
    bytes: int = 0
    linked: int = 0
    skipped: list[str] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)

    def note(self, limit: int = 10) -> str:
        parts = []
        if self.skipped:
            shown = ", ".join(self.skipped[:limit]) + (" ..." if len(self.skipped) > limit else "")
            parts.append(f"not copied ({len(self.skipped)}): {shown}")
        if self.truncated:
            parts.append("cut to their last bytes: " + ", ".join(self.truncated[:limit]))
        return "; ".join(parts)


def copy_tree(source: Path | str | int, dest_fd: int, *, max_bytes: int, keep_tail: bool = False,
              max_entries: int = 100_000) -> CopyReport:
    """Copy regular files and directories beneath ``source`` into the directory ``dest_fd``.

    Nothing is followed or recreated but plain directories and files (mode 0644, 0755 when executable:
    no set-id bits); symlinks, FIFOs, sockets and devices are listed in ``skipped``; a hard-linked file
    is copied once and linked again; an existing destination entry wins (skipped). At most ``max_bytes``
    are copied: a file that no longer fits is skipped, or with ``keep_tail`` cut to its last bytes.
    """
    report = CopyReport()
    copied: dict[tuple[int, int], str] = {}
    dirs: dict[str, int] = {"": os.dup(dest_fd)}
    try:
        for entry in walk(source, WalkLimits(max_entries=max_entries)):
            parent, _, _ = entry.relative.rpartition("/")
            target_dir = dirs.get(parent)
            if target_dir is None:
                continue  # its directory was skipped
            if entry.is_dir:
                _copy_dir(entry, target_dir, dirs, report)
            elif entry.is_file:
                _copy_file(entry, target_dir, dirs, copied, report, max_bytes, keep_tail)
            else:
                report.skipped.append(f"{entry.relative} ({_kind(entry.info.st_mode)})")
    finally:
        for fd in dirs.values():
            os.close(fd)
    return report


def _copy_dir(entry: Entry, target_dir: int, dirs: dict[str, int], report: CopyReport) -> None:
    try:
        os.mkdir(entry.name, 0o755, dir_fd=target_dir)
    except FileExistsError:
        pass
    except OSError:
        report.skipped.append(f"{entry.relative}/ (cannot create)")
        return
    try:
        dirs[entry.relative] = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC,
                                       dir_fd=target_dir)
    except OSError:
        report.skipped.append(f"{entry.relative}/ (exists and is not a directory)")


def _copy_file(entry: Entry, target_dir: int, dirs: dict[str, int], copied: dict[tuple[int, int], str],
               report: CopyReport, max_bytes: int, keep_tail: bool) -> None:
    key = (entry.info.st_dev, entry.info.st_ino)
    first = copied.get(key)
    if first is not None:
        _relink(entry, target_dir, dirs, first, report)
        return
    budget = max_bytes - report.bytes
    size = entry.info.st_size
    start = 0
    if size > budget:
        if not keep_tail or budget <= 0:
            report.skipped.append(f"{entry.relative} ({size} bytes: over the copy budget)")
            return
        start = size - budget
        report.truncated.append(entry.relative)
    try:
        fd, info = open_regular(entry.dir_fd, entry.name)
    except ConfinedError as exc:
        report.skipped.append(f"{entry.relative} ({exc.reason})")
        return
    mode = 0o755 if info.st_mode & 0o100 else 0o644
    try:
        out = os.open(entry.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, mode,
                      dir_fd=target_dir)
    except OSError:
        os.close(fd)
        report.skipped.append(f"{entry.relative} (the destination already has it)")
        return
    try:
        os.lseek(fd, start, os.SEEK_SET)
        left = min(size - start, budget)
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            os.write(out, chunk)
            left -= len(chunk)
            report.bytes += len(chunk)
        os.fchmod(out, mode)
    finally:
        os.close(fd)
        os.close(out)
    copied[key] = entry.relative
    report.files += 1


def _relink(entry: Entry, target_dir: int, dirs: dict[str, int], first: str, report: CopyReport) -> None:
    """A second name of an already copied file: link the copy (both names are beneath the destination)."""
    first_dir, _, first_name = first.rpartition("/")
    try:
        os.link(first_name, entry.name, src_dir_fd=dirs[first_dir], dst_dir_fd=target_dir, follow_symlinks=False)
        report.linked += 1
    except (OSError, KeyError):
        report.skipped.append(f"{entry.relative} (hard link of {first})")
