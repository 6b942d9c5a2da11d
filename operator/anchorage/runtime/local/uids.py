"""Host ids of sandboxed agents: a subordinate id range, one id per running sandbox.

Called by :mod:`.sandbox` (a lease per run, when the engine runs as root), :mod:`.quotas`, :mod:`.views`
and the gateway socket's folder (:func:`grant_traverse`).

An engine running as root never lets an agent run as host root, in any namespace: bubblewrap is
started as an unprivileged host uid, so the agent's uid inside (``agent``, 1000) maps to that id and
nothing maps to host uid 0. Each running sandbox gets an id of its own, so that nothing the kernel
keeps per user (the user keyring, inotify and user-namespace counts, ``RLIMIT_NPROC``, pending
signals) is shared between two trials.

The range: the ``anchorage`` entry of ``/etc/subuid`` (and ``/etc/subgid``) when the administrator made
one, else the fixed range :data:`DEFAULT_START` + :data:`DEFAULT_COUNT` (0x70000000..0x7000FFFF:
above the container ranges systemd and ``useradd`` hand out, below the ids systemd reserves, used by no
distribution). The first id of the range is not given to agents: it is the *sandbox group*, which the
engine gives to the folders bubblewrap must walk through (mode ``0710``, group :func:`sandbox_group`),
so that the unprivileged bubblewrap reaches them while other host users do not. Ids named in
``/etc/passwd`` or ``/etc/group`` are skipped.

A lease is an exclusive ``flock`` on ``/run/anchorage/uids/<id>.lock``, held for the run: two engines
on one host never share an id, and the lock goes with the process if it is killed.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import itertools
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from anchorage.errors import InfrastructureError

DEFAULT_START = 0x7000_0000
DEFAULT_COUNT = 65_536
RANGE_OWNER = "anchorage"
LOCK_DIR = Path("/run/anchorage/uids")


@dataclass(frozen=True)
class IdRange:
    """``count`` host ids from ``start`` (uids and the same gids), and where the range came from."""

    start: int
    count: int
    source: str


def _subordinate(path: Path) -> tuple[int, int] | None:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[0] == RANGE_OWNER and parts[1].isdigit() and parts[2].isdigit():
            return int(parts[1]), int(parts[2])
    return None


@functools.lru_cache(maxsize=1)
def id_range() -> IdRange:
    """The agents' id range (see the module docstring)."""
    uids, gids = _subordinate(Path("/etc/subuid")), _subordinate(Path("/etc/subgid"))
    if uids is not None and gids is not None:
        if uids != gids:
            raise InfrastructureError(f"/etc/subuid gives {RANGE_OWNER!r} {uids[0]}+{uids[1]} but /etc/subgid "
                                      f"{gids[0]}+{gids[1]}", hint="give the same range in both files")
        if uids[1] < 2:
            raise InfrastructureError(f"the {RANGE_OWNER!r} range in /etc/subuid holds fewer than 2 ids",
                                      hint="give it at least 2 (one for the sandbox group, one per running sandbox)")
        return IdRange(uids[0], uids[1], "/etc/subuid and /etc/subgid")
    return IdRange(DEFAULT_START, DEFAULT_COUNT, "the built-in default range")


def sandbox_group() -> int:
    """The gid folders bubblewrap walks through belong to (the range's first id)."""
    return id_range().start


@functools.lru_cache(maxsize=1)
def _named_ids() -> frozenset[int]:
    named: set[int] = set()
    for path in (Path("/etc/passwd"), Path("/etc/group")):
        with contextlib.suppress(OSError):
            for line in path.read_text().splitlines():
                parts = line.split(":")
                if len(parts) > 2 and parts[2].isdigit():
                    named.add(int(parts[2]))
    return frozenset(named)


@dataclass
class Lease:
    """One host id held for one sandboxed run; :meth:`release` (or the process's end) gives it back."""

    uid: int
    gid: int
    _fd: int

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


_NEXT = itertools.count()
_NEXT_LOCK = threading.Lock()


def lease() -> Lease:
    """An id of the range no other running sandbox holds (round robin, so ids are reused last)."""
    ids = id_range()
    LOCK_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
    slots = ids.count - 1
    with _NEXT_LOCK:
        first = next(_NEXT) % slots
    for step in range(slots):
        uid = ids.start + 1 + (first + step) % slots
        if uid in _named_ids():
            continue
        fd = os.open(LOCK_DIR / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return Lease(uid, uid, fd)
    raise InfrastructureError(f"all {slots} sandbox ids of {ids.source} ({ids.start}+{ids.count}) are in use",
                              hint=f"run fewer trials at once, or give {RANGE_OWNER!r} a larger range in "
                              "/etc/subuid and /etc/subgid")


def grant_traverse(folder: Path) -> None:
    """Let sandboxes (only them) walk through ``folder``: group :func:`sandbox_group`, mode ``0710``."""
    os.chown(folder, -1, sandbox_group())
    os.chmod(folder, 0o710)
