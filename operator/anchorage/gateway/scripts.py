"""Scripts of the scripted mock model: which tool calls it makes, in which order, for which task.

Used by :mod:`anchorage.gateway.scripted` (the model that plays them) and by the local engine, which
hands it the scripts of a run's tasks. A script is a list of shell steps and a closing message; the
model sends one step per turn as a tool call of the CLI's own shell tool, reads the tool's output, and
goes on (or stops, saying why, when an output does not show what the step expects). Nothing here runs a
command: the agent CLI runs them, in its sandbox.

A script file (YAML)::

    task: cumcm-2024-a-dragon-dance         # the slug the script is for
    steps:
      - {say: "Looking at the data first.", run: "ls /root/data"}
      - {write: /tmp/work/solve.py, from: solution/solve.py}     # a file of the task folder (host side)
      - {run: "python3 /tmp/work/solve_all.py", expect: "No such file"}   # a failing command
      - {run: "cd /tmp/work && python3 solve.py", expect: "result"}       # the retry
    final: "Done: the result is in /root/results."

``write`` steps become a shell ``cat > PATH <<'EOF'`` command (so every CLI runs them with its shell
tool). ``expect`` is a substring (case-insensitive) the step's tool output must contain; without it any
output is accepted. Without a script file, :func:`oracle_script` plays the task's own reproduction
(``solution/``): look at the data, write the solution's files, run ``solve.sh``, check the artifact.

Where a conversation stands is read from the conversation itself (the CLIs resend it every turn): the
model's tool-call ids carry the step number (``…anc<step>p<poll>_…``), so the model keeps no state.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from anchorage.errors import InputError

WORK_DIR = "/tmp/work"
ARTIFACT_PATTERN = re.compile(r"/root/results/([A-Za-z0-9][A-Za-z0-9._-]*?)_result\.json")
CALL_ID_PATTERN = re.compile(r"anc(\d+)p(\d+)_")
SOLUTION_SUFFIXES = (".sh", ".py")


class Step(BaseModel):
    """One tool call: a shell command (``run``) or a file written through the shell (``write``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    say: str = Field(default="", description="what the model says before the call (a preamble)")
    run: str | None = Field(default=None, description="shell command")
    write: str | None = Field(default=None, description="absolute path of a file to write (in the sandbox)")
    content: str | None = Field(default=None, description="the file's text (write)")
    source: str | None = Field(default=None, alias="from",
                               description="a file of the task folder whose text is written (write)")
    expect: str | None = Field(default=None, description="substring the tool output must contain")
    timeout_sec: int = Field(default=900, gt=0, description="timeout asked of the CLI's shell tool")

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        if (self.run is None) == (self.write is None):
            raise ValueError("a step has exactly one of 'run' (a command) or 'write' (a path)")
        if self.write is not None and (self.content is None) == (self.source is None):
            raise ValueError(f"step write {self.write!r} needs exactly one of 'content' or 'from'")
        return self


class Script(BaseModel):
    """A whole trajectory: steps in order, then the final message."""

    model_config = ConfigDict(extra="forbid")

    task: str | None = Field(default=None, description="task slug the script plays")
    steps: list[Step] = Field(min_length=1)
    final: str = "Done (scripted mock model)."

    @classmethod
    def load(cls, path: Path) -> Script:
        try:
            return cls.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
        except OSError as exc:
            raise InputError(f"cannot read scripted-model script {path}: {exc.strerror}") from exc
        except (yaml.YAMLError, ValidationError) as exc:
            raise InputError(f"scripted-model script {path} is invalid:\n{exc}",
                             hint="keys: task, steps[{say, run | write + content/from, expect}], final") from exc


@dataclass(frozen=True)
class Command:
    """A step made concrete: the shell command line, what to say first, what its output must show."""

    line: str
    say: str
    expect: str | None
    timeout_sec: int


def command_of(step: Step, task_root: Path | None) -> Command:
    """The shell command of ``step``; ``from`` files are read from ``task_root`` (host side)."""
    if step.run is not None:
        return Command(step.run, step.say, step.expect, step.timeout_sec)
    assert step.write is not None
    text = step.content
    if text is None:
        if task_root is None:
            raise InputError(f"step write {step.write!r} reads {step.source!r}, but the script's task is unknown")
        source = (task_root / str(step.source)).resolve()
        if task_root.resolve() not in source.parents:
            raise InputError(f"step write {step.write!r}: {step.source!r} is outside the task folder")
        text = source.read_text(encoding="utf-8")
    return Command(heredoc(step.write, text), step.say or f"Writing {step.write}.", step.expect, step.timeout_sec)


def heredoc(path: str, text: str) -> str:
    """A shell command that writes ``text`` to ``path`` (parent folders created), byte for byte."""
    marker = "ANCHORAGE_EOF_" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]
    body = text if text.endswith("\n") else text + "\n"
    folder = shlex.quote(str(Path(path).parent))
    return f"mkdir -p {folder} && cat > {shlex.quote(path)} <<'{marker}'\n{body}{marker}"


def oracle_script(task_root: Path, slug: str) -> Script:
    """The default script: play the task's reproduction (``solution/``) through the shell tool."""
    solution = task_root / "solution"
    files = sorted(p for p in solution.iterdir() if p.is_file() and p.suffix in SOLUTION_SUFFIXES) \
        if solution.is_dir() else []
    if not any(p.name == "solve.sh" for p in files):
        raise InputError(f"task {slug} has no solution/solve.sh for the scripted model to play",
                         hint="give the scripted model a script file for this task (--scripts DIR)")
    artifact = f"/root/results/{slug}_result.json"
    steps = [Step(say="Let me look at the task's data first.", run="ls -R /root/data | head -n 40")]
    steps += [Step(write=f"{WORK_DIR}/{p.name}", source=f"solution/{p.name}") for p in files]
    steps.append(Step(say="Running the model.", run=f"cd {WORK_DIR} && bash solve.sh"))
    check = f"python3 -c 'import json; json.load(open(\"{artifact}\")); print(\"artifact ok\")'"
    steps.append(Step(say="Checking the result file.", run=check, expect="artifact ok"))
    return Script(task=slug, steps=steps, final=f"Done: the answer is in {artifact} (scripted mock model).")


class ScriptBook:
    """The scripts of a run: a script file per slug where given, else each task's oracle script."""

    def __init__(self, tasks: dict[str, Path], scripts_dir: Path | None = None) -> None:
        self._tasks = dict(tasks)
        self._files: dict[str, Script] = {}
        if scripts_dir is not None:
            for path in sorted(scripts_dir.glob("*.yaml")):
                script = Script.load(path)
                self._files[script.task or path.stem] = script

    def task_root(self, slug: str) -> Path | None:
        return self._tasks.get(slug)

    def script_for(self, slug: str) -> Script | None:
        """The script for ``slug``, or None when neither a file nor the task's solution gives one."""
        if slug in self._files:
            return self._files[slug]
        root = self._tasks.get(slug)
        if root is None:
            return None
        try:
            return oracle_script(root, slug)
        except InputError:
            return None

    def commands(self, slug: str) -> list[Command] | None:
        script = self.script_for(slug)
        if script is None:
            return None
        root = self._tasks.get(slug)
        return [command_of(step, root) for step in script.steps]


def task_slug(prompt: str) -> str | None:
    """The task a prompt is about: the slug of the artifact path the instruction names."""
    match = ARTIFACT_PATTERN.search(prompt)
    return match.group(1) if match else None


@dataclass(frozen=True)
class Position:
    """Where a conversation stands: the last scripted call (step, poll) and its output, if any."""

    step: int | None
    poll: int
    output: str | None


def position(calls: list[tuple[str, str | None]]) -> Position:
    """From the conversation's (call id, tool output) pairs, in order: the last call the script made."""
    for call_id, output in reversed(calls):
        match = CALL_ID_PATTERN.search(call_id)
        if match:
            return Position(int(match.group(1)), int(match.group(2)), output)
    return Position(None, 0, None)


def call_id(prefix: str, step: int, poll: int, salt: str) -> str:
    """A tool-call id that carries the step (and poll) number; ``salt`` keeps ids unique per conversation."""
    digest = hashlib.sha256(f"{salt}\x00{step}\x00{poll}".encode()).hexdigest()[:16]
    return f"{prefix}anc{step}p{poll}_{digest}"
