"""Running a task's reproduction (``solution/solve.sh``) the way the tests of every runnable anchor do."""

from __future__ import annotations

import json
import os
import re
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

    Returns the artifact it wrote and its standard output; fails the test with its stderr otherwise.
    """
    env = {**os.environ, "ANCHORAGE_DATA_DIR": str(task / "environment" / "data"),
           "ANCHORAGE_RESULTS_DIR": str(results), "PYTHON": sys.executable}
    proc = subprocess.run(["bash", str(task / "solution" / "solve.sh")], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    artifact: dict[str, Any] = json.loads((results / f"{task.name}_result.json").read_text(encoding="utf-8"))
    return artifact, proc.stdout
