"""Fixtures of the sandbox tests: a trial folder (the sandbox `mechanism` is in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    out = {name: tmp_path / name for name in ("results", "logs", "data")}
    for path in out.values():
        path.mkdir()
    (out["data"] / "statement.md").write_text("the problem\n")
    return out
