"""Running a task's reproduction (``solution/solve.sh``) the way the tests of every runnable anchor do."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def value_at(data: Any, path: str) -> Any:
    """The value at a score_config path (dots and ``[i]``)."""
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        data = data[int(index)] if index else data[name]
    return data


def run_reproduction(task: Path, results: Path, *, timeout: float = 300,
                     env: Mapping[str, str] | None = None) -> tuple[dict[str, Any], str]:
    """Run ``task``'s solve.sh on its own data with ``results`` as the results folder.

    Returns the artifact it wrote and its standard output; fails the test with its stderr otherwise. ``env``
    adds to the inherited environment (e.g. another BLAS kernel or thread count). A successful run is cached
    like the oracle runs, by :func:`oracle_key` (solution code, task data, scorer and library versions, the
    machine, the numerics the environment sets), under ``<cache>/reproduction/<task>-<key>/``: its results
    folder and its standard output, copied back into ``results`` on a hit — so a reproduction runs once per
    change to what it depends on.
    """
    full_env = {**os.environ, **(env or {})}
    entry = cache_root() / "reproduction" / f"{task.name}-{oracle_key(task, full_env)}"
    if (entry / "stdout.txt").is_file():
        shutil.copytree(entry / "results", results, dirs_exist_ok=True)
        stdout = (entry / "stdout.txt").read_text(encoding="utf-8")
    else:
        results.mkdir(parents=True, exist_ok=True)
        full_env.update({"ANCHORAGE_DATA_DIR": str(task / "environment" / "data"),
                         "ANCHORAGE_RESULTS_DIR": str(results), "PYTHON": sys.executable})
        proc = subprocess.run(["bash", str(task / "solution" / "solve.sh")], env=full_env, capture_output=True,
                              text=True, timeout=timeout, check=False)
        assert proc.returncode == 0, proc.stderr[-4000:]
        stdout = proc.stdout
        staging = entry.with_name(f"{entry.name}.tmp-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(results, staging / "results")
        (staging / "stdout.txt").write_text(stdout, encoding="utf-8")
        try:
            os.replace(staging, entry)      # atomic: a reader sees the whole entry or none
        except OSError:                     # another run filled it first
            shutil.rmtree(staging, ignore_errors=True)
    artifact: dict[str, Any] = json.loads((results / f"{task.name}_result.json").read_text(encoding="utf-8"))
    return artifact, stdout


# --- sandboxed oracle runs, cached by the solution's hash ------------------------------------------------

OUTPUTS = ("reproduced_result.json", "comparison.json", "README.md")
"""Files of solution/ that a run does not depend on (its outputs and its documentation)."""
LIBRARIES = ("numpy", "scipy", "pandas", "scikit-learn", "statsmodels", "highspy", "openpyxl")


def cache_root() -> Path:
    """``$ANCHORAGE_CACHE``, else ``$XDG_CACHE_HOME/anchorage``, else ``~/.cache/anchorage``."""
    if os.environ.get("ANCHORAGE_CACHE"):
        return Path(os.environ["ANCHORAGE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "anchorage"


def _digest_tree(digest: Any, root: Path, skip: tuple[str, ...] = ()) -> None:
    """Every file under ``root`` but ``skip`` and Python's bytecode (which importing a solve.py may leave)."""
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name not in skip
                       and "__pycache__" not in p.relative_to(root).parts and p.suffix != ".pyc"):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")


def tree_hash(root: Path, skip: tuple[str, ...] = ()) -> str:
    import hashlib

    digest = hashlib.sha256()
    _digest_tree(digest, root, skip)
    return digest.hexdigest()


NUMERIC_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "MKL_CBWR",
               "NPY_DISABLE_CPU_FEATURES", "PYTHONHASHSEED")
"""Environment variables that change a computation's digits (BLAS kernel and threads, numpy's SIMD dispatch,
string hashing). The sandbox gives an oracle run none of them; a direct run inherits them."""


def machine_identity() -> str:
    """The processor a run's digits depend on: its architecture, model and instruction-set flags (BLAS and
    numpy pick their kernels by them), so a cache carried to another machine runs the reproduction again."""
    import platform

    described = [platform.machine()]
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        first = cpuinfo.read_text(encoding="utf-8", errors="replace").split("\n\n", 1)[0]
        described += [line.split(":", 1)[1].strip() for line in first.splitlines()
                      if line.split(":", 1)[0].strip() in ("model name", "flags", "Features", "CPU part")]
    else:
        described.append(platform.processor())
    return "|".join(described)


def oracle_key(task: Path, env: Mapping[str, str] | None = None) -> str:
    """What a reproduction's artifact depends on: its solution code, the task's data, scorer and libraries,
    the machine, and (for a run that inherits ``env``) the :data:`NUMERIC_ENV` variables it sets.

    Not the tolerances of ``solution/comparison.json`` (nor any file of :data:`OUTPUTS`): they decide how a
    run is compared with the committed result, which the tests redo on every hit, not what the run computes.
    """
    import hashlib
    from importlib import metadata

    from anchorage.scoring import SCORER_VERSION

    digest = hashlib.sha256()
    _digest_tree(digest, task / "solution", OUTPUTS)
    _digest_tree(digest, task / "environment" / "data")
    versions = []
    for name in LIBRARIES:
        try:
            versions.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name}=absent")
    numerics = sorted(f"{k}={env[k]}" for k in NUMERIC_ENV if env and k in env)
    digest.update(f"{SCORER_VERSION}|{sys.version}|{'|'.join(versions)}|{machine_identity()}|{numerics}".encode())
    return digest.hexdigest()[:20]


def oracle_run(task: Path, work: Path) -> dict[str, Any]:
    """``anchorage oracle`` on ``task`` in the sandbox, from the cache when the key has run before.

    Returns ``{"record": trial.json, "artifact": the artifact or None, "outputs": files the run left in
    its artifacts/ folder, "solution_unchanged": bool}``. Only successful runs are cached.
    """
    entry = cache_root() / "oracle" / f"{task.name}-{oracle_key(task)}"
    if (entry / "run.json").is_file():
        cached: dict[str, Any] = json.loads((entry / "run.json").read_text(encoding="utf-8"))
        return cached
    before = tree_hash(task / "solution")
    runs = work / "runs"
    cli = str(Path(sys.executable).with_name("anchorage"))
    proc = subprocess.run([cli, "oracle", "--task", str(task), "--runs-dir", str(runs)],
                          capture_output=True, text=True, check=False, timeout=3000)
    folders = list(runs.iterdir()) if runs.is_dir() else []
    assert len(folders) == 1, f"anchorage oracle left {folders} (exit {proc.returncode}): {proc.stdout}{proc.stderr}"
    record = json.loads((folders[0] / "trial.json").read_text(encoding="utf-8"))
    artifact_path = folders[0] / "artifacts" / f"{task.name}_result.json"
    run = {"record": record, "exit_code": proc.returncode, "stdout": proc.stdout[-4000:],
           "artifact": json.loads(artifact_path.read_text(encoding="utf-8")) if artifact_path.is_file() else None,
           "outputs": sorted(str(p.relative_to(folders[0] / "artifacts")) for p in (folders[0] / "artifacts").rglob("*")),
           "solution_unchanged": tree_hash(task / "solution") == before}
    if proc.returncode == 0 and record.get("phase") == "Succeeded":
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.mkdir(exist_ok=True)
        staging = entry / f"run.json.tmp-{os.getpid()}"
        staging.write_text(json.dumps(run), encoding="utf-8")
        os.replace(staging, entry / "run.json")   # atomic: a reader sees the whole entry or none
    return run
