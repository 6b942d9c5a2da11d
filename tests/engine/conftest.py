"""Fixtures of the engine tests: the sandbox mechanism and a campaign-manifest writer."""

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
