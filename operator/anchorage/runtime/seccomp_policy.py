"""The syscalls an evaluation agent never needs, denied in its sandbox: one list for both runtimes.

Used by :mod:`anchorage.runtime.local.seccomp` (compiled with libseccomp into the BPF program bubblewrap
loads with ``--seccomp``) and by the pod builders (:func:`oci_profile`, the same list as an OCI seccomp
profile for ``seccompProfile: Localhost``), so the two never drift. ``python -m
anchorage.runtime.seccomp_policy`` prints that profile (to install it on nodes under the kubelet's
seccomp root).

The filter is a deny-list over a default of *allow*: a program an agent runs (Python with numpy,
Node CLIs, bash, compilers) keeps every ordinary syscall, and what is denied is what no evaluation
needs and what widens the kernel surface or reaches beyond the sandbox: the kernel keyring, io_uring,
userfaultfd, perf events, BPF, debugging other processes, the whole mount API, new namespaces,
kexec/modules/reboot/swap, clock setting, the kernel log, file handles, accounting and quotas, and
obsolete calls. References (read, not copied): Docker's default profile (what it allows only with a
capability, and io_uring, removed from it in 2023) and gVisor's syscall table (what a sandbox kernel
leaves out). Decisions, each in :data:`DENIED`:

* the action is ``EPERM`` ("not allowed", what programs see for a missing capability), except where
  ``ENOSYS`` ("not implemented") makes programs fall back: io_uring (libuv and others then use
  threads) and ``clone3`` (glibc then uses ``clone``, whose flags a filter can read);
* ``clone``/``unshare`` are denied only with a namespace flag (``unshare(CLONE_FS)`` is harmless);
* ``personality`` is denied only with a flag that changes memory layout or exec semantics
  (``ADDR_NO_RANDOMIZE``, ``READ_IMPLIES_EXEC``, ``MMAP_PAGE_ZERO``, ...); ``PER_LINUX``,
  ``PER_LINUX32`` and ``UNAME26`` stay allowed. The query form (``0xffffffff``) sets every bit and
  is therefore refused as well (libseccomp cannot express "none of these bits unless all of them").
* The compat ABIs of the architecture (x86 and x32 beside x86_64, arm beside aarch64) get the same
  rules; a syscall of any other architecture kills the process.

A deny-list allows syscalls newer than itself; the sandbox's other layers (no capabilities, an
unprivileged host uid, no further user namespaces) still hold for them, and this list is reviewed
with each kernel the project tests on.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, Literal

Errno = Literal["EPERM", "ENOSYS"]
ERRNO_NUMBERS: dict[Errno, int] = {"EPERM": 1, "ENOSYS": 38}

# Namespace flags of clone(2)/unshare(2). CLONE_NEWTIME (0x80) shares its bit with clone's exit-signal
# byte, so it is checked for unshare only (clone3, which could carry it, is refused as a whole).
_NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
_NEWTIME = 0x00000080
# personality(2) flags that change how memory is laid out or how programs are executed.
_PERSONALITY_FLAGS = (0x0040000, 0x0080000, 0x0100000, 0x0200000, 0x0400000, 0x0800000, 0x1000000,
                      0x2000000, 0x4000000, 0x8000000)


@dataclass(frozen=True)
class Denied:
    """One syscall the sandbox refuses; with ``any_bit_of``, only when argument 0 has one of those bits."""

    name: str
    why: str
    errno: Errno = "EPERM"
    any_bit_of: tuple[int, ...] = ()


def _group(names: str, why: str, errno: Errno = "EPERM") -> list[Denied]:
    return [Denied(name, why, errno) for name in names.split()]


DENIED: tuple[Denied, ...] = (
    *_group("add_key request_key keyctl", "kernel keyring: a channel between trials and to the engine's keys"),
    *_group("io_uring_setup io_uring_enter io_uring_register", "io_uring: large kernel surface; callers fall back",
            "ENOSYS"),
    *_group("userfaultfd", "userfaultfd: stalls kernel accesses (exploit primitive)"),
    *_group("perf_event_open", "perf events: side channels and kernel surface"),
    *_group("bpf", "BPF programs: kernel surface"),
    *_group("ptrace process_vm_readv process_vm_writev kcmp pidfd_getfd process_madvise",
            "reading or steering other processes (the sandbox's init included)"),
    *_group("mount umount umount2 pivot_root chroot move_mount open_tree fsopen fsconfig fsmount fspick "
            "mount_setattr", "the mount API: the sandbox's file tree is fixed"),
    *_group("setns", "joining other namespaces"),
    Denied("unshare", "new namespaces", any_bit_of=(*_NAMESPACE_FLAGS, _NEWTIME)),
    Denied("clone", "new namespaces", any_bit_of=_NAMESPACE_FLAGS),
    Denied("clone3", "new namespaces (its flags are behind a pointer; glibc falls back to clone)", "ENOSYS"),
    Denied("personality", "flags that disable ASLR or make data executable", any_bit_of=_PERSONALITY_FLAGS),
    *_group("kexec_load kexec_file_load reboot", "replacing or stopping the kernel"),
    *_group("init_module finit_module delete_module create_module query_module get_kernel_syms",
            "kernel modules"),
    *_group("memfd_secret", "memory hidden from the kernel's own inspection"),
    *_group("swapon swapoff", "swap"),
    *_group("acct quotactl quotactl_fd", "accounting and disk quotas"),
    *_group("lookup_dcookie open_by_handle_at name_to_handle_at", "file handles: opening files by inode"),
    *_group("clock_settime clock_adjtime adjtimex settimeofday stime", "setting the clock"),
    *_group("syslog", "the kernel log"),
    *_group("fanotify_init", "watching other processes' file accesses"),
    *_group("nfsservctl uselib _sysctl ustat sysfs vm86 vm86old iopl ioperm vhangup",
            "obsolete or hardware-level calls"),
)
"""Every denied syscall with its reason and action. Names an architecture lacks are skipped there."""

# libseccomp / OCI names of the architectures filtered together (the native one and its compat ABIs).
ARCHITECTURES: dict[str, tuple[str, ...]] = {
    "x86_64": ("x86_64", "x86", "x32"),
    "aarch64": ("aarch64", "arm"),
}
_OCI_ARCH = {"x86_64": "SCMP_ARCH_X86_64", "x86": "SCMP_ARCH_X86", "x32": "SCMP_ARCH_X32",
             "aarch64": "SCMP_ARCH_AARCH64", "arm": "SCMP_ARCH_ARM"}


def document() -> dict[str, Any]:
    """The policy as plain data: what the compiled filter is cached by, and what tests read."""
    return {"default": "allow", "other_architectures": "kill",
            "denied": [{"name": d.name, "errno": d.errno, "any_bit_of": list(d.any_bit_of)} for d in DENIED]}


def oci_profile(machine: str = "x86_64") -> dict[str, Any]:
    """The same policy as an OCI seccomp profile (containerd/CRI-O ``seccompProfile: Localhost``)."""
    if machine not in ARCHITECTURES:
        raise ValueError(f"no seccomp architectures known for machine {machine!r}; known: {sorted(ARCHITECTURES)}")
    rules: list[dict[str, Any]] = []
    for errno in ERRNO_NUMBERS:
        plain = [d.name for d in DENIED if d.errno == errno and not d.any_bit_of]
        if plain:
            rules.append({"names": plain, "action": "SCMP_ACT_ERRNO", "errnoRet": ERRNO_NUMBERS[errno]})
    for denied in DENIED:
        for bit in denied.any_bit_of:  # one rule per bit: rules are OR-ed, conditions within a rule AND-ed
            rules.append({"names": [denied.name], "action": "SCMP_ACT_ERRNO", "errnoRet": ERRNO_NUMBERS[denied.errno],
                          "args": [{"index": 0, "value": bit, "valueTwo": bit, "op": "SCMP_CMP_MASKED_EQ"}]})
    return {"defaultAction": "SCMP_ACT_ALLOW",
            "architectures": [_OCI_ARCH[arch] for arch in ARCHITECTURES[machine]],
            "syscalls": rules}


def main(argv: list[str]) -> int:
    """``python -m anchorage.runtime.seccomp_policy [MACHINE]``: print the OCI profile."""
    import platform

    machine = argv[0] if argv else platform.machine()
    try:
        profile = oci_profile(machine)
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stdout.write(json.dumps(profile, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
