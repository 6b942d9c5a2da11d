"""Shared fixtures: where the repository, its tasks and the shared reference data are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["services", "kube_cluster"]  # moto, Prometheus (tests/services.py); the real control plane

REPO = Path(__file__).resolve().parents[1]
REFERENCE = Path(os.environ.get("ANCHORAGE_REFERENCE", REPO.parent / "shared" / "reference"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def tasks_dir() -> Path:
    return REPO / "tasks"


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """The public benchmark's data pack (../shared/reference beside the clone)."""
    if not (REFERENCE / "tasks").is_dir():
        pytest.skip(f"reference data not found at {REFERENCE} (set ANCHORAGE_REFERENCE)")
    return REFERENCE


@pytest.fixture(scope="session")
def mechanism():  # type: ignore[no-untyped-def]
    """The sandbox mechanism this machine offers (bubblewrap or unshare); skips with the reason if none."""
    from anchorage.errors import InfrastructureError
    from anchorage.runtime.local import sandbox

    try:
        return sandbox.detect_mechanism()
    except InfrastructureError as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")
