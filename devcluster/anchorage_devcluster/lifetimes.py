"""Processes of the dev cluster end with whoever started them: a test run or ``anchorage dev cluster`` killed with -9
leaves no API server, etcd, registry or node behind.

Used as ``preexec_fn`` by every place that starts a cluster component (``controlplane``, ``addons``, ``realnode``,
``nodeprocs``). What such a process started in turn (a node's containers and their shims) is ended through the node's
cgroup instead (``nodeprocs.kill_cgroup``), when the slot is next cleaned (``network.Network.acquire``).
"""

from __future__ import annotations

import ctypes
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child before exec: SIGKILL it when the thread that started it ends."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
