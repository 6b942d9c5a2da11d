"""Checking a task directory's own files: every problem, with the path it is in and a fix hint.

:func:`check_task_files` checks what this package owns (task.toml, the instruction, the layout, the shape
of ``tests/profiles.yaml``); :func:`anchorage.scoring.validation.validate_task` adds the scoring checks
(score_config.json, the oracle under every profile) and is what ``anchorage tasks validate`` calls. Errors
make a task unusable or its scores wrong; warnings are things Harbor tolerates (deprecated spellings,
unknown keys, files the verifier or oracle would need but a data-only pack may lack).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from anchorage.errors import AnchorageError
from anchorage.tasks.loading import read_task_config, strip_canary
from anchorage.tasks.profiles import PROFILES_FILE, load_profiles

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    path: str          # file (and, after '#', a JSON pointer or dotted field) the problem is in
    message: str
    hint: str
    severity: Severity = "error"

    def render(self) -> str:
        return f"{self.severity}: {self.path}: {self.message}\n  fix: {self.hint}"


def check_task_files(root: Path, problems: list[Problem]) -> bool:
    """Append the problems of the task's own files; True when task.toml loads (gates can run)."""
    config_ok = _check_task_toml(root, problems)
    _check_instruction(root, problems)
    _check_layout(root, problems)
    _check_profiles_file(root, problems)
    return config_ok


def _check_profiles_file(root: Path, problems: list[Problem]) -> None:
    try:
        load_profiles(root)
    except AnchorageError as exc:
        problems.append(Problem(str(root / PROFILES_FILE), exc.message, exc.hint or "fix tests/profiles.yaml"))


def _check_task_toml(root: Path, problems: list[Problem]) -> bool:
    toml = root / "task.toml"
    try:
        config = read_task_config(toml)
    except AnchorageError as exc:
        problems.append(Problem(str(toml), exc.message, exc.hint or "fix task.toml"))
        return False
    for note in config.deprecations:
        problems.append(Problem(str(toml), note, "use the schema 1.4 spelling shown", "warning"))
    for key in config.unknown_keys:
        problems.append(Problem(f"{toml}#{key}", f"unknown key {key!r} (Harbor ignores it)",
                                "remove it or move it under [metadata]", "warning"))
    json_artifacts = [a for a in config.artifact_paths if a.endswith(".json")]
    if not json_artifacts:
        problems.append(Problem(f"{toml}#artifacts", "no JSON artifact declared",
                                f'add artifacts = ["/root/results/{root.name}_result.json"]'))
    elif Path(json_artifacts[0]).name != f"{root.name}_result.json":
        problems.append(Problem(f"{toml}#artifacts", f"artifact {json_artifacts[0]!r} is not named "
                                f"<slug>_result.json", f"use /root/results/{root.name}_result.json", "warning"))
    return True


def _check_instruction(root: Path, problems: list[Problem]) -> None:
    path = root / "instruction.md"
    if not path.is_file():
        problems.append(Problem(str(path), "missing", "write the prompt to instruction.md"))
    elif not strip_canary(path.read_text(encoding="utf-8")).strip():
        problems.append(Problem(str(path), "empty once the canary comment is stripped", "write the prompt"))


def _check_layout(root: Path, problems: list[Problem]) -> None:
    wanted: list[tuple[str, str]] = [
        ("environment/data", "put the problem statement and attachments in environment/data/"),
        ("environment/data/output_schema.json", "describe the artifact's fields and types"),
        ("tests/test.sh", "the verifier writes /logs/verifier/reward.json (anchorage score --reward-file)"),
        ("solution/solve.sh", "the oracle writes the artifact (Harbor convention)"),
    ]
    for rel, hint in wanted:
        if not (root / rel).exists():
            problems.append(Problem(str(root / rel), "missing", hint, "warning"))
    schema = root / "environment/data/output_schema.json"
    if schema.is_file():
        _check_json(schema, problems, severity="warning")


def _check_json(path: Path, problems: list[Problem], severity: Severity = "error") -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        problems.append(Problem(str(path), f"not valid JSON: {exc}", "fix the JSON syntax", severity))
        return None


def check_json(path: Path, problems: list[Problem], severity: Severity = "error") -> Any:
    """The parsed JSON file, or None with the problem appended."""
    return _check_json(path, problems, severity)
