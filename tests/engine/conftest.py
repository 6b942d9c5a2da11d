"""Fixtures of the engine tests: a campaign-manifest writer (the sandbox `mechanism` is in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


def campaign_yaml(name: str, entries: str, *, tasks: str = "[smoke-inventory]", seeds: int = 1,
                  parallelism: int = 2, extra: str = "") -> str:
    return f"""\
apiVersion: anchorage.dev/v1alpha1
kind: VerificationCampaign
metadata:
  name: {name}
spec:
  tasks: {tasks}
  seeds: {seeds}
  parallelism: {parallelism}
  entries:
{entries}
{extra}"""


@pytest.fixture
def write_manifest(tmp_path: Path):  # type: ignore[no-untyped-def]
    def write(text: str) -> Path:
        path = tmp_path / "campaign.yaml"
        path.write_text(text)
        return path

    return write
