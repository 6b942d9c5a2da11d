"""Records and reports are written whole or not at all (``anchorage.files``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from anchorage import files


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "trial.json"
    files.write_json_atomic(target, {"phase": "Running"})

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        files.write_json_atomic(target, {"phase": "Succeeded", "score": 0.9})
    assert json.loads(target.read_text()) == {"phase": "Running"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trial.json"]


def test_a_write_replaces_the_file_with_sorted_indented_json(tmp_path: Path) -> None:
    target = tmp_path / "score.json"
    target.write_text("old")
    files.write_json_atomic(target, {"b": 1, "a": Path("/x")})
    assert target.read_text() == '{\n  "a": "/x",\n  "b": 1\n}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["score.json"]
