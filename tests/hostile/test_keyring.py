"""Hostile agents against the kernel keyring: the engine's session keyring, root's user keyring, other trials.

Before each attack the test puts real keys, from outside the sandbox, into the engine's own session
keyring and into root's user keyring (the engine is this test process). The attacker looks for them in
``/proc/keys``, reads, describes and links them by id, and adds keys of its own into those keyrings;
afterwards the test checks from outside that the keyrings hold exactly what it put there.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from anchorage.runtime.local import keyrings, sandbox, seccomp, uids
from anchorage.tasks import Task
from hostile.conftest import RunAttack, write_expected

pytestmark = pytest.mark.sandbox

KEY_SPEC_SESSION, KEY_SPEC_USER = -3, -4
KEYCTL_GET_KEYRING_ID, KEYCTL_REVOKE, KEYCTL_UNLINK, KEYCTL_READ = 0, 3, 9, 11


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _keyctl(*args: int) -> int:
    number = seccomp.syscall_number("keyctl")
    assert number is not None
    result = int(_libc().syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args]))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def _add_key(description: str, payload: bytes, keyring: int) -> int:
    number = seccomp.syscall_number("add_key")
    assert number is not None
    result = int(_libc().syscall(ctypes.c_long(number), b"user", description.encode(), payload,
                                 ctypes.c_size_t(len(payload)), ctypes.c_long(keyring)))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def _ring_contents(ring: int) -> set[int]:
    buffer = ctypes.create_string_buffer(4096)
    number = seccomp.syscall_number("keyctl")
    assert number is not None
    size = int(_libc().syscall(ctypes.c_long(number), ctypes.c_long(KEYCTL_READ), ctypes.c_long(ring), buffer,
                               ctypes.c_long(4096)))
    assert size >= 0, os.strerror(ctypes.get_errno())
    return {int.from_bytes(buffer.raw[i:i + 4], "little", signed=True) for i in range(0, min(size, 4096), 4)}


@dataclass
class Planted:
    """Keys the test planted outside the sandbox: ids, descriptions, secrets, and the rings' ids."""

    session_ring: int
    user_ring: int
    session_key: int
    user_key: int
    marker: str
    secret: bytes


@pytest.fixture
def planted() -> Iterator[Planted]:
    try:
        session_ring = _keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION, 1)
        user_ring = _keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER, 1)
    except OSError as exc:
        pytest.skip(f"no kernel keyrings here: {exc}")
    marker = f"anchorage-test-{uuid.uuid4().hex[:8]}"
    secret = f"secret-{uuid.uuid4().hex}".encode()
    session_key = _add_key(f"{marker}-session", secret, session_ring)
    user_key = _add_key(f"{marker}-user", secret, user_ring)
    try:
        yield Planted(session_ring, user_ring, session_key, user_key, marker, secret)
    finally:
        for key, ring in ((session_key, session_ring), (user_key, user_ring)):
            for op, args in ((KEYCTL_UNLINK, (key, ring)), (KEYCTL_REVOKE, (key,))):
                with contextlib.suppress(OSError):
                    _keyctl(op, *args)


ATTACK = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
KEYCTL, ADD_KEY = {keyctl}, {add_key}
def res(rc):
    return "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
def keyctl(*args):
    return res(libc.syscall(ctypes.c_long(KEYCTL), *[ctypes.c_long(a) for a in args]))
buf = ctypes.create_string_buffer(4096)
proc_keys = open("/proc/keys").read()
print("proc-keys-shows-marker", "{marker}" in proc_keys)
for name, key in (("session", {session_key}), ("user", {user_key})):
    rc = libc.syscall(ctypes.c_long(KEYCTL), ctypes.c_long(11), ctypes.c_long(key), buf, ctypes.c_long(4096))
    print("read", name, res(rc))
    if rc > 0 and {secret!r} in buf.raw:
        print("WON read", name)
    print("describe", name, keyctl(6, key, ctypes.addressof(buf), 4096))
    print("link", name, keyctl(8, key, -3))
for name, ring in (("session-ring", {session_ring}), ("user-ring", {user_ring}), ("own-session", -3), ("own-user", -4)):
    rc = libc.syscall(ctypes.c_long(ADD_KEY), b"user", b"{marker}-agent", b"planted-by-agent", ctypes.c_size_t(16),
                      ctypes.c_long(ring))
    print("add_key", name, res(rc))
    print("read-ring", name, keyctl(11, ring, ctypes.addressof(buf), 4096))
name = ctypes.create_string_buffer(b"_ses")
print("join-named", keyctl(1, ctypes.addressof(name)))
"""


def test_no_keyring_outside_its_own_can_be_read_or_written(attack: RunAttack, mech: sandbox.Mechanism,
                                                           smoke_task: Task, planted: Planted) -> None:
    code = ATTACK.format(keyctl=seccomp.syscall_number("keyctl"), add_key=seccomp.syscall_number("add_key"),
                         marker=planted.marker, secret=planted.secret, session_key=planted.session_key,
                         user_key=planted.user_key, session_ring=planted.session_ring, user_ring=planted.user_ring)
    before = {ring: _ring_contents(ring) for ring in (planted.session_ring, planted.user_ring)}
    result = attack(code + write_expected(smoke_task), mech)
    out = result.stdout
    assert result.phase_reason == ("Succeeded", "completed"), (result.record, result.stderr)
    assert "proc-keys-shows-marker False" in out, out
    assert "WON" not in out, out
    attempts = [line for line in out.splitlines() if line.startswith(("read", "describe", "link", "add_key", "join"))]
    assert len(attempts) == 2 * 3 + 4 * 2 + 1, out
    for line in attempts:  # every keyring syscall is refused by the seccomp filter, even on the agent's own rings
        assert line.rsplit(" ", 1)[1] == "EPERM", line
    # from outside: the engine's and root's keyrings hold exactly what the test put there
    assert {ring: _ring_contents(ring) for ring in before} == before
    assert planted.session_key in before[planted.session_ring] and planted.user_key in before[planted.user_ring]
    assert result.record["sandbox"]["evidence"].get("session_keyring") == "new anonymous session keyring"


def test_each_sandbox_starts_in_a_session_keyring_of_its_own(planted: Planted) -> None:
    """The keyring layer alone (no sandbox, no filter): the spawned process's session keyring is new and empty,
    another spawn gets another, and the engine's thread keeps its own."""
    search = (f"libc.syscall({seccomp.syscall_number('keyctl')}, 10, -3, b'user', b'{planted.marker}-session', 0)")
    code = ("import ctypes, errno; libc = ctypes.CDLL(None, use_errno=True); "
            f"print(libc.syscall({seccomp.syscall_number('keyctl')}, 0, -3, 0)); "
            f"print({search}, errno.errorcode.get(ctypes.get_errno()))")
    seen = []
    for _ in range(2):
        spawned = keyrings.popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        out, _ = spawned.process.communicate(timeout=30)
        ring, found, error = out.decode().split()
        seen.append(int(ring))
        assert spawned.keyring == "new anonymous session keyring"
        assert (found, error) == ("-1", "ENOKEY"), out  # the engine's session key is not in the child's keyrings
    assert len(set(seen)) == 2 and planted.session_ring not in seen, (seen, planted.session_ring)
    assert _keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION, 0) == planted.session_ring
    kind, description = ctypes.create_string_buffer(b"user"), ctypes.create_string_buffer(f"{planted.marker}-session".encode())
    search_here = _keyctl(10, KEY_SPEC_SESSION, ctypes.addressof(kind), ctypes.addressof(description), 0)
    assert search_here == planted.session_key  # the same search finds it from the engine: the test can fail


@pytest.mark.skipif(os.geteuid() != 0, reason="the agents' host ids are used when the engine runs as root")
def test_the_agents_host_id_cannot_reach_roots_keys_even_without_the_filter(planted: Planted) -> None:
    """The uid layer alone: a process of a leased agent id, in a fresh session keyring and with keyctl allowed,
    can neither read nor describe the engine's session key or root's user key, nor add to their keyrings."""
    number, add = seccomp.syscall_number("keyctl"), seccomp.syscall_number("add_key")
    code = f"""
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(4096)
def res(rc):
    return "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
for key in ({planted.session_key}, {planted.user_key}):
    print("read", res(libc.syscall({number}, 11, key, buf, 4096)), "describe", res(libc.syscall({number}, 6, key, buf, 4096)))
for ring in ({planted.session_ring}, {planted.user_ring}):
    print("add", res(libc.syscall({add}, b"user", b"x", b"y", 1, ring)))
print("own", res(libc.syscall({add}, b"user", b"x", b"y", 1, -3)))
"""
    before = {ring: _ring_contents(ring) for ring in (planted.session_ring, planted.user_ring)}
    lease = uids.lease()
    try:
        spawned = keyrings.popen(["setpriv", f"--reuid={lease.uid}", f"--regid={lease.gid}", "--clear-groups",
                                  sys.executable, "-I", "-S", "-c", code], stdout=subprocess.PIPE)
        out = spawned.process.communicate(timeout=30)[0].decode()
    finally:
        lease.release()
    lines = out.splitlines()
    assert lines[:2] == ["read EACCES describe EACCES"] * 2, out
    assert lines[2:4] == ["add EACCES"] * 2, out
    assert lines[4] == "own ok", out  # keyctl itself works here: the refusals above are the id's, not a filter's
    assert {ring: _ring_contents(ring) for ring in before} == before


def test_a_sandbox_that_asks_for_its_parents_death_signal_outlives_its_start() -> None:
    """bubblewrap's --die-with-parent is PR_SET_PDEATHSIG, which fires when the *thread* that forked it exits: the
    spawner thread forks every sandbox and lives on, so a process that sets the signal at once is never killed."""
    spawned = [keyrings.popen(["setpriv", "--pdeathsig", "KILL", "--", "/bin/sh", "-c", "sleep 0.5; echo alive"],
                              stdout=subprocess.PIPE) for _ in range(12)]
    outputs = [item.process.communicate(timeout=30)[0] for item in spawned]
    assert outputs == [b"alive\n"] * 12, outputs
    assert [item.process.returncode for item in spawned] == [0] * 12
