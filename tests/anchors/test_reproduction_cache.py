"""The reproduction cache of the anchor tests (``tests/anchors/reproduction.py``) on a small task built here.

A reproduction runs once per change to what its artifact depends on (the solution's code, the task's data,
the processor, the numerics its environment sets), and a hit gives back exactly what the run wrote and
printed; its documentation, committed outputs and declared tolerances are not part of the key (they decide
how a run is compared, which is redone on every hit), and a failed run is never cached.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .reproduction import cache_root, machine_identity, oracle_key, run_reproduction

SOLVE = """#!/usr/bin/env bash
set -euo pipefail
echo run >> "$COUNTER"
value=$(cat "$ANCHORAGE_DATA_DIR/value.txt")
printf '{"value": %s, "threads": "%s"}\\n' "$value" "${OPENBLAS_NUM_THREADS:-}" > "$ANCHORAGE_RESULTS_DIR/fake-task_result.json"
echo template > "$ANCHORAGE_RESULTS_DIR/answer_template.txt"
echo "printed $value"
"""


@pytest.fixture
def task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ANCHORAGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COUNTER", str(tmp_path / "runs.txt"))
    task = tmp_path / "fake-task"
    (task / "solution").mkdir(parents=True)
    (task / "environment" / "data").mkdir(parents=True)
    (task / "solution" / "solve.sh").write_text(SOLVE, encoding="utf-8")
    (task / "solution" / "README.md").write_text("# Oracle\n", encoding="utf-8")
    (task / "environment" / "data" / "value.txt").write_text("1", encoding="utf-8")
    return task


def runs(task: Path) -> int:
    counter = task.parent / "runs.txt"
    return len(counter.read_text(encoding="utf-8").splitlines()) if counter.is_file() else 0


def test_a_hit_gives_back_the_runs_artifact_output_and_files(task: Path, tmp_path: Path) -> None:
    first = run_reproduction(task, tmp_path / "r1")
    second = run_reproduction(task, tmp_path / "r2")
    assert runs(task) == 1
    assert first == second == ({"value": 1, "threads": first[0]["threads"]}, "printed 1\n")
    assert (tmp_path / "r2" / "answer_template.txt").read_text(encoding="utf-8") == "template\n"
    # keyed by the numerics the run inherited (machines of this kind set OPENBLAS_CORETYPE, say): this process's
    key = oracle_key(task, os.environ)
    assert (cache_root() / "reproduction" / f"fake-task-{key}" / "stdout.txt").is_file()


def test_a_change_to_the_code_or_the_data_runs_again_and_documentation_does_not(task: Path, tmp_path: Path) -> None:
    run_reproduction(task, tmp_path / "r1")
    (task / "solution" / "README.md").write_text("# Oracle\n\nrun time: 1 s\n", encoding="utf-8")
    run_reproduction(task, tmp_path / "r2")
    assert runs(task) == 1
    (task / "environment" / "data" / "value.txt").write_text("2", encoding="utf-8")
    assert run_reproduction(task, tmp_path / "r3")[0]["value"] == 2
    assert runs(task) == 2
    (task / "solution" / "solve.sh").write_text(SOLVE.replace("printed", "wrote"), encoding="utf-8")
    assert run_reproduction(task, tmp_path / "r4")[1] == "wrote 2\n"
    assert runs(task) == 3


def test_a_failed_run_is_not_cached(task: Path, tmp_path: Path) -> None:
    (task / "solution" / "solve.sh").write_text(SOLVE + "exit 1\n", encoding="utf-8")
    for attempt in ("r1", "r2"):
        with pytest.raises(AssertionError):
            run_reproduction(task, tmp_path / attempt)
    assert runs(task) == 2
    assert list((cache_root() / "reproduction").glob("fake-task-*")) == []


def test_bytecode_left_by_importing_a_solution_does_not_change_the_key(task: Path) -> None:
    before = oracle_key(task)
    (task / "solution" / "__pycache__").mkdir()
    (task / "solution" / "__pycache__" / "solve.cpython-311.pyc").write_bytes(b"\x00bytecode")
    (task / "solution" / "helper.pyc").write_bytes(b"\x00bytecode")
    assert oracle_key(task) == before
    (task / "solution" / "helper.py").write_text("VALUE = 1\n", encoding="utf-8")
    assert oracle_key(task) != before


def test_tolerances_do_not_change_the_key_and_the_numerics_of_the_environment_do(task: Path, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    first = run_reproduction(task, tmp_path / "r1")[0]
    (task / "solution" / "comparison.json").write_text(
        '{"tolerances": [{"path": "value", "rel": 0.1, "abs": 0, "why": "test"}]}\n', encoding="utf-8")
    assert run_reproduction(task, tmp_path / "r2")[0] == first
    assert runs(task) == 1
    assert run_reproduction(task, tmp_path / "r3", env={"UNRELATED": "1"})[0] == first
    assert runs(task) == 1
    assert run_reproduction(task, tmp_path / "r4", env={"OPENBLAS_NUM_THREADS": "2"})[0] == {"value": 1, "threads": "2"}
    assert runs(task) == 2
    assert oracle_key(task, {"OPENBLAS_CORETYPE": "Prescott"}) != oracle_key(task) == oracle_key(task, {"HOME": "/x"})


def test_the_processor_is_part_of_the_key(task: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from . import reproduction

    here = oracle_key(task)
    assert machine_identity() and oracle_key(task) == here
    monkeypatch.setattr(reproduction, "machine_identity", lambda: "aarch64|another processor")
    assert oracle_key(task) != here
