"""The host's processes seen through ``/proc``: what a sandbox left running after its trial ended (the sandbox's own
tests in ``test_sandbox.py``, the hostile agents' in ``tests/hostile/``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def processes(cmdline: Callable[[str], bool]) -> list[str]:
    """The pids of the host's processes whose command line (``/proc/<pid>/cmdline``: each argument ended by a NUL)
    ``cmdline`` accepts; one that ends while it is read counts as an empty line."""
    return [pid for pid in os.listdir("/proc") if pid.isdigit() and cmdline(_cmdline(pid))]


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""
