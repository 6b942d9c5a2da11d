"""Ports for the programs the dev cluster and the tests start, picked so nothing else takes them before they listen.

A port the kernel picks (bind to port 0) comes from its ephemeral range, which every outgoing connection on the
machine draws its own port from: free when checked, it can be some client's a moment later, before the program given
it binds it ("address already in use": a kube-apiserver met that in CI, with two clusters and a dozen clients
starting at once). :func:`free_port` picks at random below that range, where only programs that ask for a port by
number listen.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: Where ports are picked from, up to the start of the kernel's ephemeral range.
LOWEST = 10000
RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_pick = random.SystemRandom()


def ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (Linux's default, 32768, where it cannot be read)."""
    try:
        return int(RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now, outside the ephemeral range (the kernel's pick only if that range leaves none)."""
    high = ephemeral_start()
    for _ in range(200 if high > LOWEST else 0):
        port = _pick.randrange(LOWEST, high)
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
