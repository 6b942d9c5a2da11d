"""The virtualenv's bytecode, compiled once per lock and reused by every clean clone (``make venv``).

Compiling the virtualenv's site-packages (the sandbox sees it read-only, so it must hold its bytecode, as pip's
installs do) took ~26 of the ~38 s of ``make venv`` on every clean clone; uv links the packages' files from its own
cache, so their sources keep the same modification times from one virtualenv to the next, and their ``.pyc`` files
(validated by those times) can be reused. This links the cached ``.pyc`` files of the same lock into the new
virtualenv, compiles whatever is missing or stale (all of it the first time) and, the first time, keeps what it
compiled:

    python tools/bytecode.py SITE_PACKAGES CACHE_FOLDER

``CACHE_FOLDER`` names the lock (``make venv`` passes ``<cache>/bytecode/<the virtualenv's stamp>``); the Python
implementation's cache tag is added to it. The three newest locks are kept. Nothing here decides what is imported:
Python checks every ``.pyc`` against its source before using it, so a stale or foreign one is only recompiled.
"""

from __future__ import annotations

import compileall
import contextlib
import errno
import os
import shutil
import sys
from pathlib import Path

KEEP = 3  # locks whose bytecode is kept


def _link(source: Path, target: Path) -> None:
    """``target`` as a hard link of ``source`` (a copy across file systems)."""
    try:
        os.link(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        shutil.copy2(source, target)


def restore(cache: Path, site: Path) -> int:
    """Link each cached ``.pyc`` whose package folder exists in ``site`` and which ``site`` lacks; how many."""
    linked = 0
    for pyc in cache.rglob("*.pyc"):
        target = site / pyc.relative_to(cache)
        if target.exists() or not target.parent.parent.is_dir():
            continue
        target.parent.mkdir(exist_ok=True)
        _link(pyc, target)
        linked += 1
    return linked


def save(site: Path, cache: Path) -> None:
    """Keep every ``.pyc`` of ``site`` as ``cache`` (written aside, then renamed: a concurrent run's copy wins)."""
    partial = cache.with_name(f"{cache.name}.partial-{os.getpid()}")
    for pyc in site.rglob("*.pyc"):
        target = partial / pyc.relative_to(site)
        target.parent.mkdir(parents=True, exist_ok=True)
        _link(pyc, target)
    try:
        partial.rename(cache)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)


def prune(folder: Path, keep: int = KEEP) -> None:
    """Remove all but the ``keep`` most recently used locks' bytecode (and leftovers of interrupted saves)."""
    entries = sorted((p for p in folder.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in [p for p in entries if ".partial-" in p.name] + [p for p in entries if ".partial-" not in p.name][keep:]:
        shutil.rmtree(old, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python tools/bytecode.py SITE_PACKAGES CACHE_FOLDER", file=sys.stderr)
        return 2
    site = Path(argv[0])
    if not site.is_dir():
        print(f"tools/bytecode.py: {site} is not a folder (the virtualenv's site-packages)", file=sys.stderr)
        return 2
    cache = Path(argv[1])
    cache = cache.with_name(f"{cache.name}-{sys.implementation.cache_tag}")
    cache.parent.mkdir(parents=True, exist_ok=True)
    reused = cache.is_dir()
    linked = restore(cache, site) if reused else 0
    # what is missing or stale; a package's file that is not valid Python (a template, a test of another
    # version) stays uncompiled, as uv's and pip's compilation leave it
    compileall.compile_dir(str(site), quiet=2, workers=0)
    if reused:
        with contextlib.suppress(OSError):
            os.utime(cache)  # most recently used
    else:
        save(site, cache)
    prune(cache.parent)
    print(f"bytecode: {linked} files reused from {cache}" if reused else f"bytecode: compiled, kept as {cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
