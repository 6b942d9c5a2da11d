"""A run killed with -9 leaves cgroups, quota mounts, views and a gateway socket folder; the next run removes them.

The agents here are ordinary sleepers: the "attack" is on the host's hygiene (an engine that dies at
the worst moment), and the honest outcome is a second run that cleans up what the first one owned —
and only that — then finishes the campaign.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from anchorage.runtime.local import cgroups, leftovers, mounts, quotas, views

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

ANCHORAGE = str(Path(sys.prefix) / "bin" / "anchorage")
MANIFEST = """\
apiVersion: anchorage.dev/v1alpha1
kind: VerificationCampaign
metadata: {name: killed}
spec:
  tasks: [smoke-inventory]
  seeds: 4
  parallelism: 2
  entries:
    - name: sleeper
      agent: {kind: command, model: mock,
              command: ["/bin/sh", "-c", "sleep 2; echo '{}' > /root/results/smoke-inventory_result.json"]}
"""


def _cgroups_named(prefix: str) -> list[str]:
    """The cgroup folders whose name starts with ``prefix``, under every hierarchy (``os.walk`` passes over folders
    that vanish while it walks: other tests' trials end meanwhile, a glob would raise)."""
    found: list[str] = []
    for folder, children, _ in os.walk(cgroups.ROOT):
        found += [os.path.join(folder, child) for child in children if child.startswith(prefix)]
    return found


def _owned_by(pid: int) -> dict[str, list[str]]:
    """The cgroups, quota mounts, views and gateway folders tagged with the process ``pid``."""
    prefix = f"{pid}."
    groups = _cgroups_named(f"anchorage-{prefix}") if os.geteuid() == 0 else []
    quota_mounts = [target for source, target in quotas._mounts()
                    if source.startswith(quotas.SOURCE_PREFIX + prefix)]
    folders = [str(f) for f in Path(tempfile.gettempdir()).glob(f"{leftovers.GATEWAY_PREFIX}{prefix}*")]
    viewed = [target for _, source, target in mounts.table() if source.startswith(views.SOURCE_PREFIX + prefix)]
    viewed += [str(f) for f in Path(tempfile.gettempdir()).glob(f"{views.FOLDER_PREFIX}{prefix}*")]
    return {"cgroups": groups, "mounts": quota_mounts, "views": viewed, "gateway_folders": folders}


def test_a_killed_run_is_cleaned_up_by_the_next(mechanism: str, tmp_path: Path) -> None:
    manifest = tmp_path / "c.yaml"
    manifest.write_text(MANIFEST)
    runs = tmp_path / "runs"
    command = [ANCHORAGE, "run", str(manifest), "--runs-dir", str(runs), "--no-plots"]
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    owned: dict[str, list[str]] = {}
    while time.monotonic() < deadline:  # wait until trials are in flight (their mounts exist)
        owned = _owned_by(first.pid)
        if owned["mounts"] and owned["views"] and owned["gateway_folders"]:
            break
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert owned["mounts"] and owned["views"] and owned["gateway_folders"], owned
    assert _owned_by(first.pid)["mounts"], "the kill should have left quota mounts behind"
    assert _owned_by(first.pid)["views"], "the kill should have left views behind"

    second = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    nothing: dict[str, list[str]] = {"cgroups": [], "mounts": [], "views": [], "gateway_folders": []}
    assert _owned_by(first.pid) == nothing  # the killed run's leftovers are gone
    assert _owned_by(second.pid) == nothing  # and a run that ends removes its own
    finished = list((runs / "killed").glob("*/trial.json"))
    assert len(finished) == 4
