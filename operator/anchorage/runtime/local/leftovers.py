"""What a local run leaves on the host, named after its owner so that a later run can remove it.

Called by :mod:`.cgroups` (trial cgroups), :mod:`.quotas` (tmpfs quota mounts), :mod:`.gatewaystart` (the
gateway's socket folder ``/tmp/anchorage-gw-*``); the engine sweeps at the start of every run
(``engine.sweep_leftovers``: each module's ``sweep_stale``, no import back into them from here). A run
removes its own things when it ends; an engine killed with -9 cannot, so each thing carries an *owner
tag* ``<pid>.<start time>`` (the start time, in clock ticks since boot, from ``/proc/<pid>/stat``, tells
a live owner from a recycled pid). :func:`owner_alive` says whether the owner still runs; sweepers
remove what belongs to dead owners only, so concurrent runs never touch each other's things.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import tempfile
from pathlib import Path

GATEWAY_PREFIX = "anchorage-gw-"
_TAG = re.compile(r"(\d+)\.(\d+)")


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: count from its closing parenthesis
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


@functools.lru_cache(maxsize=1)
def _own_tag(pid: int) -> str:
    return f"{pid}.{_start_time(pid) or 0}"


def owner_tag() -> str:
    """This process's tag, ``<pid>.<start time>``."""
    return _own_tag(os.getpid())


def owner_alive(tag: str) -> bool:
    """True when the process the tag names still runs (unparsable tags count as alive: never swept)."""
    match = _TAG.match(tag)
    if match is None:
        return True
    pid, start = int(match.group(1)), match.group(2)
    return _start_time(pid) == start


def gateway_folder() -> Path:
    """A fresh private folder for the local gateway's unix socket, tagged with this process."""
    return Path(tempfile.mkdtemp(prefix=f"{GATEWAY_PREFIX}{owner_tag()}-"))


def sweep_gateway_folders(tmp: Path | None = None) -> int:
    """Remove gateway socket folders of dead owners (also untagged ones of older versions, after an hour)."""
    import time

    base = tmp or Path(tempfile.gettempdir())
    removed = 0
    for folder in base.glob(f"{GATEWAY_PREFIX}*"):
        tag = folder.name.removeprefix(GATEWAY_PREFIX)
        stale = False
        if _TAG.match(tag):
            stale = not owner_alive(tag)
        else:
            with contextlib.suppress(OSError):
                stale = time.time() - folder.lstat().st_mtime > 3600
        if stale and folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)
            removed += not folder.exists()
    return removed
