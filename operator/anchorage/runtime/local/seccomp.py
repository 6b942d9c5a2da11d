"""The sandbox's seccomp filter: :mod:`anchorage.runtime.seccomp_policy` compiled once into BPF, cached.

Called by :mod:`.sandbox` (bubblewrap loads the program from a file descriptor: ``--seccomp FD``; the
``unshare`` fallback loads it with ``inside/seccomp_exec.py``) and by :mod:`.keyrings` (the native number
of ``keyctl``). The compiler is libseccomp itself (``libseccomp.so.2``, a dependency of systemd and apt
on every Debian-like system), called through ``ctypes``: the few functions used here (create a filter,
add an architecture, resolve a syscall name, add a rule, export BPF, the version) are its stable 2.x C
API. The Python bindings were not used: Debian's ``python3-seccomp`` serves only the system interpreter
and the PyPI wrappers are unmaintained.

The compiled program is cached under ``<cache>/seccomp/<digest>.bpf``, the digest covering the policy
document, the machine and libseccomp's version; a run opens the file and hands the descriptor over.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import json
import os
import platform
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from anchorage.errors import InfrastructureError
from anchorage.runtime import seccomp_policy
from anchorage.runtime.local import identity

_ACT_ALLOW = 0x7FFF0000
_ACT_KILL_PROCESS = 0x80000000
_ACT_ERRNO = 0x00050000
_ATTR_ACT_BADARCH = 2
_CMP_MASKED_EQ = 7
_HINT = "install libseccomp (apt-get install libseccomp2 / dnf install libseccomp)"


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint), ("minor", ctypes.c_uint), ("micro", ctypes.c_uint)]


@functools.lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError as exc:
        raise InfrastructureError(f"the sandbox's seccomp filter needs libseccomp, which is not loadable: {exc}",
                                  hint=_HINT) from exc
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_arch_resolve_name.restype = ctypes.c_uint32
    lib.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_arch_exist.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_version.restype = ctypes.POINTER(_Version)
    return lib


def version() -> str:
    """libseccomp's version, e.g. ``2.5.4``."""
    found = _lib().seccomp_version().contents
    return f"{found.major}.{found.minor}.{found.micro}"


def syscall_number(name: str) -> int | None:
    """The native number of syscall ``name`` (None where this architecture has no such syscall)."""
    number = int(_lib().seccomp_syscall_resolve_name(name.encode()))
    return None if number < 0 else number


@dataclass(frozen=True)
class Compiled:
    """The cached program and what it covers on this machine (names no architecture here knows are skipped)."""

    path: Path
    digest: str
    skipped: tuple[str, ...]


def _check(code: int, what: str) -> None:
    if code < 0:
        raise InfrastructureError(f"libseccomp failed to {what}: {os.strerror(-code)}", hint=_HINT)


def _arches(machine: str) -> tuple[str, ...]:
    if machine not in seccomp_policy.ARCHITECTURES:
        raise InfrastructureError(f"the sandbox's seccomp filter knows no architectures for machine {machine!r}",
                                  hint=f"run on one of {sorted(seccomp_policy.ARCHITECTURES)}")
    return seccomp_policy.ARCHITECTURES[machine]


def _compile(out: int, machine: str) -> tuple[str, ...]:
    """Write the BPF program of the policy to descriptor ``out``; return the names no architecture knew."""
    lib = _lib()
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise InfrastructureError("libseccomp could not create a filter", hint=_HINT)
    try:
        _check(lib.seccomp_attr_set(ctx, _ATTR_ACT_BADARCH, _ACT_KILL_PROCESS), "set the bad-architecture action")
        tokens = []
        for arch in _arches(machine):
            token = lib.seccomp_arch_resolve_name(arch.encode())
            if token == 0:
                raise InfrastructureError(f"libseccomp {version()} does not know architecture {arch!r}", hint=_HINT)
            if lib.seccomp_arch_exist(ctx, token) != 0:
                _check(lib.seccomp_arch_add(ctx, token), f"add architecture {arch}")
            tokens.append(token)
        skipped: list[str] = []
        for denied in seccomp_policy.DENIED:
            action = _ACT_ERRNO | seccomp_policy.ERRNO_NUMBERS[denied.errno]
            known = [t for t in tokens if lib.seccomp_syscall_resolve_name_arch(t, denied.name.encode()) >= 0]
            if not known:
                skipped.append(denied.name)
                continue
            # rule_add (not _exact) takes the native number, or libseccomp's negative pseudo-number for a syscall
            # only a compat architecture has (vm86 on x86_64), and applies the rule on each architecture having it
            number = lib.seccomp_syscall_resolve_name(denied.name.encode())
            if not denied.any_bit_of:
                _check(lib.seccomp_rule_add_array(ctx, action, number, 0, None), f"deny {denied.name}")
            for bit in denied.any_bit_of:  # one rule per bit: rules are OR-ed (conditions within one are AND-ed)
                condition = _ArgCmp(0, _CMP_MASKED_EQ, bit, bit)
                _check(lib.seccomp_rule_add_array(ctx, action, number, 1, ctypes.pointer(condition)),
                       f"deny {denied.name} with bit {bit:#x}")
        _check(lib.seccomp_export_bpf(ctx, out), "export the BPF program")
        return tuple(skipped)
    finally:
        lib.seccomp_release(ctx)


_LOCK = threading.Lock()


def compiled(machine: str | None = None) -> Compiled:
    """The cached BPF program of the policy for this machine, compiled on first use."""
    machine = machine or platform.machine()
    with _LOCK:
        return _compiled(machine)


@functools.lru_cache(maxsize=4)
def _compiled(machine: str) -> Compiled:
    document = json.dumps({"policy": seccomp_policy.document(), "machine": machine, "libseccomp": version()},
                          sort_keys=True)
    digest = hashlib.sha256(document.encode()).hexdigest()[:24]
    folder = identity.cache_root() / "seccomp"
    path = folder / f"{digest}.bpf"
    skipped_path = folder / f"{digest}.skipped.json"
    if path.is_file() and skipped_path.is_file():
        with contextlib.suppress(OSError, ValueError):
            return Compiled(path, digest, tuple(json.loads(skipped_path.read_text())))
    folder.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(prefix=".building-", dir=folder)
    try:
        skipped = _compile(handle, machine)
        os.fchmod(handle, 0o644)
    finally:
        os.close(handle)
    skipped_path.write_text(json.dumps(list(skipped)))
    os.replace(staging, path)
    return Compiled(path, digest, skipped)


def open_program() -> int:
    """A fresh read-only descriptor of the compiled program, positioned at its start (bubblewrap reads it once)."""
    return os.open(compiled().path, os.O_RDONLY | os.O_CLOEXEC)
