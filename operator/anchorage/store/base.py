"""The artifact store interface shared by ``file://`` and ``s3://`` stores, and its completion marker.

Callers (the local engine, the operator, ``anchorage report``) use keys relative to the store's root
(``<campaign>/<trial>/artifacts/result.json``). A prefix is *complete* when its ``_COMPLETE`` object
exists; :meth:`ArtifactStore.upload_dir` writes it only after every file was stored and verified,
so a failed or partial upload is never taken for a finished result. The marker holds a manifest
(key → size, sha256) of what was complete at that moment.

``put_bytes(..., exclusive=True)`` is a create-once write: it stores the object only when the key is free
(``If-None-Match: *`` on S3, a hard link on disk), so of two writers of the same record exactly one wins and
the other gets :class:`AlreadyStored` (a ``FileExistsError``). Writing the same bytes again is not a conflict:
a retried write whose first answer was lost finds its own object and succeeds.
"""

from __future__ import annotations

import hashlib
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from anchorage.errors import InputError

COMPLETE_MARKER = "_COMPLETE"
CHUNK = 1024 * 1024
Keys = list[str]  # (inside the class, ``list`` names the method)


class AlreadyStored(FileExistsError):
    """An exclusive write found the key holding other content (another writer created it first)."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_stream(handle: BinaryIO) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: handle.read(CHUNK), b""):
        digest.update(block)
    return digest.hexdigest()


def join(*parts: str) -> str:
    """Join key parts with single slashes (no leading or trailing slash)."""
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


def check_key(key: str) -> str:
    """A normalised relative key; absolute keys and ``..`` segments are refused."""
    cleaned = key.strip("/")
    if not cleaned or any(part in ("", ".", "..") for part in cleaned.split("/")):
        raise InputError(f"invalid store key {key!r}", hint="use a relative path like 'campaign/trial/file.json'")
    return cleaned


class ArtifactStore(ABC):
    """Put, get, list and mark complete; every method takes keys relative to the store's root."""

    uri: str

    @abstractmethod
    def put_bytes(self, key: str, data: bytes, *, content_type: str | None = None, exclusive: bool = False) -> None:
        """Store ``data`` at ``key``; ``exclusive``: only when the key is free or already holds these very bytes,
        else :class:`AlreadyStored` (the object there is left as it is)."""

    @abstractmethod
    def put_file(self, key: str, path: Path) -> None: ...

    @abstractmethod
    def get_bytes(self, key: str) -> bytes: ...

    @abstractmethod
    def get_file(self, key: str, path: Path) -> None: ...

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def list(self, prefix: str = "") -> list[str]:
        """Every key under ``prefix`` (recursive, sorted)."""

    @abstractmethod
    def delete(self, key: str) -> None: ...

    @abstractmethod
    def describe(self, key: str) -> dict[str, Any]:
        """``{"size": int, "sha256": str | None}`` of a stored object."""

    def get_tail(self, key: str, window: int) -> tuple[bytes, int]:
        """The last ``window`` bytes of an object and its size (a log's end; not checksummed when cut).

        This default downloads the object; stores override it with a ranged read."""
        data = self.get_bytes(key)
        return data[-window:] if window > 0 else b"", len(data)

    def uri_of(self, key: str) -> str:
        return f"{self.uri.rstrip('/')}/{check_key(key)}"

    # ----- completion marker -----------------------------------------------------------------

    def mark_complete(self, prefix: str) -> None:
        """Write ``<prefix>/_COMPLETE`` with a manifest of the objects under ``prefix`` (call it last)."""
        prefix = check_key(prefix)
        marker = join(prefix, COMPLETE_MARKER)
        objects = {k: description for k, description in self.described(prefix) if k != marker}
        manifest = {"completed_at": time.time(), "objects": objects}
        self.put_bytes(marker, json.dumps(manifest, indent=1).encode("utf-8"), content_type="application/json")

    def described(self, prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(key, :meth:`describe`) of every object under ``prefix``, in key order (the completion manifest's
        entries; a store that can list and describe in one pass overrides it)."""
        return ((k, self.describe(k)) for k in self.list(prefix))

    def clear_complete(self, prefix: str) -> None:
        """Remove the marker before a prefix is rewritten (a retried trial)."""
        marker = join(check_key(prefix), COMPLETE_MARKER)
        if self.exists(marker):
            self.delete(marker)

    def is_complete(self, prefix: str) -> bool:
        return self.exists(join(check_key(prefix), COMPLETE_MARKER))

    def completed_prefixes(self, prefix: str = "") -> Keys:
        """Prefixes under ``prefix`` that carry a marker (what a resumed run can skip)."""
        suffix = "/" + COMPLETE_MARKER
        return sorted(k[: -len(suffix)] for k in self.list(prefix) if k.endswith(suffix))

    def upload_dir(self, local_dir: Path, prefix: str) -> Keys:
        """Store every file of ``local_dir`` under ``prefix``, then mark the prefix complete.

        The old marker is removed first; when any file fails the error propagates and no marker is
        written. Returns the stored keys.
        """
        prefix = check_key(prefix)
        if not local_dir.is_dir():
            raise InputError(f"{local_dir} is not a directory", hint="pass the trial's folder")
        self.clear_complete(prefix)
        keys: Keys = []
        for path in sorted(p for p in local_dir.rglob("*") if p.is_file()):
            key = join(prefix, path.relative_to(local_dir).as_posix())
            self.put_file(key, path)
            keys.append(key)
        self.mark_complete(prefix)
        return keys
