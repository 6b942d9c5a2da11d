"""Load a compiled seccomp program, then become the given command (the ``unshare`` fallback's filter).

Run by the ``unshare`` sandbox as ``python3 -I -S seccomp_exec.py FD COMMAND ARGV...``, after ``chroot``
and ``setpriv`` (so as the agent's unprivileged id), before anything of the agent's: it reads the BPF
program bubblewrap would load with ``--seccomp FD`` (compiled by :mod:`anchorage.runtime.local.seccomp`)
from descriptor FD, sets ``no_new_privs`` and installs the filter, closes FD and execs COMMAND. Any
failure exits 125 before the start is reported: the platform's failure, never the agent's. Standard
library only: it never imports anchorage.
"""

from __future__ import annotations

import ctypes
import os
import sys

_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER = 1
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: seccomp_exec.py FD COMMAND ARGV...\n")
        return 125
    fd = int(argv[0])
    program = _read_all(fd)
    os.close(fd)
    if not program or len(program) % 8:
        sys.stderr.write(f"anchorage: the seccomp program on descriptor {fd} is malformed ({len(program)} bytes)\n")
        return 125
    number = _SYS_SECCOMP.get(os.uname().machine)
    if number is None:
        sys.stderr.write(f"anchorage: no seccomp syscall number known for {os.uname().machine}\n")
        return 125
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(
            ctypes.c_long(number), ctypes.c_long(_SECCOMP_SET_MODE_FILTER), ctypes.c_long(0), ctypes.byref(prog)) != 0:
        sys.stderr.write(f"anchorage: cannot install the seccomp filter: {os.strerror(ctypes.get_errno())}\n")
        return 125
    os.execvp(argv[1], argv[1:])
    return 125  # not reached: execvp raises on failure


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except OSError as exc:
        sys.stderr.write(f"anchorage: {exc}\n")
        sys.exit(125)
