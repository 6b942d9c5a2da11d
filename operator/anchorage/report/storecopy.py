"""A campaign in a store (``s3://bucket/prefix/<campaign>``) as a run folder: ``anchorage report`` and ``rescore``.

Both commands rewrite files beside a run's records (the leaderboard, plots and report; a profile's folder). For a
store prefix they work on a temporary copy of the campaign (every object of it but the ``_COMPLETE`` markers) and
upload what they wrote to the same prefix. The trials' own objects are never written back.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from anchorage.errors import InputError
from anchorage.store import COMPLETE_MARKER, ArtifactStore, open_store
from anchorage.store.base import join


@dataclass
class StoreCopy:
    """``folder``: the local copy (named like the campaign); :meth:`upload` puts files of it back."""

    store: ArtifactStore
    campaign: str
    folder: Path

    def upload(self, paths: list[Path]) -> dict[Path, str]:
        """Upload files of :attr:`folder` to the same keys under the campaign; returns each one's URI."""
        uris = {}
        for path in sorted(set(paths)):
            if path.is_file() and not path.is_symlink():
                key = join(self.campaign, path.relative_to(self.folder).as_posix())
                self.store.put_file(key, path)
                uris[path] = self.store.uri_of(key)
        return uris


def is_store_uri(where: str) -> bool:
    return where.startswith("s3://")


@contextmanager
def store_copy(uri: str) -> Iterator[StoreCopy]:
    """A temporary run folder holding the campaign at ``uri`` (``s3://bucket/prefix/<campaign>``)."""
    parent, _, campaign = uri.rstrip("/").rpartition("/")
    if not campaign or parent in ("s3:", "s3:/"):
        raise InputError(f"{uri} names no campaign", hint="pass s3://bucket/prefix/<campaign>")
    store = open_store(parent)
    if not store.exists(join(campaign, "campaign.json")):
        raise InputError(f"{uri} is not a campaign's prefix (no campaign.json there)",
                         hint="pass the prefix 'anchorage run --store' published: s3://bucket/prefix/<campaign>")
    with tempfile.TemporaryDirectory(prefix="anchorage-store-copy-") as tmp:
        folder = Path(tmp) / campaign
        for key in store.list(campaign):
            relative = key[len(campaign) + 1:]
            if relative.rsplit("/", 1)[-1] == COMPLETE_MARKER:
                continue
            store.get_file(key, folder / relative)
        yield StoreCopy(store, campaign, folder)
