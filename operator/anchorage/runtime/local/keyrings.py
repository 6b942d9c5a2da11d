"""Start a sandbox with a kernel session keyring of its own, never the engine's.

Called by :mod:`.sandbox` for every run. A process inherits its parent's session keyring and possesses
whatever is in it; an agent started from the engine would possess the engine's. Before the sandbox's
first process is forked, the thread that forks it joins a new anonymous session keyring
(``keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)``): credentials, the session keyring among them, belong to
a thread in Linux, and a child gets the forking thread's. The fork happens in a short-lived thread made
for it, so that no engine thread ever changes keyring. The agent then holds a keyring that is empty and
its own; its host uid (:mod:`.uids`) owns no other keyring, and the seccomp filter denies the keyring
syscalls altogether.
"""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import threading
from dataclasses import dataclass
from typing import Any

from anchorage.runtime.local import seccomp

_JOIN_SESSION_KEYRING = 1


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def join_fresh_session() -> str:
    """Make the calling thread join a new anonymous session keyring; returns what happened, for the record."""
    number = seccomp.syscall_number("keyctl")
    if number is None:
        return "no keyctl on this architecture"
    if _libc().syscall(ctypes.c_long(number), ctypes.c_long(_JOIN_SESSION_KEYRING), ctypes.c_void_p(None)) >= 0:
        return "new anonymous session keyring"
    code = ctypes.get_errno()
    return f"not replaced: {os.strerror(code)}"  # ENOSYS: a kernel without keys has nothing to share


@dataclass
class Spawned:
    """The started process, and what the keyring step did (kept in the run's evidence)."""

    process: subprocess.Popen[bytes]
    keyring: str


def popen(argv: list[str], **options: Any) -> Spawned:
    """``subprocess.Popen(argv, **options)`` forked from a throwaway thread that joined a fresh session keyring."""
    box: dict[str, Any] = {}

    def start() -> None:
        try:
            box["keyring"] = join_fresh_session()
            box["process"] = subprocess.Popen(argv, **options)
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc

    thread = threading.Thread(target=start, name="sandbox-spawn", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return Spawned(box["process"], box["keyring"])
