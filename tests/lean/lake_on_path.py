"""A stand-in for Lean's ``lake`` on PATH: for the tests of the code around Lean where no toolchain is needed (the
plumbing in ``test_fake_lake.py``, the obligations record in ``tests/scoring/``, the audit in ``tests/verify/``)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest


def install_fake_lake(monkeypatch: pytest.MonkeyPatch, folder: Path, script: str, *,
                      rest: str = "/usr/bin:/bin") -> Path:
    """``script`` (its ``#!`` line naming its interpreter) as the executable ``folder/lake``, with ``folder`` first on
    PATH and ``rest`` after it (by default only the system's folders, so that no real toolchain is found either)."""
    folder.mkdir()
    lake = folder / "lake"
    lake.write_text(script, encoding="utf-8")
    lake.chmod(lake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}:{rest}")
    return lake
