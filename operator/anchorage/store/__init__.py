"""Artifact stores: file:// and s3:// behind one interface (the only package that imports boto3).

``open_store(uri)`` is what the engine, the operator and reports call; ``s3://`` loads boto3 lazily,
so ``file://`` users never import it. See docs/design-notes.md, section "Store".
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from anchorage.errors import InputError
from anchorage.store.base import COMPLETE_MARKER, ArtifactStore
from anchorage.store.local import FileStore

__all__ = ["COMPLETE_MARKER", "ArtifactStore", "FileStore", "open_store"]


def open_store(uri: str, **options: object) -> ArtifactStore:
    """``file:///abs/path``, a plain path, or ``s3://bucket/prefix`` (options go to ``S3Store``)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        path = unquote(parsed.path) if parsed.scheme == "file" else uri
        if parsed.scheme == "file" and parsed.netloc not in ("", "localhost"):
            raise InputError(f"file URI {uri!r} names a host", hint="use file:///absolute/path")
        return FileStore(Path(path))
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise InputError(f"S3 URI {uri!r} has no bucket", hint="use s3://bucket/prefix")
        from anchorage.store.s3 import S3Store

        return S3Store(parsed.netloc, parsed.path, **options)  # type: ignore[arg-type]
    raise InputError(f"unsupported store URI {uri!r}", hint="use file:///path or s3://bucket/prefix")
