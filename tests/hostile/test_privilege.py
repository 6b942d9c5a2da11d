"""Hostile agents against privilege: capabilities, remounts, sysctls, cgroups, host secrets.

Each attacker tries, reports what happened on stdout (``WON ...`` would be a successful attack), then
writes the task's honest answer, so the honest record is ``Succeeded``/``completed`` with O-Eval 1.0:
the attempt changed neither the host nor how the trial is classified.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from anchorage.runtime.local import interpreter, sandbox, uids
from anchorage.tasks import Task
from hostile.conftest import RunAttack, write_expected

pytestmark = pytest.mark.sandbox

CTYPES = """
import ctypes, os, errno
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    rc = getattr(libc, name)(*args)
    return "ok" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
"""


def _honest(attack_run: RunAttack, code: str, mech: sandbox.Mechanism, task: Task, **kw: object):  # type: ignore[no-untyped-def]
    result = attack_run(CTYPES + code + "\n" + write_expected(task), mech, **kw)
    assert result.phase_reason == ("Succeeded", "completed"), (result.record, result.stderr)
    assert result.record["score"]["o_eval"] == 1.0
    assert result.record["sandbox"]["started"] is True
    assert not any(line.startswith("WON") for line in result.stdout.splitlines()), result.stdout
    return result


def test_no_root_no_capabilities_no_new_namespaces(attack: RunAttack, mech: sandbox.Mechanism,
                                                    smoke_task: Task) -> None:
    code = """
import getpass
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
print("uid", os.getuid(), os.geteuid(), "gid", os.getgid(), "user", getpass.getuser(), "home", os.path.expanduser("~"))
for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"):
    print(key, status[key].strip())
try:
    os.setuid(0); print("WON setuid")
except OSError as exc:
    print("setuid refused", exc.errno)
print("unshare-user", call("unshare", 0x10000000))           # CLONE_NEWUSER
print("unshare-mount", call("unshare", 0x00020000))          # CLONE_NEWNS
print("mount-tmpfs", call("mount", b"none", b"/tmp", b"tmpfs", 0, None))
print("chroot", call("chroot", b"/tmp"))
print("mknod", call("mknod", b"/tmp/sda", 0o60600, os.makedev(8, 0)))
open(os.path.expanduser("~/.agentrc"), "w").write("home is writable")
print("home-write ok")
"""
    result = _honest(attack, code, mech, smoke_task)
    out = result.stdout
    ids = uids.id_range()
    line = next(x for x in out.splitlines() if x.startswith("uid "))
    uid = int(line.split()[1])
    assert uid == 1000 if mech == "bwrap" else ids.start < uid < ids.start + ids.count, line  # unshare: host ids
    assert f"uid {uid} {uid} gid {uid} user agent home /root" in out, out
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert f"{key} 0000000000000000" in out, out
    assert "NoNewPrivs 1" in out
    for attempt in ("unshare-user", "unshare-mount", "mount-tmpfs", "chroot", "mknod"):
        line = next(x for x in out.splitlines() if x.startswith(attempt))
        assert not line.endswith(" ok"), line
    assert "setuid refused" in out and "home-write ok" in out
    assert "agent" in result.record["sandbox"]["user"] and "no capabilities" in result.record["sandbox"]["user"]


def test_read_only_binds_cannot_be_remounted(attack: RunAttack, mech: sandbox.Mechanism, smoke_task: Task) -> None:
    prefix = interpreter.layout().binds[-1].target  # the interpreter's packages, in the sandbox
    host_prefix = interpreter.layout().binds[-1].source
    code = f"""
MS_REMOUNT, MS_BIND = 32, 4096
for target in ("/usr", "/etc", "/root/data", "{prefix}", "/"):
    print("remount", target, call("mount", None, target.encode(), None, MS_REMOUNT | MS_BIND, None))
    print("umount", target, call("umount2", target.encode(), 2))
    try:
        open(target.rstrip("/") + "/evil", "w").write("x"); print("WON write", target)
    except OSError as exc:
        print("write refused", target, exc.errno)
"""
    result = _honest(attack, code, mech, smoke_task)
    for line in result.stdout.splitlines():
        if line.startswith(("remount", "umount")):
            assert not line.endswith(" ok"), line
    assert result.stdout.count("write refused") == 5
    assert not (smoke_task.data_dir / "evil").exists() and not Path(host_prefix, "evil").exists()


def test_sysctls_are_read_only(attack: RunAttack, mech: sandbox.Mechanism, smoke_task: Task) -> None:
    before = Path("/proc/sys/vm/stat_interval").read_text()
    code = """
for name in ("vm/stat_interval", "kernel/ns_last_pid", "net/ipv4/ip_forward", "kernel/core_pattern"):
    path = "/proc/sys/" + name
    try:
        value = open(path).read().strip()
        open(path, "w").write(value)
        print("WON sysctl", name)
    except OSError as exc:
        print("sysctl refused", name, exc.errno)
try:
    open("/proc/sysrq-trigger", "w").write("h"); print("WON sysrq")
except OSError as exc:
    print("sysrq refused", exc.errno)
"""
    result = _honest(attack, code, mech, smoke_task)
    assert result.stdout.count("sysctl refused") == 4, result.stdout
    assert Path("/proc/sys/vm/stat_interval").read_text() == before


def test_cgroup_limits_cannot_be_raised_from_inside(attack: RunAttack, mech: sandbox.Mechanism,
                                                     smoke_task: Task) -> None:
    code = """
import glob
print("cgroupfs visible", sorted(glob.glob("/sys/fs/cgroup/*")))
print("mount-cgroup", call("mount", b"cgroup", b"/tmp", b"cgroup", 0, b"memory"))
print("mount-cgroup2", call("mount", b"cgroup2", b"/tmp", b"cgroup2", 0, None))
own = open("/proc/self/cgroup").read()
print("own cgroup", own.replace(chr(10), " | "))
for path in glob.glob("/proc/self/root/sys/fs/cgroup/**/memory.limit_in_bytes", recursive=True):
    try:
        open(path, "w").write("-1"); print("WON raised", path)
    except OSError as exc:
        print("refused", path, exc.errno)
"""
    result = _honest(attack, code, mech, smoke_task, limits={"memoryMB": 256, "pids": 100})
    assert "cgroupfs visible []" in result.stdout
    for line in result.stdout.splitlines():
        if line.startswith("mount-cgroup"):
            assert not line.endswith(" ok"), line
    enforced = result.record["sandbox"]["enforced"]
    after = result.record["sandbox"]["evidence"].get("cgroup_limits_after", {})
    if "cgroup" in enforced.get("memory", ""):  # the limits read back after the run are the ones set
        assert after["memory"] == str(256 * 1024 * 1024)
        assert after["pids"] == "100"
    assert result.record["sandbox"]["limits"]["memory_mb"] == 256


def test_host_secrets_are_not_visible(attack: RunAttack, mech: sandbox.Mechanism, smoke_task: Task) -> None:
    code = """
import glob
for path in ("/etc/shadow", "/etc/gshadow", "/etc/machine-id", "/etc/pip.conf", "/etc/npmrc", "/etc/gitconfig",
             "/root/.ssh", "/proc/1/root/etc/shadow", "/var/run/secrets", "/run/secrets", "/home"):
    print("exists" if os.path.exists(path) else "absent", path)
print("etc", sorted(os.listdir("/etc")))
print("passwd", open("/etc/passwd").read().replace(chr(10), " | "))
print("environ", sorted(os.environ))
"""
    result = _honest(attack, code, mech, smoke_task)
    out = result.stdout
    assert "exists" not in " ".join(line.split()[0] for line in out.splitlines() if line.startswith(("exists", "absent")))
    assert "shadow" not in next(line for line in out.splitlines() if line.startswith("etc "))
    passwd = next(line for line in out.splitlines() if line.startswith("passwd "))
    assert "agent:x:" in passwd and passwd.count("|") == 3  # root, agent, nobody: not the host's accounts
    environ = next(line for line in out.splitlines() if line.startswith("environ "))
    for leaked in ("SUDO", "SSH_AUTH_SOCK", "AWS_", "ANCHORAGE_GATEWAY_TOKEN_SECRET", "KUBECONFIG"):
        assert leaked not in environ, environ
