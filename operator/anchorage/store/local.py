"""``file://`` artifact store: a folder on disk (the local engine's default).

Writes go to a temporary file in the same folder and are renamed into place, so a reader never sees
half a file (an exclusive write hard-links it into place instead: ``link`` fails when the name exists, so the
create-once check and the write are one step); ``describe`` computes the SHA-256 on demand (no sidecar files
pollute the run folder).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from anchorage.store.base import AlreadyStored, ArtifactStore, check_key, sha256_file


class FileStore(ArtifactStore):
    """Keys are paths relative to ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._root = root.as_posix()
        self.uri = root.resolve().as_uri()

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def _file(self, key: str) -> str:
        """:meth:`_path` as a string (the hot paths' ``os`` calls take it without ``pathlib``'s costs)."""
        return f"{self._root}/{check_key(key)}"

    @staticmethod
    def _temporary(target: str | Path) -> tuple[int, str]:
        """A new temporary file beside ``target`` (its folders made when missing: asked only then)."""
        folder = os.path.dirname(target)
        try:
            return tempfile.mkstemp(dir=folder, prefix=".tmp-")
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
            return tempfile.mkstemp(dir=folder, prefix=".tmp-")

    def _write_atomically(self, target: str | Path, write: Callable[[int], None], *, exclusive: bool = False) -> None:
        """``write`` the content to a temporary file's descriptor, fsync it, rename it into place (plain ``os``
        calls: ``put_bytes`` is the operator's hot path); a failed write leaves no temporary file. ``exclusive``:
        hard-link it into place instead (``FileExistsError`` when the name exists) and drop the temporary name."""
        fd, tmp = self._temporary(target)
        try:
            try:
                write(fd)
                os.fsync(fd)
            finally:
                os.close(fd)
            if exclusive:
                try:
                    os.link(tmp, target)
                finally:
                    os.unlink(tmp)
            else:
                os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def put_bytes(self, key: str, data: bytes, *, content_type: str | None = None, exclusive: bool = False) -> None:
        target = self._file(key)
        try:
            self._write_atomically(target, lambda fd: _write_all(fd, data), exclusive=exclusive)
        except FileExistsError:
            if not exclusive:
                raise
            if self.get_bytes(key) != data:
                raise AlreadyStored(f"{self.uri_of(key)} already exists with other content") from None

    def put_file(self, key: str, path: Path) -> None:
        target = self._path(key)
        if target.resolve() == path.resolve():
            return
        with path.open("rb") as source:
            self._write_atomically(target, lambda fd: _copy(source, fd))

    def get_bytes(self, key: str) -> bytes:
        with open(self._file(key), "rb") as handle:
            return handle.read()

    def get_tail(self, key: str, window: int) -> tuple[bytes, int]:
        with self._path(key).open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - max(window, 0)))
            return handle.read(max(window, 0)), size

    def get_file(self, key: str, path: Path) -> None:
        with self._path(key).open("rb") as source:
            self._write_atomically(path, lambda fd: _copy(source, fd))

    def exists(self, key: str) -> bool:
        return os.path.isfile(self._file(key))

    def list(self, prefix: str = "") -> list[str]:
        return sorted(key for key, _ in self._files(prefix))

    def _files(self, prefix: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """(key, directory entry) of every file under ``prefix`` (as ``Path.rglob`` found them: files, symlinks to
        files included, in folders that are not symlinks; not the temporary files of writes under way), walked with
        ``os.scandir`` (its entries know their type without a ``stat``: a tenth of ``rglob``'s cost)."""
        base = self._path(prefix).as_posix() if prefix.strip("/") else self.root.as_posix()
        skip = len(self.root.as_posix()) + 1
        folders = [base]
        while folders:
            try:
                entries = os.scandir(folders.pop())
            except (FileNotFoundError, NotADirectoryError):
                continue
            with entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                    elif entry.is_file() and not entry.name.startswith(".tmp-"):
                        yield entry.path[skip:], entry

    def described(self, prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """As :meth:`ArtifactStore.described`, from one walk of the folder (sizes from its entries)."""
        return ((key, {"size": entry.stat().st_size, "sha256": sha256_file(Path(entry.path))})
                for key, entry in sorted(self._files(prefix), key=lambda item: item[0]))

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def describe(self, key: str) -> dict[str, Any]:
        path = self._path(key)
        return {"size": path.stat().st_size, "sha256": sha256_file(path)}


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _copy(source: BinaryIO, fd: int) -> None:
    with os.fdopen(fd, "wb", closefd=False) as handle:
        shutil.copyfileobj(source, handle)
