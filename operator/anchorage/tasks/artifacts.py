"""Finding a task's artifact in a results folder, recovering near-miss names (SPEC §1, C.3).

Called by the scorer (and through it by both drivers) with either an artifact file or a folder. The
expected name is ``<slug>_result.json`` (the basename of task.toml's ``artifacts`` entry). When it is
absent, a file in the same folder is *recovered* if its name differs only by case, ``-``/``_``/space
swaps, a trailing ``s`` on ``result``, or is a lone ``result.json`` / ``<slug>.json``. A recovery is
never silent: :class:`ArtifactLocation` carries the name found and a note, which the score record and
the trial record show. When several near-misses exist, the closest (by the order above) wins and the
others are listed in the note.

The folder is the agent's: only regular files are candidates (a symlink, FIFO or device named like
the artifact is returned as found, for the reader — :mod:`anchorage.confined` — to refuse with the
reason, never followed), and at most :data:`MAX_LISTED` entries of a folder are looked at.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_LISTED = 10_000
"""Entries of a results folder looked at for near-miss names (a folder of a million files costs no more)."""


@dataclass(frozen=True)
class ArtifactLocation:
    """Where the artifact is (``path`` None if nothing was found) and whether it was recovered."""

    path: Path | None
    expected: Path
    recovered_from: str | None = None
    note: str = ""

    @property
    def found(self) -> bool:
        return self.path is not None


def _normal(name: str) -> str:
    return re.sub(r"[-_\s]+", "_", name.strip().lower())


def _candidates(slug: str, expected_name: str) -> list[str]:
    """Normalised names accepted as near-misses, closest first."""
    stem = _normal(expected_name).removesuffix(".json")
    slug_n = _normal(slug)
    names = [f"{stem}.json", f"{stem}s.json", f"{slug_n}_results.json", f"{slug_n}_result.json",
             f"{slug_n}.json", "result.json", "results.json"]
    ordered: list[str] = []
    for name in names:
        if name not in ordered:
            ordered.append(name)
    return ordered


def locate_artifact(target: str | os.PathLike[str], slug: str, expected_name: str | None = None) -> ArtifactLocation:
    """Resolve ``target`` (a file, a missing file in an existing folder, or a folder) to the artifact."""
    target = Path(target)
    expected_name = expected_name or f"{slug}_result.json"
    try:
        is_dir = stat.S_ISDIR(os.stat(target).st_mode)
    except OSError:
        is_dir = None  # does not exist
    if is_dir is False:  # a file (or a FIFO/device the reader will refuse)
        return ArtifactLocation(path=target, expected=target)
    folder = target if is_dir else target.parent
    wanted = expected_name if is_dir else target.name
    expected = folder / wanted
    if os.path.lexists(expected):  # whatever it is: the reader refuses links and special files, saying so
        return ArtifactLocation(path=expected, expected=expected)
    if not folder.is_dir():
        return ArtifactLocation(path=None, expected=expected, note=f"folder {folder} does not exist")
    return _recover(folder, expected, slug, wanted)


def _recover(folder: Path, expected: Path, slug: str, wanted: str) -> ArtifactLocation:
    by_normal: dict[str, list[Path]] = {}
    wanted_names = set(_candidates(slug, wanted))
    try:
        with os.scandir(folder) as entries:
            for index, entry in enumerate(entries):
                if index >= MAX_LISTED:
                    break
                name = _normal(entry.name)
                if name in wanted_names and entry.is_file(follow_symlinks=False):
                    by_normal.setdefault(name, []).append(Path(entry.path))
    except OSError:
        return ArtifactLocation(path=None, expected=expected, note=f"folder {folder} cannot be listed")
    for paths in by_normal.values():
        paths.sort()
    matches = [p for name in _candidates(slug, wanted) for p in by_normal.get(name, [])]
    if not matches:
        return ArtifactLocation(path=None, expected=expected,
                                note=f"no {wanted} (nor a near-miss name) in {folder}")
    chosen = matches[0]
    note = f"recovered {chosen.name!r} in place of the expected {wanted!r}"
    if len(matches) > 1:
        note += "; other near-misses ignored: " + ", ".join(repr(p.name) for p in matches[1:])
    return ArtifactLocation(path=chosen, expected=expected, recovered_from=chosen.name, note=note)
