"""Start a sandbox with a kernel session keyring of its own, never the engine's.

Called by :mod:`.sandbox` for every run. A process inherits its parent's session keyring and possesses
whatever is in it; an agent started from the engine would possess the engine's. Before the sandbox's
first process is forked, the thread that forks it joins a new anonymous session keyring
(``keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)``): credentials, the session keyring among them, belong to
a thread in Linux, and a child gets the forking thread's. The agent then holds a keyring that is empty
and its own; its host uid (:mod:`.uids`) owns no other keyring, and the seccomp filter denies the
keyring syscalls altogether.

Every sandbox is forked by one *spawner* thread that lives as long as the engine: no engine thread ever
changes keyring, and the parent-death signal bubblewrap asks for (``--die-with-parent``:
``PR_SET_PDEATHSIG``) fires when the thread that forked it exits — a thread made for each fork and gone
right after it would kill sandboxes that set the signal before it was gone.
"""

from __future__ import annotations

import ctypes
import functools
import os
import queue
import subprocess
import threading
from dataclasses import dataclass, field
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


@dataclass
class _Request:
    argv: list[str]
    options: dict[str, Any]
    done: threading.Event = field(default_factory=threading.Event)
    spawned: Spawned | None = None
    error: BaseException | None = None


class _Spawner:
    """The engine's one forking thread (started on first use; again in a forked child of the engine)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._owner = -1

    def popen(self, argv: list[str], options: dict[str, Any]) -> Spawned:
        with self._lock:
            if self._owner != os.getpid():
                self._requests = queue.SimpleQueue()
                threading.Thread(target=self._serve, args=(self._requests,), name="sandbox-spawner",
                                 daemon=True).start()
                self._owner = os.getpid()
            requests = self._requests
        request = _Request(argv, options)
        requests.put(request)
        request.done.wait()
        if request.error is not None:
            raise request.error
        assert request.spawned is not None
        return request.spawned

    @staticmethod
    def _serve(requests: queue.SimpleQueue[_Request]) -> None:
        while True:
            request = requests.get()
            try:
                keyring = join_fresh_session()
                request.spawned = Spawned(subprocess.Popen(request.argv, **request.options), keyring)
            except BaseException as exc:  # handed to the caller's thread
                request.error = exc
            finally:
                request.done.set()


_SPAWNER = _Spawner()


def popen(argv: list[str], **options: Any) -> Spawned:
    """``subprocess.Popen(argv, **options)`` forked by the spawner thread, in a fresh session keyring."""
    return _SPAWNER.popen(argv, options)
