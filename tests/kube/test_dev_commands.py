"""`anchorage dev crds` and `anchorage dev cluster` work from the command line: the cluster is the real control
plane where it is built (``[real]``), the API fake with ``--fake`` (``[fake]``), and without the
anchorage-devcluster package the command says how to install it."""

from __future__ import annotations

import importlib.metadata
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from anchorage.cli import main
from kube_cluster import kubectl_env

ANCHORAGE = str(Path(sys.executable).parent / "anchorage")


def test_dev_crds_check_passes_and_reports_drift(tmp_path: Path, repo_root: Path) -> None:
    ok = subprocess.run([ANCHORAGE, "dev", "crds", "--check", "--out", str(repo_root / "crds")],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    drifted = subprocess.run([ANCHORAGE, "dev", "crds", "--check", "--out", str(tmp_path)], capture_output=True, text=True)
    assert drifted.returncode == 1 and "run `anchorage dev crds`" in drifted.stderr
    bad = subprocess.run([ANCHORAGE, "dev", "crds", "--ceiling", "cpus"], capture_output=True, text=True)
    assert bad.returncode == 2 and "use FIELD=NUMBER" in bad.stderr


@pytest.mark.parametrize("variant", ["fake", pytest.param("real", marks=pytest.mark.cluster)])
def test_dev_cluster_serves_kubectl(tmp_path: Path, repo_root: Path, variant: str) -> None:
    if variant == "real":
        from anchorage_devcluster import binaries

        found = binaries.find()
        if isinstance(found, str):
            pytest.skip(found)
    kubeconfig = tmp_path / "kubeconfig"
    argv = [ANCHORAGE, "dev", "cluster", "--kubeconfig", str(kubeconfig), "--no-kubelet", "--crds",
            str(repo_root / "crds"), "--store", f"file://{tmp_path / 'runs'}", *(["--fake"] if variant == "fake" else [])]
    # started as a shell starts a background job, with SIGINT ignored: SIGINT still stops it, cleanly
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline()]
        while lines[-1] and not lines[-1].startswith("ready"):
            lines.append(proc.stdout.readline())
        assert lines[1].strip() == f"export KUBECONFIG={kubeconfig}", lines
        assert ("a mock, not a real API server" in lines[0]) == (variant == "fake"), lines[0]
        env = kubectl_env({**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)})
        out = subprocess.run(["kubectl", "get", "crd"], env=env, capture_output=True, text=True, timeout=60)
        assert "trials.anchorage.dev" in out.stdout, out.stderr
        deadline = time.monotonic() + 60  # a real API server publishes a new CRD's OpenAPI after a moment
        while True:
            explain = subprocess.run(["kubectl", "explain", "trial.spec.agent.kind"], env=env, capture_output=True,
                                     text=True, timeout=60)
            if "opencode | oracle | replay" in explain.stdout or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert "opencode | oracle | replay" in explain.stdout, explain.stderr
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        assert subprocess.run(["kubectl", "get", "crd"], env=env, capture_output=True, timeout=60).returncode != 0
    finally:
        proc.terminate()
        proc.wait(60)
        if proc.stdout is not None:
            proc.stdout.close()


def test_dev_cluster_without_the_package_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])  # as where it is not installed
    monkeypatch.setattr(sys, "argv", ["anchorage", "dev", "cluster"])
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert "needs the anchorage-devcluster package" in err and "pip install -e ./devcluster" in err
