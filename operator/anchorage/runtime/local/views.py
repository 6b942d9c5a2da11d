"""Read-only views of host folders, bound into sandboxes in place of the folders themselves.

Called by :mod:`.sandbox` for every host folder it binds read-only (the interpreter and its packages,
the synthetic ``/etc``, the in-sandbox helpers, task data, agent CLIs), when the engine runs as root.

Two reasons. A bind mount shows its source's path inside the sandbox: ``/proc/self/mountinfo`` gives,
for each mount, its root within its filesystem (``/work/checkout/.venv``), which tells an agent where
the checkout, the cache, and so the answer keys, live. And bubblewrap runs as an unprivileged host id
(:mod:`.uids`), which may not walk through folders like ``/root`` to reach a source.

A view is an overlayfs with the folder as its lower layer and, above it, an empty folder (overlayfs wants
two lower layers without an upper one) or a folder of empty files at paths to cover (the editable
installs' hooks that name the checkout: :mod:`.interpreter`), mounted read-only by the engine under a folder
that only sandboxes may walk through (``/tmp/anchorage-views-<owner tag>-*``, mode 0710, the sandbox
group). Its mountinfo line shows ``/`` as root and the layers as ``/proc/self/fd/N`` (the engine opens
the folders and names them by descriptor), so no host path appears. Reads go through with the engine's
rights; nothing can be written.

The gateway's sockets cannot be seen through overlayfs (a socket is found by its inode): each gets a hard
link in the same folder instead (:meth:`Views.file`), so sandboxes reach it wherever the engine made it. Each
trial has a socket of its own, so these links are counted and removed when their last sandbox ends
(:meth:`Views.release_file`), not kept for the engine's life.

Views are made on first use and kept for the engine's life (a few dozen at most: the interpreter, the
helpers, ``/etc``, each task's data and each agent CLI; least recently used ones are unmounted beyond
:data:`MAX_VIEWS`; a sandbox still starting with an evicted view fails before the agent runs, a
``sandbox_error`` that is retried), keyed by the folder's path and inode so a replaced folder gets a new view. Where
overlayfs is missing, a read-only bind mount is used instead (the folder is reachable, its path shows).
At exit the engine unmounts its views; :func:`sweep_stale` unmounts those of engines killed with -9.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from anchorage.runtime.local import leftovers, mounts, uids

SOURCE_PREFIX = "anchorage-view-"
FOLDER_PREFIX = "anchorage-views-"
MAX_VIEWS = 64


@dataclass(frozen=True)
class View:
    """What to bind for a host folder: ``path``; ``hidden`` tells whether its host path stays out of sight."""

    path: Path
    hidden: bool


class Views:
    """This engine's views (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._folder: Path | None = None
        self._views: OrderedDict[tuple[str, int, int, tuple[str, ...]], View] = OrderedDict()
        self._count = 0
        self._files: dict[tuple[int, int], Path] = {}
        self._file_users: dict[Path, int] = {}
        self._mounted_files: list[Path] = []
        self.overlay_problem = ""

    def of(self, source: Path, cover: tuple[str, ...] = ()) -> View:
        """The view of folder ``source``, the files at the ``cover`` paths (relative) shown empty; the folder itself
        when the engine is not root."""
        if os.geteuid() != 0:
            return View(source, False)
        real = os.path.realpath(source)
        info = os.stat(real)
        key = (real, info.st_dev, info.st_ino, cover)
        with self._lock:
            found = self._views.get(key)
            if found is not None:
                self._views.move_to_end(key)
                return found
            view = self._mount(real, cover)
            self._views[key] = view
            while len(self._views) > MAX_VIEWS:
                _, old = self._views.popitem(last=False)
                with contextlib.suppress(OSError):
                    mounts.umount(old.path)
                    old.path.rmdir()
            return view

    def file(self, source: Path) -> Path:
        """A path to the file ``source`` (a gateway socket) that sandboxes can reach: a hard link to it in the
        views folder (a read-only bind mount there when it is on another filesystem); ``source`` when not root.
        Each call is one use: :meth:`release_file` when the sandbox that took it has ended."""
        if os.geteuid() != 0:
            return source
        info = os.stat(source)
        key = (info.st_dev, info.st_ino)
        with self._lock:
            found = self._files.get(key)
            if found is not None:
                self._file_users[found] += 1
                return found
            self._count += 1
            target = self._base() / f"file-{self._count}"
            try:
                os.link(source, target)
            except OSError:
                target.touch(mode=0o600)
                mounts.mount(str(source), target, None, mounts.MS_BIND)
                self._mounted_files.append(target)
            self._files[key] = target
            self._file_users[target] = 1
            return target

    def release_file(self, target: Path) -> None:
        """One use of :meth:`file`'s ``target`` is over; the last one removes the link (or bind mount)."""
        if os.geteuid() != 0:
            return
        with self._lock:
            users = self._file_users.get(target)
            if users is None:
                return
            if users > 1:
                self._file_users[target] = users - 1
                return
            del self._file_users[target]
            self._files = {key: path for key, path in self._files.items() if path != target}
            mounted = target in self._mounted_files
            if mounted:
                self._mounted_files.remove(target)
            with contextlib.suppress(OSError):
                if mounted:
                    mounts.umount(target)
                target.unlink()

    def _base(self) -> Path:
        if self._folder is None:
            folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{leftovers.owner_tag()}-"))
            uids.grant_traverse(folder)
            (folder / "empty").mkdir(mode=0o555)
            self._folder = folder
        return self._folder

    def _mount(self, real: str, cover: tuple[str, ...]) -> View:
        base = self._base()
        self._count += 1
        target = base / str(self._count)
        target.mkdir(mode=0o755)
        top = base / "empty"
        if cover:  # an upper layer of empty files at the covered paths
            top = base / f"{self._count}-cover"
            for relative in cover:
                path = top / relative
                path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                path.touch(mode=0o644)
        if not self.overlay_problem:
            layer = os.open(real, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            empty = os.open(top, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                mounts.mount(SOURCE_PREFIX + leftovers.owner_tag(), target, "overlay",
                             mounts.MS_RDONLY | mounts.MS_NOSUID | mounts.MS_NODEV,
                             f"lowerdir=/proc/self/fd/{empty}:/proc/self/fd/{layer}")
                return View(target, True)
            except OSError as exc:
                self.overlay_problem = f"overlayfs: {exc.strerror}"
            finally:
                os.close(layer)
                os.close(empty)
        mounts.mount(real, target, None, mounts.MS_BIND)
        mounts.mount("none", target, None, mounts.MS_REMOUNT | mounts.MS_BIND | mounts.MS_RDONLY | mounts.MS_NOSUID
                     | mounts.MS_NODEV)
        return View(target, False)

    def close(self) -> None:
        """Unmount every view (at exit)."""
        with self._lock:
            views = list(self._views.values())
            files, mounted = list(self._files.values()), list(self._mounted_files)
            self._views.clear()
            self._files.clear()
            self._file_users.clear()
            self._mounted_files.clear()
            folder, self._folder = self._folder, None
        for path in mounted:
            with contextlib.suppress(OSError):
                mounts.umount(path)
        for path in files:
            with contextlib.suppress(OSError):
                path.unlink()
        for view in views:
            with contextlib.suppress(OSError):
                mounts.umount(view.path)
            with contextlib.suppress(OSError):
                view.path.rmdir()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)  # the cover layers, "empty" (nothing mounted is left there)


VIEWS = Views()
atexit.register(VIEWS.close)


def of(source: Path, cover: tuple[str, ...] = ()) -> View:
    """:meth:`Views.of` of this process's views."""
    return VIEWS.of(source, cover)


def file(source: Path) -> Path:
    """:meth:`Views.file` of this process's views."""
    return VIEWS.file(source)


def release_file(target: Path) -> None:
    """:meth:`Views.release_file` of this process's views."""
    VIEWS.release_file(target)


def sweep_stale() -> int:
    """Unmount the views of engines that are gone, and remove their folders; returns how many."""
    if os.geteuid() != 0:
        return 0
    base = Path(tempfile.gettempdir())
    removed = 0
    for _kind, _source, target in mounts.table():
        tag = _dead_owner(Path(target), base)
        if tag is not None:
            with contextlib.suppress(OSError):
                mounts.umount(target)
                removed += 1
    for folder in base.glob(f"{FOLDER_PREFIX}*"):
        dead = folder.is_dir() and not folder.is_symlink() and _dead_owner(folder / "x", base) is not None
        if dead and not any(target.startswith(f"{folder}/") for _, _, target in mounts.table()):
            shutil.rmtree(folder, ignore_errors=True)
    return removed


def _dead_owner(target: Path, base: Path) -> str | None:
    """The owner tag of a view under ``base`` whose engine is gone (None: not a view, or its engine runs)."""
    if target.parent.parent != base or not target.parent.name.startswith(FOLDER_PREFIX):
        return None
    tag = target.parent.name.removeprefix(FOLDER_PREFIX).rsplit("-", 1)[0]
    return None if leftovers.owner_alive(tag) else tag
