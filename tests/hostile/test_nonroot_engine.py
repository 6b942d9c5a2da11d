"""The non-root fallback: an engine run by an ordinary user still sandboxes the agent (bubblewrap's own
user namespace), and without tmpfs quotas it still finds an oversized result after the run.

The engine here is a small script run as the unprivileged host id 60999 (``setpriv``) with the
system's Python and the checkout's source folder; it is skipped, saying why, where that user cannot
read the checkout or has no Python.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.sandbox

SOURCE = Path(__file__).resolve().parents[2] / "operator"
USER = 60999
ENGINE = r"""
import json, sys
from pathlib import Path
from anchorage.runtime.local import sandbox
base = Path(sys.argv[1])
results, logs = base / "results", base / "logs"
mechanism = sandbox.detect_mechanism()
code = ("import os; open('/root/results/big.bin', 'wb').write(b'x' * 300000); "
        "print(os.getuid(), os.getgid(), open('/proc/self/status').read().split('CapEff:')[1].split()[0])")
spec = sandbox.SandboxSpec(argv=["python3", "-c", code], results_dir=results, logs_dir=logs,
                           limits=sandbox.SandboxLimits(timeout_sec=30, memory_mb=512, result_max_bytes=100000))
result = sandbox.run(spec, mechanism=mechanism)
print(json.dumps({"mechanism": mechanism, "outcome": result.outcome, "exit": result.exit_code,
                  "started": result.started, "oversized": result.oversized, "user": result.user,
                  "quota": result.quotas["results"]["mechanism"], "out": (logs / "stdout.log").read_text()}))
"""


def _readable_by(path: Path) -> bool:
    """Every existing folder on the way lets others through (the x bit for "other")."""
    return all(os.stat(part).st_mode & 0o001 for part in [path, *path.parents] if part.exists())


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A folder the ordinary user can reach (pytest's own tmp is root-only)."""
    folder = Path(tempfile.mkdtemp(prefix="anchorage-nonroot-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_an_unprivileged_engine_still_sandboxes(open_tmp: Path) -> None:
    tmp_path = open_tmp
    python = shutil.which("python3", path="/usr/bin:/bin")
    if os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("bwrap"):
        pytest.skip("needs root (to become an ordinary user), setpriv and bubblewrap")
    if python is None or not _readable_by(SOURCE):
        pytest.skip(f"uid {USER} cannot read {SOURCE} or has no system python3")
    base = tmp_path / "engine"
    for name in ("results", "logs", "cache"):
        (base / name).mkdir(parents=True)
    for path in (base, base / "results", base / "logs", base / "cache"):
        os.chown(path, USER, USER)
    site = [p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix)]  # pydantic & co
    env = {"PATH": "/usr/bin:/bin", "HOME": str(base), "ANCHORAGE_CACHE": str(base / "cache"),
           "PYTHONPATH": ":".join([str(SOURCE), *site])}
    done = subprocess.run(["setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups", python, "-c", ENGINE,
                           str(base)], env=env, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0 and "No module named" in done.stderr:
        pytest.skip(f"the system python lacks a module the sandbox needs: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["mechanism"] == "bwrap" and report["started"] and report["exit"] == 0, report
    assert report["out"].split() == ["1000", "1000", "0000000000000000"], report  # agent 1000, no capabilities
    assert f"host {USER}:{USER}" in report["user"]
    assert report["quota"].startswith("not root") and report["oversized"], report  # checked after the run
