"""mount(2), umount2(2) and this namespace's mount table, for the engine's own mounts (root only).

Used by :mod:`.quotas` (the size-limited tmpfs of a trial's writable folders) and :mod:`.views` (the
read-only views of host folders), which mount once per engine process and unmount at exit; their
``sweep_stale`` find the mounts of killed engines in :func:`table`.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND = 0x1, 0x2, 0x4, 0x20, 0x1000
MNT_DETACH = 0x2


@functools.lru_cache(maxsize=1)
def _c() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def mount(source: str, target: Path | str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """mount(2); raises :class:`OSError` naming ``target``."""
    result = _c().mount(source.encode(), os.fsencode(target), fstype.encode() if fstype else None,
                        ctypes.c_ulong(flags), data.encode() if data is not None else None)
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(target))


def umount(target: Path | str) -> None:
    """Lazy unmount (``MNT_DETACH``): sandboxes that bound the mount keep their copy."""
    if _c().umount2(os.fsencode(target), MNT_DETACH) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(target))


def table() -> list[tuple[str, str, str]]:
    """(filesystem type, source, mount point) of every mount in this mount namespace."""
    out: list[tuple[str, str, str]] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(fields) >= 5 and len(rest) >= 2:
            out.append((rest[0], _unescape(rest[1]), _unescape(fields[4])))
    return out


def _unescape(text: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        text = text.replace(code, char)
    return text
