"""The dev cluster's ports (``anchorage_devcluster.ports``): picked below the kernel's ephemeral range, where no
outgoing connection takes them between the pick and the program's bind, and never one that something holds."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from anchorage_devcluster import ports


def test_ports_are_picked_below_the_ephemeral_range_and_are_free() -> None:
    start = ports.ephemeral_start()
    picked = {ports.free_port() for _ in range(50)}
    assert all(ports.LOWEST <= port < start for port in picked), sorted(picked)
    assert len(picked) > 40  # at random, not one port handed out again and again
    for port in picked:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_held_port_is_never_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        held.listen()
        # a range of the held port and the one after it: the pick skips the held one
        monkeypatch.setattr(ports, "LOWEST", port)
        monkeypatch.setattr(ports, "ephemeral_start", lambda: port + 2)
        assert port not in {ports.free_port() for _ in range(20)}


def test_an_unreadable_range_falls_back_to_linuxs_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ports, "RANGE_FILE", tmp_path / "missing")
    assert ports.ephemeral_start() == 32768
    (tmp_path / "range").write_text("40000\t60999\n")
    monkeypatch.setattr(ports, "RANGE_FILE", tmp_path / "range")
    assert ports.ephemeral_start() == 40000
