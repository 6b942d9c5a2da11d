"""Shared fixtures: where the repository, its tasks and the shared reference data are."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from anchorage.runtime.local.gatewaystart import LocalGateway
    from anchorage.runtime.local.sandbox import Mechanism

pytest_plugins = ["services", "kube_cluster", "budget"]  # S3, Prometheus; the real cluster; the time report

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


@pytest.fixture
def local_gateway() -> Iterator[LocalGateway]:
    """The local engine's model gateway (the mock upstream behind it) for one test, stopped after it."""
    from anchorage.runtime.local.gatewaystart import start_local_gateway

    local = start_local_gateway()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(params=["bwrap", "unshare"])
def mech(request: pytest.FixtureRequest, mechanism: Mechanism) -> Mechanism:
    """Each sandbox mechanism in turn, for a test run under both: bubblewrap (skipped where this machine's
    ``mechanism`` is not it) and the unshare fallback (skipped unless root)."""
    wanted: Mechanism = request.param
    if wanted == "bwrap" and mechanism != "bwrap":
        pytest.skip("bubblewrap is not usable here")
    if wanted == "unshare" and os.geteuid() != 0:
        pytest.skip("the unshare mechanism needs root")
    return wanted


def anchorage_cli(*args: str, cwd: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run the ``anchorage`` command as a user would (a process of its own), capturing its output."""
    return subprocess.run([sys.executable, "-c", "from anchorage.cli import main; main()", *args], cwd=cwd or REPO,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="session")
def demo_runs(tmp_path_factory: pytest.TempPathFactory, mechanism: object) -> Path:
    """A runs folder holding the demo campaign (examples/demo.yaml) run by the real CLI on its smoke task
    (``--task smoke-inventory``: 6 of its 24 trials, ~20 s), the mock's transcripts on as in the demo."""
    runs = tmp_path_factory.mktemp("demo-runs")
    done = anchorage_cli("run", "examples/demo.yaml", "--runs-dir", str(runs), "--task", "smoke-inventory",
                         "--no-plots")
    assert done.returncode == 0, done.stdout + done.stderr
    return runs


@pytest.fixture
def imported_anchor_task(tmp_path: Path) -> Path:
    """A copy of a reference task marked ``anchor = "imported"`` without a reproduction (every task of the
    suite has one, so the imported-anchor path is tested on a copy)."""
    import re
    import shutil

    task = tmp_path / "imported" / "cumcm-2023-a-heliostat-field"   # the slug is the folder's name
    shutil.copytree(REPO / "tasks" / "cumcm-2023-a-heliostat-field", task,
                    ignore=shutil.ignore_patterns("solve.sh", "solve.py", "reproduced_result.json", "comparison.json"))
    toml = (task / "task.toml").read_text(encoding="utf-8")
    (task / "task.toml").write_text(re.sub(r'(?m)^anchor = ".*"$', 'anchor = "imported"', toml), encoding="utf-8")
    (task / "solution" / "README.md").write_text("# Oracle\n\nanchor: imported\n", encoding="utf-8")
    return task
