"""Running a task's reproduction (``solution/solve.sh``) the way the tests of every runnable anchor do."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any


def value_at(data: Any, path: str) -> Any:
    """The value at a score_config path (dots and ``[i]``)."""
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        data = data[int(index)] if index else data[name]
    return data


def run_reproduction(task: Path, results: Path, *, timeout: float = 300) -> tuple[dict[str, Any], str]:
    """Run ``task``'s solve.sh on its own data with ``results`` as the results folder.

    Returns the artifact it wrote and its standard output; fails the test with its stderr otherwise. A
    successful run is cached like the oracle runs, by :func:`oracle_key` (solution code, task data, scorer and
    library versions), under ``<cache>/reproduction/<task>-<key>/``: its results folder and its standard
    output, copied back into ``results`` on a hit — so a reproduction runs once per change to what it depends on.
    """
    entry = cache_root() / "reproduction" / f"{task.name}-{oracle_key(task)}"
    if (entry / "stdout.txt").is_file():
        shutil.copytree(entry / "results", results, dirs_exist_ok=True)
        stdout = (entry / "stdout.txt").read_text(encoding="utf-8")
    else:
        results.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "ANCHORAGE_DATA_DIR": str(task / "environment" / "data"),
               "ANCHORAGE_RESULTS_DIR": str(results), "PYTHON": sys.executable}
        proc = subprocess.run(["bash", str(task / "solution" / "solve.sh")], env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)
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


def oracle_key(task: Path) -> str:
    """What a reproduction's artifact depends on: its solution code, the task's data, scorer and libraries."""
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
    digest.update(f"{SCORER_VERSION}|{sys.version}|{'|'.join(versions)}".encode())
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


def close_enough(ours: Any, committed: Any, *, rel: float = 1e-6, abs_: float = 1e-9, path: str = "$",
                 volatile: frozenset[str] = frozenset()) -> list[str]:
    """Where two JSON values differ (numbers within ``rel``/``abs_``; ``volatile`` paths are not compared)."""
    if path in volatile:
        return []
    if isinstance(committed, dict):
        if not isinstance(ours, dict) or set(ours) != set(committed):
            return [f"{path}: keys differ"]
        return [d for key in committed for d in close_enough(ours[key], committed[key], rel=rel, abs_=abs_,
                                                               path=f"{path}.{key}", volatile=volatile)]
    if isinstance(committed, list):
        if not isinstance(ours, list) or len(ours) != len(committed):
            return [f"{path}: lengths differ"]
        return [d for i, (a, b) in enumerate(zip(ours, committed, strict=True))
                for d in close_enough(a, b, rel=rel, abs_=abs_, path=f"{path}[{i}]", volatile=volatile)]
    numbers = (int, float)
    if isinstance(committed, numbers) and not isinstance(committed, bool) and isinstance(ours, numbers) \
            and not isinstance(ours, bool):
        if committed != committed:  # NaN
            return [] if ours != ours else [f"{path}: {ours!r} != NaN"]
        return [] if abs(ours - committed) <= max(abs_, rel * abs(committed)) else [f"{path}: {ours!r} != {committed!r}"]
    return [] if ours == committed else [f"{path}: {ours!r} != {committed!r}"]
