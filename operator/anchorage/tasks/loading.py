"""Loading a Harbor task directory into a :class:`Task`, and finding a task by name.

Called by the scorer, the runtime (prompt delivery), the campaign planner and the CLI. The slug is the
task directory's name; the artifact the agent must write is the ``artifacts`` entry of ``task.toml``
(``/root/results/<slug>_result.json``). The instruction is delivered verbatim except for a leading
``<!-- harbor-canary ... -->`` comment, which is stripped (SPEC §1).
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path, PurePosixPath

from pydantic import ValidationError

from anchorage.errors import InputError, did_you_mean
from anchorage.tasks.taskconfig import TaskConfig

REPO_TASKS = Path(__file__).resolve().parents[3] / "tasks"
TASKS_ENV = "ANCHORAGE_TASKS"
_CANARY = re.compile(r"\A\ufeff?\s*<!--\s*harbor-canary.*?-->[ \t]*(?:\r?\n)*", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class Task:
    """One loaded task directory. Paths may point at files that do not exist (the validator says so).

    Derived paths are cached on first use (the scorer reads them for every artifact).
    """

    root: Path
    slug: str
    config: TaskConfig
    instruction: str

    @property
    def name(self) -> str:
        return self.config.task.name or self.slug

    @cached_property
    def environment_dir(self) -> Path:
        return self.root / "environment"

    @cached_property
    def data_dir(self) -> Path:
        return self.root / "environment" / "data"

    @cached_property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @cached_property
    def solution_dir(self) -> Path:
        return self.root / "solution"

    @cached_property
    def score_config_path(self) -> Path:
        return self.tests_dir / "score_config.json"

    @cached_property
    def expected_result_path(self) -> Path:
        return self.tests_dir / "expected_result.json"

    @cached_property
    def invariants_path(self) -> Path:
        return self.tests_dir / "invariants.yaml"

    @cached_property
    def artifact_path(self) -> str:
        """The sandbox path of the graded artifact (first ``artifacts`` entry ending in ``.json``)."""
        for path in self.config.artifact_paths:
            if path.endswith(".json"):
                return path
        return f"/root/results/{self.slug}_result.json"

    @cached_property
    def artifact_name(self) -> str:
        return PurePosixPath(self.artifact_path).name


def strip_canary(text: str) -> str:
    """Remove a leading ``<!-- harbor-canary ... -->`` comment (and the blank lines after it)."""
    return _CANARY.sub("", text, count=1)


def load_task(path: str | Path) -> Task:
    """Load the task directory at ``path``; raise :class:`InputError` saying what is wrong."""
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise InputError(f"task directory {root} does not exist",
                         hint="pass a Harbor task directory (one holding task.toml), or a task name")
    config = read_task_config(root / "task.toml")
    instruction_path = root / "instruction.md"
    if not instruction_path.is_file():
        raise InputError(f"{instruction_path} is missing", hint="write the prompt to instruction.md")
    instruction = strip_canary(instruction_path.read_text(encoding="utf-8"))
    return Task(root=root, slug=root.name, config=config, instruction=instruction)


def read_task_config(path: Path) -> TaskConfig:
    """Parse one ``task.toml`` into a :class:`TaskConfig`."""
    if not path.is_file():
        raise InputError(f"{path} is missing", hint="every Harbor task directory needs a task.toml")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path} is not valid TOML: {exc}", hint="fix the TOML syntax at the position shown") from exc
    try:
        return TaskConfig.model_validate(raw)
    except ValidationError as exc:
        raise InputError(f"{path} does not match the Harbor task schema:\n{_describe(exc)}",
                         hint="fix the fields listed (Harbor schema 1.3/1.4)") from exc


def _describe(exc: ValidationError) -> str:
    return "\n".join(
        f"  {'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}" for err in exc.errors()
    )


def search_dirs() -> list[Path]:
    """Where task names are looked up, in order: ``./tasks``, the repo's ``tasks/``, ``$ANCHORAGE_TASKS``."""
    dirs = [Path.cwd() / "tasks", REPO_TASKS]
    dirs += [Path(p) for p in os.environ.get(TASKS_ENV, "").split(os.pathsep) if p]
    unique: list[Path] = []
    for directory in dirs:
        resolved = directory.expanduser().resolve()
        if resolved not in unique:
            unique.append(resolved)
    return unique


def resolve_task(name_or_path: str | os.PathLike[str]) -> Path:
    """A task directory from a path or a name (``cumcm-2024-a-dragon-dance`` or ``owner/slug``)."""
    candidate = Path(name_or_path).expanduser()
    if (candidate / "task.toml").is_file():
        return candidate.resolve()
    slug = str(name_or_path).rstrip("/").split("/")[-1]
    for directory in search_dirs():
        if (directory / slug / "task.toml").is_file():
            return (directory / slug).resolve()
    searched = ", ".join(str(d) for d in search_dirs())
    known = {p.name for d in search_dirs() if d.is_dir() for p in d.iterdir() if (p / "task.toml").is_file()}
    close = did_you_mean(slug, known)
    raise InputError(f"no task named {str(name_or_path)!r} (searched {searched})" + (f"; {close}" if close else ""),
                     hint=f"pass a task directory path, or add its parent folder to ${TASKS_ENV}")


def list_tasks(directory: Path | None = None) -> list[Path]:
    """Task directories (holding a task.toml) directly under ``directory`` (default: the repo's tasks/)."""
    base = directory or REPO_TASKS
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if (p / "task.toml").is_file())
