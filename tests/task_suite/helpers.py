"""Shared constants and helpers of the task-suite tests: the task directories under tasks/ and their slugs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"
SMOKE = "smoke-inventory"
REFERENCE_SLUGS = sorted(
    p.name for p in TASKS.iterdir() if (p / "task.toml").is_file() and p.name != SMOKE
) if TASKS.is_dir() else []
ALL_SLUGS = [*REFERENCE_SLUGS, SMOKE]


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def get_path(data: Any, path: str) -> Any:
    """Follow a metric path (dots and ``[i]``) into a JSON document."""
    for token in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        data = data[int(token[1:-1])] if token.startswith("[") else data[token]
    return data


def set_path(data: Any, path: str, value: Any) -> None:
    tokens = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    for token in tokens[:-1]:
        data = data[int(token[1:-1])] if token.startswith("[") else data[token]
    last = tokens[-1]
    data[int(last[1:-1]) if last.startswith("[") else last] = value
