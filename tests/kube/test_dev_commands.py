"""`anchorage dev crds` and `anchorage dev cluster` work from the command line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ANCHORAGE = str(Path(sys.executable).parent / "anchorage")


def test_dev_crds_check_passes_and_reports_drift(tmp_path: Path, repo_root: Path) -> None:
    ok = subprocess.run([ANCHORAGE, "dev", "crds", "--check", "--out", str(repo_root / "crds")],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    drifted = subprocess.run([ANCHORAGE, "dev", "crds", "--check", "--out", str(tmp_path)], capture_output=True, text=True)
    assert drifted.returncode == 1 and "run `anchorage dev crds`" in drifted.stderr
    bad = subprocess.run([ANCHORAGE, "dev", "crds", "--ceiling", "cpus"], capture_output=True, text=True)
    assert bad.returncode == 2 and "use FIELD=NUMBER" in bad.stderr


def test_dev_cluster_serves_kubectl(tmp_path: Path, repo_root: Path) -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not on PATH")
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen([ANCHORAGE, "dev", "cluster", "--kubeconfig", str(kubeconfig), "--no-kubelet",
                             "--crds", str(repo_root / "crds"), "--store", f"file://{tmp_path / 'runs'}"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        assert lines[1].strip() == f"export KUBECONFIG={kubeconfig}"
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}
        out = subprocess.run(["kubectl", "get", "crd"], env=env, capture_output=True, text=True, timeout=30)
        assert "trials.anchorage.dev" in out.stdout, out.stderr
        explain = subprocess.run(["kubectl", "explain", "trial.spec.agent.kind"], env=env, capture_output=True,
                                 text=True, timeout=30)
        assert "oracle | replay" in explain.stdout, explain.stderr
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
