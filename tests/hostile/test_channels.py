"""Hostile agents against isolation between trials: two concurrent trials cannot pass a token.

A writer trial puts a token everywhere a second trial running at the same time could look: the kernel
keyrings, ``/tmp``, ``/dev/shm``, HOME, an abstract and a path unix socket, TCP and UDP on loopback,
System V shared memory, message queues and semaphores, a POSIX message queue, and its own command
line. It first checks that each channel works *within* its own sandbox (so a refusal across trials is
the isolation's, not a broken attempt); the reader, started with it, looks in every one of them,
repeatedly, until the writer has been up for several seconds. The two run as different host ids.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest

from anchorage.runtime.local import sandbox
from anchorage.runtime.local.sandbox import SandboxLimits, SandboxResult, SandboxSpec

pytestmark = pytest.mark.sandbox

COMMON = r"""
import ctypes, ctypes.util, errno, json, os, socket, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
rt = ctypes.CDLL(ctypes.util.find_library("rt") or "librt.so.1", use_errno=True)
KEY = 0x414E4348  # System V key both trials use
PORT = 47311
ADD_KEY, KEYCTL = {add_key}, {keyctl}
def err():
    return errno.errorcode.get(ctypes.get_errno(), "?")
"""

WRITER = COMMON + r"""
token = sys.argv[1]
report = {}
def attempt(name, make, check):
    try:
        make()
        report[name] = "self-ok" if token in check() else "self-unreadable"
    except Exception as exc:
        report[name] = f"refused {type(exc).__name__} {exc}"
def keyring(ring):
    def make():
        if libc.syscall(ADD_KEY, b"user", b"anchorage-channel", token.encode(), len(token), ring) < 0:
            raise OSError(err())
    return make
for name, ring in (("keyring-session", -3), ("keyring-user", -4), ("keyring-user-session", -5)):
    attempt(name, keyring(ring), lambda: open("/proc/keys").read())
for path in ("/tmp/channel", "/dev/shm/channel", os.path.expanduser("~/channel")):
    attempt(path, lambda p=path: open(p, "w").write(token), lambda p=path: open(p).read())
def serve(sock):
    while True:
        conn, _ = sock.accept(); conn.sendall(token.encode()); conn.close()
def stream(family, address):
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind(address)
    sock.listen(8)
    threading.Thread(target=serve, args=(sock,), daemon=True).start()
def fetch(family, address):
    with socket.socket(family, socket.SOCK_STREAM) as c:
        c.settimeout(2); c.connect(address); return c.recv(200).decode()
attempt("abstract-socket", lambda: stream(socket.AF_UNIX, "\0anchorage-channel"),
        lambda: fetch(socket.AF_UNIX, "\0anchorage-channel"))
attempt("path-socket", lambda: stream(socket.AF_UNIX, "/tmp/channel.sock"), lambda: fetch(socket.AF_UNIX, "/tmp/channel.sock"))
attempt("tcp", lambda: stream(socket.AF_INET, ("127.0.0.1", PORT)), lambda: fetch(socket.AF_INET, ("127.0.0.1", PORT)))
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
def udp_serve():
    while True:
        _, peer = udp.recvfrom(100); udp.sendto(token.encode(), peer)
def udp_make():
    udp.bind(("127.0.0.1", PORT)); threading.Thread(target=udp_serve, daemon=True).start()
def udp_fetch():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as c:
        c.settimeout(2); c.sendto(b"?", ("127.0.0.1", PORT)); return c.recv(200).decode()
attempt("udp", udp_make, udp_fetch)
libc.shmat.restype = ctypes.c_void_p
def shm_make():
    ident = libc.shmget(KEY, 4096, 0o1666)  # IPC_CREAT | 0666
    if ident < 0: raise OSError(err())
    addr = libc.shmat(ident, None, 0); ctypes.memmove(addr, token.encode(), len(token))
def shm_read():
    ident = libc.shmget(KEY, 0, 0)
    if ident < 0: raise OSError(err())
    return ctypes.string_at(libc.shmat(ident, None, 0), len(token)).decode()
attempt("sysv-shm", shm_make, shm_read)
class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 100)]
def msg_make():
    ident = libc.msgget(KEY, 0o1666)
    for _ in range(2):
        if ident < 0 or libc.msgsnd(ident, ctypes.byref(Msg(1, token.encode())), 100, 0) < 0: raise OSError(err())
def msg_read():
    ident, m = libc.msgget(KEY, 0), Msg()
    if ident < 0 or libc.msgrcv(ident, ctypes.byref(m), 100, 0, 0o4000) < 0: raise OSError(err())  # IPC_NOWAIT
    return m.mtext.decode()
attempt("sysv-msg", msg_make, msg_read)
def sem_make():
    ident = libc.semget(KEY, 1, 0o1666)
    if ident < 0 or libc.semctl(ident, 0, 16, 4242) < 0: raise OSError(err())  # SETVAL
def sem_read():
    ident = libc.semget(KEY, 1, 0)
    return token if ident >= 0 and libc.semctl(ident, 0, 12) == 4242 else ""  # GETVAL
attempt("sysv-sem", sem_make, sem_read)
rt.mq_open.restype = ctypes.c_int
def mq_make():
    q = rt.mq_open(b"/anchorage-channel", os.O_CREAT | os.O_RDWR, 0o666, None)
    if q < 0: raise OSError(err())
    for _ in range(2):
        if rt.mq_send(q, token.encode(), len(token), 0) < 0: raise OSError(err())
def mq_read():
    q = rt.mq_open(b"/anchorage-channel", os.O_RDONLY | os.O_NONBLOCK)
    buf = ctypes.create_string_buffer(8192)
    if q < 0 or rt.mq_receive(q, buf, 8192, None) < 0: raise OSError(err())
    return buf.value.decode()
attempt("posix-mq", mq_make, mq_read)
print(json.dumps(report), flush=True)
time.sleep(float(sys.argv[2]))
"""

READER = COMMON + r"""
token, until = sys.argv[1][::-1], time.monotonic() + float(sys.argv[2])  # not in its own command line
found, looked = set(), 0
def probe(name, read):
    try:
        if token in read():
            found.add(name)
    except Exception:
        pass
def msg_read():
    class Msg(ctypes.Structure):
        _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 100)]
    ident, m = libc.msgget(KEY, 0), Msg()
    return m.mtext.decode() if ident >= 0 and libc.msgrcv(ident, ctypes.byref(m), 100, 0, 0o4000) >= 0 else ""
def shm_read():
    libc.shmat.restype = ctypes.c_void_p
    ident = libc.shmget(KEY, 0, 0)
    return ctypes.string_at(libc.shmat(ident, None, 0), 200).decode(errors="replace") if ident >= 0 else ""
def mq_read():
    q = rt.mq_open(b"/anchorage-channel", os.O_RDONLY | os.O_NONBLOCK)
    buf = ctypes.create_string_buffer(8192)
    return buf.value.decode() if q >= 0 and rt.mq_receive(q, buf, 8192, None) >= 0 else ""
def fetch(family, kind, address):
    with socket.socket(family, kind) as c:
        c.settimeout(0.5)
        if kind == socket.SOCK_DGRAM:
            c.sendto(b"?", address); return c.recv(200).decode()
        c.connect(address); return c.recv(200).decode()
def proc_everything():
    text = []
    for pid in os.listdir("/proc"):
        for part in ("cmdline", "environ"):
            try: text.append(open(f"/proc/{pid}/{part}", "rb").read().decode(errors="replace"))
            except OSError: pass
    return "\n".join(text)
def search_keyrings():
    out = open("/proc/keys").read()
    for ring in (-3, -4, -5):
        buf = ctypes.create_string_buffer(4096)
        if libc.syscall(KEYCTL, 11, ring, buf, 4096) > 0:
            out += buf.raw.decode(errors="replace")
    return out
while time.monotonic() < until:
    looked += 1
    probe("keyrings", search_keyrings)
    for path in ("/tmp/channel", "/dev/shm/channel", os.path.expanduser("~/channel")):
        probe(path, lambda p=path: open(p).read())
    probe("abstract-socket", lambda: fetch(socket.AF_UNIX, socket.SOCK_STREAM, "\0anchorage-channel"))
    probe("path-socket", lambda: fetch(socket.AF_UNIX, socket.SOCK_STREAM, "/tmp/channel.sock"))
    probe("tcp", lambda: fetch(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", PORT)))
    probe("udp", lambda: fetch(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", PORT)))
    probe("sysv-shm", shm_read)
    probe("sysv-msg", msg_read)
    probe("sysv-sem", lambda: token if libc.semctl(libc.semget(KEY, 1, 0), 0, 12) == 4242 else "")
    probe("posix-mq", mq_read)
    probe("proc", proc_everything)
    time.sleep(0.3)
print(json.dumps({"found": sorted(found), "rounds": looked}), flush=True)
"""


def _spec(tmp_path: Path, name: str, code: str, *args: str) -> SandboxSpec:
    folders = {kind: tmp_path / name / kind for kind in ("results", "logs")}
    for folder in folders.values():
        folder.mkdir(parents=True)
    return SandboxSpec(argv=[sandbox.sandbox_python(), "-c", code, *args], results_dir=folders["results"],
                       logs_dir=folders["logs"], limits=SandboxLimits(timeout_sec=60, memory_mb=512, pids=256))


def test_two_concurrent_trials_cannot_pass_a_token(mech: sandbox.Mechanism, tmp_path: Path) -> None:
    from anchorage.runtime.local import seccomp

    numbers = {"add_key": seccomp.syscall_number("add_key"), "keyctl": seccomp.syscall_number("keyctl")}
    token = f"tok-{uuid.uuid4().hex}"
    writer = _spec(tmp_path, "writer", WRITER.replace("{add_key}", str(numbers["add_key"]))
                   .replace("{keyctl}", str(numbers["keyctl"])), token, "14")
    reader = _spec(tmp_path, "reader", READER.replace("{add_key}", str(numbers["add_key"]))
                   .replace("{keyctl}", str(numbers["keyctl"])), token[::-1], "10")
    results: dict[str, SandboxResult] = {}

    def run(name: str, spec: SandboxSpec) -> None:
        results[name] = sandbox.run(spec, mechanism=mech)

    threads = [threading.Thread(target=run, args=item) for item in (("writer", writer), ("reader", reader))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert set(results) == {"writer", "reader"}
    logs = {name: [(spec.logs_dir / f).read_text() for f in ("stdout.log", "stderr.log")]
            for name, spec in (("writer", writer), ("reader", reader))}
    assert results["reader"].exit_code == 0 and results["writer"].exit_code == 0, (results, logs)
    wrote = json.loads((writer.logs_dir / "stdout.log").read_text().splitlines()[0])
    read = json.loads((reader.logs_dir / "stdout.log").read_text())
    # every channel but the keyrings works inside the writer's own sandbox: the reader's misses are isolation
    for channel in ("/tmp/channel", "/dev/shm/channel", "abstract-socket", "path-socket", "tcp", "udp", "sysv-shm",
                    "sysv-msg", "sysv-sem", "posix-mq"):
        assert wrote[next(k for k in wrote if k.endswith(channel))] == "self-ok", (channel, wrote)
    for ring in ("keyring-session", "keyring-user", "keyring-user-session"):
        assert wrote[ring].startswith("refused"), wrote
    assert read["rounds"] >= 5 and read["found"] == [], read
    assert results["writer"].user != results["reader"].user or mech == "none", (results["writer"].user,
                                                                                 results["reader"].user)
