"""Fixtures of the sandbox tests: the mechanism available here, and a trial folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from anchorage.errors import InfrastructureError
from anchorage.runtime.local import sandbox


@pytest.fixture(scope="session")
def mechanism() -> sandbox.Mechanism:
    try:
        return sandbox.detect_mechanism()
    except InfrastructureError as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    out = {name: tmp_path / name for name in ("results", "logs", "data")}
    for path in out.values():
        path.mkdir()
    (out["data"] / "statement.md").write_text("the problem\n")
    return out
