"""Fixtures of the hostile-agent suite: run an attacker's Python code as a whole trial, read its record.

Each test in ``tests/hostile/`` is one class of attack from the sandbox issue: it runs the attack as a
``command`` agent through the real local engine (``run_trial``: sandbox, quotas, scorer, gates,
``trial.json``) and asserts both that the attack failed and that the trial's recorded phase and reason
are the honest ones. The sandbox ``mechanism`` fixture is in tests/conftest.py, and so is ``mech``, which
runs a test under both bubblewrap and the unshare fallback.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from anchorage.manifests import TrialSpec
from anchorage.runtime.local import sandbox
from anchorage.runtime.local.trials import LocalRuntime, TrialJob, run_trial
from anchorage.tasks import Task, load_task, resolve_task

PY = sandbox.sandbox_python()


@dataclass
class Attack:
    """A finished attacker trial: its record, its folder and what the attacker printed."""

    record: dict[str, Any]
    folder: Path

    @property
    def phase_reason(self) -> tuple[str, str]:
        return self.record["phase"], self.record["reason"]

    @property
    def stdout(self) -> str:
        return _read(self.folder / "agent" / "stdout.log")

    @property
    def stderr(self) -> str:
        return _read(self.folder / "agent" / "stderr.log")

    def said(self, line: str) -> bool:
        return line in self.stdout.splitlines()

    @property
    def score(self) -> dict[str, Any]:
        return json.loads((self.folder / "score.json").read_text())


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


RunAttack = Callable[..., Attack]


@pytest.fixture
def smoke_task() -> Task:
    return load_task(resolve_task("smoke-inventory"))


@pytest.fixture
def attack(tmp_path: Path, smoke_task: Task) -> Callable[..., Attack]:
    """``attack(code, mechanism, task=..., limits={...}, gateway=None)`` → the finished trial."""

    def run(code: str, mechanism: sandbox.Mechanism, *, task: Task | None = None, limits: dict[str, Any] | None = None,
            gateway: Any = None, argv: list[str] | None = None, model: str | None = None) -> Attack:
        name = f"attack-{uuid.uuid4().hex[:8]}"
        command = argv if argv is not None else [PY, "-c", textwrap.dedent(code)]
        spec = TrialSpec.model_validate({
            "task": "smoke-inventory", "entry": "attacker",
            "agent": {"kind": "command", "command": command, **({"model": model} if model else {})},
            "limits": {"agentTimeoutSec": 30, "memoryMB": 512, "pids": 256, **(limits or {})},
        })
        job = TrialJob(name, task or smoke_task, spec, "attacker", campaign="hostile")
        runtime = LocalRuntime(mechanism=mechanism, base_dir=tmp_path, gateway=gateway)
        folder = tmp_path / "runs" / name
        record = run_trial(job, folder, runtime)
        return Attack(record.to_json(), folder)

    return run


HONEST_ARTIFACT = "smoke-inventory_result.json"


def write_expected(task: Task) -> str:
    """Python code writing the task's own expected result (an honest, perfect artifact)."""
    text = task.expected_result_path.read_text()
    return f"open('/root/results/{task.artifact_name}', 'w').write({text!r})\n"
