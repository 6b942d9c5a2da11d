"""Who the agent is inside the sandbox, and the minimal ``/etc`` that names it instead of the host's.

Called by :mod:`anchorage.runtime.local.sandbox` (once per process per identity; the folder is
content-addressed and reused across runs).

Inside, the agent is always ``agent``, uid/gid :data:`SANDBOX_ID`, with no capabilities. On the host it
is (:class:`Identity`):

* with bubblewrap started by root, an unprivileged id of its own from the agents' subordinate range
  (:mod:`.uids`): bubblewrap itself runs as that id, so the agent's user namespace maps
  :data:`SANDBOX_ID` to it and nothing to host root; started by anyone else, that user;
* with the ``unshare`` fallback (root, no user namespace), an id of the same range, as is.

The synthetic ``/etc`` holds ``passwd``/``group`` naming the agent (home ``/root``, the writable
tmpfs HOME), ``hosts``, ``resolv.conf`` (no DNS server: the only reachable endpoint is the model
gateway on 127.0.0.1), ``nsswitch.conf``, ``hostname``, and copies of the few host files programs
need to start and speak TLS: the dynamic linker's cache, the CA bundle, ``openssl.cnf``,
``protocols``/``services``, Debian's ``/etc/python3.*`` (the interpreter's ``sitecustomize`` points
there) and the ``alternatives`` symlinks ``/usr/bin`` relies on. Nothing else of the host's ``/etc``
(``shadow``, ``gshadow``, ``machine-id``, ``pip.conf``, ``gitconfig``, ``npmrc``, ...) is visible.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

SANDBOX_ID = 1000
"""uid and gid of the ``agent`` user inside the sandbox."""

AGENT_USER = "agent"
HOME = "/root"
HOSTNAME = "anchorage"

_COPIED_FILES = ("ld.so.cache", "ssl/certs/ca-certificates.crt", "ssl/openssl.cnf", "protocols", "services")
_COPIED_LINKS = ("localtime", "os-release")
_COPIED_DIRS_GLOB = "python3*"


@dataclass(frozen=True)
class Identity:
    """The agent's ids as the agent sees them (``uid``/``gid``) and as the host sees them (``host_*``)."""

    uid: int
    gid: int
    host_uid: int
    host_gid: int
    user_namespace: bool

    def describe(self) -> str:
        inside = f"{AGENT_USER} {self.uid}:{self.gid}"
        if self.user_namespace:
            return f"{inside} in its own user namespace (host {self.host_uid}:{self.host_gid}), no capabilities"
        return f"{inside} (host {self.host_uid}:{self.host_gid}, no user namespace), no capabilities"


def generated_files(uid: int, gid: int) -> dict[str, str]:
    """The files written (not copied) into the synthetic ``/etc``."""
    return {
        "passwd": (f"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
                   f"{AGENT_USER}:x:{uid}:{gid}:Anchorage agent:{HOME}:/bin/sh\n"
                   "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"),
        "group": f"root:x:0:\n{AGENT_USER}:x:{gid}:\nnogroup:x:65534:\n",
        "hosts": f"127.0.0.1\tlocalhost {HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n",
        "resolv.conf": "# No DNS in the Anchorage sandbox: the only reachable endpoint is the model gateway\n"
                       "# (OPENAI_BASE_URL, on 127.0.0.1).\noptions timeout:1 attempts:1\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nservices: files\n"
                         "protocols: files\n",
        "hostname": f"{HOSTNAME}\n",
    }


def _host_entries(host_etc: Path) -> tuple[dict[str, bytes], dict[str, str]]:
    """(relative path → bytes) to copy and (relative path → symlink target) to recreate."""
    files: dict[str, bytes] = {}
    links: dict[str, str] = {}
    for name in _COPIED_FILES:
        source = host_etc / name
        if source.is_file():
            files[name] = source.read_bytes()
    for directory in sorted(host_etc.glob(_COPIED_DIRS_GLOB)):
        if directory.is_dir() and not directory.is_symlink():
            for item in sorted(directory.iterdir()):
                if item.is_file() and not item.is_symlink():
                    files[f"{directory.name}/{item.name}"] = item.read_bytes()
    for name in _COPIED_LINKS:
        if (host_etc / name).is_symlink():
            links[name] = os.readlink(host_etc / name)
    alternatives = host_etc / "alternatives"
    if alternatives.is_dir():
        for item in sorted(alternatives.iterdir()):
            if item.is_symlink():
                links[f"alternatives/{item.name}"] = os.readlink(item)
    return files, links


def cache_root() -> Path:
    """``$ANCHORAGE_CACHE``, else ``$XDG_CACHE_HOME/anchorage``, else ``~/.cache/anchorage``."""
    explicit = os.environ.get("ANCHORAGE_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "anchorage"


@functools.lru_cache(maxsize=8)
def synthetic_etc(uid: int, gid: int, host_etc: Path = Path("/etc")) -> Path:
    """The synthetic ``/etc`` for an agent with these ids: built once, content-addressed, read-only."""
    generated = {name: text.encode() for name, text in generated_files(uid, gid).items()}
    copied, links = _host_entries(host_etc)
    files = {**copied, **generated}
    digest = hashlib.sha256()
    for name, data in sorted(files.items()):
        digest.update(b"f\0" + name.encode() + b"\0" + hashlib.sha256(data).digest())
    for name, target in sorted(links.items()):
        digest.update(b"l\0" + name.encode() + b"\0" + target.encode())
    final = cache_root() / "sandbox-etc" / digest.hexdigest()[:24]
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=final.parent))
    try:
        for name, data in files.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o644)
        for name, target in links.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, path)
        for directory in [staging, *(p for p in staging.rglob("*") if p.is_dir() and not p.is_symlink())]:
            directory.chmod(0o755)
        try:
            staging.rename(final)
        except OSError:  # another process built the same folder first
            if not final.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final
