"""Fixtures for the scoring tests: a factory writing small Harbor task directories in tmp_path."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

TaskFactory = Callable[..., Path]


def write_task(root: Path, metrics: list[dict[str, Any]], expected: Any = None,
               baseline_endpoint: dict[str, Any] | None = None, invariants: str | None = None) -> Path:
    """A minimal task directory: task.toml, instruction.md, tests/score_config.json (+ expected result)."""
    (root / "tests").mkdir(parents=True)
    (root / "task.toml").write_text(
        f'schema_version = "1.3"\nartifacts = ["/root/results/{root.name}_result.json"]\n'
        f'[task]\nname = "test/{root.name}"\n', encoding="utf-8")
    (root / "instruction.md").write_text("<!-- harbor-canary GUID x -->\n\nSolve it.\n", encoding="utf-8")
    config: dict[str, Any] = {"scoring_version": "test", "metrics": metrics}
    if baseline_endpoint is not None:
        config["baseline_endpoint"] = baseline_endpoint
    (root / "tests" / "score_config.json").write_text(json.dumps(config), encoding="utf-8")
    if expected is not None:
        (root / "tests" / "expected_result.json").write_text(json.dumps(expected), encoding="utf-8")
    if invariants is not None:
        (root / "tests" / "invariants.yaml").write_text(invariants, encoding="utf-8")
    return root


@pytest.fixture
def make_task(tmp_path: Path) -> TaskFactory:
    counter = iter(range(1000))

    def factory(metrics: list[dict[str, Any]], expected: Any = None, **kwargs: Any) -> Path:
        return write_task(tmp_path / f"task-{next(counter)}", metrics, expected, **kwargs)

    return factory


@pytest.fixture
def write_json(tmp_path: Path) -> Callable[[Any, str], Path]:
    def writer(data: Any, name: str = "artifact.json") -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
        return path

    return writer
