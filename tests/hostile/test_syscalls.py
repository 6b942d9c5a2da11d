"""Hostile agents against the syscall surface: every syscall of the seccomp policy is refused in the sandbox.

A small ctypes probe calls each syscall of :data:`anchorage.runtime.seccomp_policy.DENIED` this machine
has natively (each in a forked child, so that one call's effect cannot change the next), with
arguments that are harmless whatever happens: null pointers, bad descriptors, the caller's own pid,
flag values that the policy denies. It runs inside the sandbox, where each must fail with exactly the
policy's errno, and once outside the sandbox as an unprivileged id without the filter: the calls that
get anything else there (a descriptor, success, EFAULT, EBADF, ...) show that the refusal inside is the
filter's, not a missing capability's. Harmless variants (``personality(PER_LINUX)``,
``unshare(CLONE_FS)``, fork, threads) keep working inside.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anchorage.runtime import seccomp_policy
from anchorage.runtime.local import sandbox, seccomp, uids
from anchorage.runtime.local.sandbox import SandboxLimits, SandboxSpec

pytestmark = pytest.mark.sandbox

PID = "PID"  # replaced by the probe's own pid
# Arguments per syscall (strings are passed as C strings). Defaults: zeros (null pointers, descriptor 0 reads).
ARGS: dict[str, list[int | str]] = {
    "keyctl": [0, -3, 0],                      # KEYCTL_GET_KEYRING_ID of the session keyring
    "io_uring_enter": [-1, 0, 0, 0, 0, 0], "io_uring_register": [-1, 0, 0, 0], "io_uring_setup": [1, 0],
    "userfaultfd": [1],                        # UFFD_USER_MODE_ONLY
    "perf_event_open": [0, 0, -1, -1, 0], "bpf": [5, 0, 0],
    "ptrace": [3, PID, 0, 0],                  # PTRACE_PEEKUSER of itself (not traced: ESRCH unfiltered)
    "process_vm_readv": [PID, 0, 0, 0, 0, 0], "process_vm_writev": [PID, 0, 0, 0, 0, 0],
    "kcmp": [PID, PID, 0, 0, 0], "pidfd_getfd": [-1, 0, 0], "process_madvise": [-1, 0, 0, 0, 0],
    "open_tree": [-100, "/", 0], "fspick": [-100, "/", 0], "fsopen": ["tmpfs", 0],
    "fsconfig": [-1, 0, 0, 0, 0], "fsmount": [-1, 0, 0], "move_mount": [-1, 0, -1, 0, 0],
    "mount_setattr": [-1, 0, 0, 0, 0], "chroot": ["/nonexistent"], "pivot_root": ["/nonexistent", "/nonexistent"],
    "setns": [-1, 0],
    "unshare": [0x10000000],                   # CLONE_NEWUSER
    "clone": [0x10000000 | 17, 0, 0, 0, 0],    # CLONE_NEWUSER | SIGCHLD
    "personality": [0x0040000],                # ADDR_NO_RANDOMIZE
    "kexec_file_load": [-1, -1, 0, 0, 0], "finit_module": [-1, 0, 0], "delete_module": ["anchorage_none", 0],
    "quotactl_fd": [-1, 0, 0, 0], "name_to_handle_at": [-100, "/", 0, 0, 0], "open_by_handle_at": [-1, 0, 0],
    "syslog": [10, 0, 0],                      # SYSLOG_ACTION_SIZE_BUFFER
    "fanotify_init": [0x200, 0],               # FAN_REPORT_FID: allowed to unprivileged users
    "iopl": [0], "ioperm": [0, 0, 0],          # lowering: allowed unfiltered
    "sysfs": [2, 0, 0], "ustat": [0, 0],
}
HARMLESS: dict[str, list[int | str]] = {
    "personality": [0],                        # PER_LINUX
    "unshare": [0x200],                        # CLONE_FS
}

PROBE = r"""
import ctypes, errno, json, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
def call(number, args):
    values = [ctypes.c_char_p(a.encode()) if isinstance(a, str) else ctypes.c_long(os.getpid() if a == "PID" else a)
              for a in args]
    return libc.syscall(ctypes.c_long(number), *values), ctypes.get_errno()
def isolated(number, args):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        me = os.getpid()
        rc, code = call(number, args)
        if os.getpid() == me:  # a clone that succeeded: only the caller reports
            os.write(write, (("ok" if rc >= 0 else errno.errorcode.get(code, str(code)))).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    answer = os.read(read, 100).decode()
    os.close(read)
    return answer
table = json.loads(sys.argv[1])
out = {"denied": {n: isolated(nr, a) for n, (nr, a) in table["denied"].items()},
       "harmless": {n: isolated(nr, a) for n, (nr, a) in table["harmless"].items()}}
t = threading.Thread(target=lambda: None); t.start(); t.join()
out["thread"] = "ok"
out["seccomp"] = [l.split(":")[1].strip() for l in open("/proc/self/status") if l.startswith("Seccomp:")][0]
print(json.dumps(out))
"""


def _table() -> dict[str, dict[str, tuple[int, list[int | str]]]]:
    denied: dict[str, tuple[int, list[int | str]]] = {}
    for item in seccomp_policy.DENIED:
        number = seccomp.syscall_number(item.name)
        if number is not None:  # a syscall of the compat ABIs only (vm86) cannot be called natively
            denied[item.name] = (number, ARGS.get(item.name, [0, 0, 0, 0, 0]))
    harmless = {name: (seccomp.syscall_number(name) or -1, args) for name, args in HARMLESS.items()}
    return {"denied": denied, "harmless": harmless}


def _expected() -> dict[str, str]:
    return {item.name: item.errno for item in seccomp_policy.DENIED}


def _probe_in_sandbox(mech: sandbox.Mechanism, tmp_path: Path) -> dict[str, object]:
    folders = {name: tmp_path / name for name in ("results", "logs")}
    for folder in folders.values():
        folder.mkdir()
    spec = SandboxSpec(argv=[sandbox.sandbox_python(), "-c", PROBE, json.dumps(_table())],
                       results_dir=folders["results"], logs_dir=folders["logs"],
                       limits=SandboxLimits(timeout_sec=60, memory_mb=512, pids=256))
    result = sandbox.run(spec, mechanism=mech)
    out = (folders["logs"] / "stdout.log").read_text()
    assert result.outcome == "exited" and result.exit_code == 0, (result, out,
                                                                   (folders["logs"] / "stderr.log").read_text())
    found: dict[str, object] = json.loads(out)
    return found


def _probe_unfiltered() -> dict[str, object]:
    """The same probe outside any sandbox, as an agents' id when root (no capability, no filter)."""
    prefix: list[str] = []
    lease = uids.lease() if os.geteuid() == 0 else None
    if lease is not None:
        prefix = ["setpriv", f"--reuid={lease.uid}", f"--regid={lease.gid}", "--clear-groups", "--"]
    try:
        done = subprocess.run([*prefix, sys.executable, "-I", "-S", "-c", PROBE, json.dumps(_table())],
                              capture_output=True, text=True, timeout=60, check=True, cwd="/")
    finally:
        if lease is not None:
            lease.release()
    found: dict[str, object] = json.loads(done.stdout)
    return found


def test_every_denied_syscall_is_refused_with_the_policys_errno(mech: sandbox.Mechanism, tmp_path: Path) -> None:
    inside = _probe_in_sandbox(mech, tmp_path)
    expected = _expected()
    denied = inside["denied"]
    assert isinstance(denied, dict)
    assert len(denied) >= 50, denied  # the native syscalls of the list (x86_64: 63, all but vm86, vm86old, umount, stime)
    assert {name: denied[name] for name in denied} == {name: expected[name] for name in denied}
    assert inside["harmless"] == {"personality": "ok", "unshare": "ok"}
    assert inside["thread"] == "ok" and inside["seccomp"] == "2"


def test_the_refusals_are_the_filters_not_missing_capabilities(mech: sandbox.Mechanism, tmp_path: Path) -> None:
    """Outside the sandbox, without the filter, an unprivileged process gets something else from many of them."""
    inside, outside = _probe_in_sandbox(mech, tmp_path), _probe_unfiltered()
    assert isinstance(inside["denied"], dict) and isinstance(outside["denied"], dict)
    expected = _expected()
    differs = sorted(name for name, got in outside["denied"].items() if got != expected[name])
    # io_uring, userfaultfd, process_vm_readv, kcmp, open_tree, personality, keyctl, unshare(CLONE_NEWUSER), ...
    assert len(differs) >= 15, outside
    for name in ("keyctl", "process_vm_readv", "kcmp", "personality", "open_tree", "ptrace", "clone3"):
        assert name in differs, (name, outside["denied"])
    for name in differs:
        assert inside["denied"][name] == expected[name], (name, inside["denied"][name], outside["denied"][name])
    assert outside["seccomp"] == "0"
