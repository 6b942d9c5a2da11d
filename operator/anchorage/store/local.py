"""``file://`` artifact store: a folder on disk (the local engine's default).

Writes go to a temporary file in the same folder and are renamed into place, so a reader never sees
half a file; ``describe`` computes the SHA-256 on demand (no sidecar files pollute the run folder).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from anchorage.store.base import COMPLETE_MARKER, ArtifactStore, check_key, join, sha256_file


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

    def _write_atomically(self, target: Path, writer: Any) -> None:
        fd, tmp = self._temporary(target)
        try:
            with os.fdopen(fd, "wb") as handle:
                writer(handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def put_bytes(self, key: str, data: bytes, *, content_type: str | None = None) -> None:
        """Write ``data`` to a temporary file, fsync it, rename it into place (the operator's hot path: plain
        ``os`` calls, no file object)."""
        target = self._file(key)
        fd, tmp = self._temporary(target)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def put_file(self, key: str, path: Path) -> None:
        target = self._path(key)
        if target.resolve() == path.resolve():
            return
        with path.open("rb") as source:
            self._write_atomically(target, lambda handle: shutil.copyfileobj(source, handle))

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
            self._write_atomically(path, lambda handle: shutil.copyfileobj(source, handle))

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

    def mark_complete(self, prefix: str) -> None:
        """As :meth:`ArtifactStore.mark_complete`, the manifest from one walk of the folder (sizes from its entries)."""
        prefix = check_key(prefix)
        marker = join(prefix, COMPLETE_MARKER)
        objects = {key: {"size": entry.stat().st_size, "sha256": sha256_file(Path(entry.path))}
                   for key, entry in sorted(self._files(prefix), key=lambda item: item[0]) if key != marker}
        self.put_bytes(marker, json.dumps({"completed_at": time.time(), "objects": objects}, indent=1).encode("utf-8"),
                       content_type="application/json")

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def describe(self, key: str) -> dict[str, Any]:
        path = self._path(key)
        return {"size": path.stat().st_size, "sha256": sha256_file(path)}
