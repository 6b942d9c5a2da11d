"""Agent kinds → what runs in the sandbox (argv, environment, extra read-only binds, label).

Called by :mod:`.trials` for every trial. Model-backed kinds (``codex``, ``opencode``,
``claude-code``, ``mock``) get the gateway; ``oracle`` runs the task's ``solution/solve.sh`` with the
solution folder bound read-only at ``/solution``; ``replay`` copies a committed artifact on the
host (no sandbox: nothing is executed) and is labelled a replay; ``command`` is any argv template
with ``{instruction}`` (also ``{task}``, ``{seed}``, ``{model}``). An agent CLI that is not on the
sandbox's PATH is reported before anything runs, as the trial's ``agent_error``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from anchorage.manifests import AgentSpec
from anchorage.runtime.local.sandbox import INSIDE_MOUNT, sandbox_path, sandbox_python
from anchorage.tasks import Task

MODEL_KINDS = frozenset({"codex", "opencode", "claude-code", "mock"})
SOLUTION_MOUNT = "/solution"
IMPORTED_ANCHOR_LABEL = "imported anchor — replayed expected_result, labelled"


@dataclass(frozen=True)
class AgentPlan:
    """How one agent runs. ``problem`` set means it cannot run (the reason is the trial's message)."""

    kind: str
    label: str
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    ro_binds: dict[str, Path] = field(default_factory=dict)
    needs_gateway: bool = False
    replay_source: Path | None = None
    problem: str | None = None


def anchor_is_imported(task: Task) -> bool:
    """True when the task says its anchor is only imported (``[metadata] anchor = "imported"``)."""
    marker = str(task.config.metadata.get("anchor", "")).lower()
    if marker == "imported":
        return True
    readme = task.solution_dir / "README.md"
    return readme.is_file() and "anchor: imported" in readme.read_text(encoding="utf-8", errors="replace").lower()


def cli_templates(spec: AgentSpec, instruction: str) -> list[str]:
    model = spec.model or ""
    if spec.kind == "codex":
        argv = ["codex", "exec", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check",
                "--model", model, "--json", "--enable", "unified_exec"]
        if spec.reasoning_effort:
            argv += ["-c", f"model_reasoning_effort={spec.reasoning_effort}"]
        return [*argv, "--", instruction]
    if spec.kind == "opencode":
        return ["opencode", f"--model={model}", "run", "--format=json", "--thinking",
                "--dangerously-skip-permissions", "--", instruction]
    return ["claude", "--print", "--model", model, "--output-format=json",
            "--dangerously-skip-permissions", "--", instruction]


def _on_sandbox_path(program: str) -> bool:
    return shutil.which(program, path=sandbox_path()) is not None


def plan_agent(spec: AgentSpec, task: Task, *, seed: int, base_dir: Path) -> AgentPlan:
    """What to run for ``spec`` on ``task``. ``base_dir`` resolves relative replay paths."""
    instruction = task.instruction
    if spec.kind == "oracle":
        return _oracle(task, base_dir)
    if spec.kind == "replay":
        return _replay(spec.artifact or "", task, seed, base_dir, label="replay")
    if spec.kind == "mock":
        argv = [sandbox_python(), "-I", f"{INSIDE_MOUNT}/mock_agent.py", instruction]
        env = {"ANCHORAGE_ARTIFACT": f"/root/results/{task.artifact_name}", "ANCHORAGE_MODEL": spec.model or "mock",
               "ANCHORAGE_SEED": str(seed)}
        return AgentPlan("mock", "mock (built-in agent, deterministic mock model)", argv, {**spec.env, **env},
                         needs_gateway=True)
    if spec.kind == "command":
        values = {"instruction": instruction, "task": task.slug, "seed": str(seed), "model": spec.model or ""}
        argv = [_fill(part, values) for part in spec.command or []]
        return AgentPlan("command", "command", argv, dict(spec.env), needs_gateway=spec.model is not None)
    argv = cli_templates(spec, instruction)
    env = {**spec.env, "ANCHORAGE_MODEL": spec.model or ""}
    plan = AgentPlan(spec.kind, f"{spec.kind} ({spec.model})", argv, env, needs_gateway=True)
    if not _on_sandbox_path(argv[0]):
        return AgentPlan(spec.kind, plan.label, argv, env, needs_gateway=True,
                         problem=f"the {spec.kind} CLI ({argv[0]!r}) is not installed on the sandbox's PATH "
                                 f"({sandbox_path()}); install it on the host (agents cannot download tools)")
    return plan


def _fill(template: str, values: dict[str, str]) -> str:
    """Replace only the known ``{name}`` placeholders (other braces, e.g. shell or JSON, stay as written)."""
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template


def _oracle(task: Task, base_dir: Path) -> AgentPlan:
    if anchor_is_imported(task):
        plan = _replay(str(task.expected_result_path), task, 0, base_dir, label=IMPORTED_ANCHOR_LABEL)
        return AgentPlan("oracle", IMPORTED_ANCHOR_LABEL, replay_source=plan.replay_source, problem=plan.problem)
    if not (task.solution_dir / "solve.sh").is_file():
        return AgentPlan("oracle", "oracle", problem=f"{task.solution_dir / 'solve.sh'} is missing: the task has no "
                         "runnable anchor (mark it [metadata] anchor = \"imported\" to replay expected_result.json)")
    env = {**task.config.solution.env, "ANCHORAGE_SOLUTION_DIR": SOLUTION_MOUNT}
    argv = ["/bin/bash", f"{SOLUTION_MOUNT}/solve.sh"]
    return AgentPlan("oracle", "oracle (task's runnable reproduction)", argv, env,
                     ro_binds={SOLUTION_MOUNT: task.solution_dir})


def _replay(template: str, task: Task, seed: int, base_dir: Path, *, label: str) -> AgentPlan:
    text = _fill(template, {"task": task.slug, "seed": str(seed)})
    text = text.removeprefix("file://")
    source = Path(text).expanduser()
    if not source.is_absolute():
        source = (base_dir / source).resolve()
    if not source.exists():
        return AgentPlan("replay", label, replay_source=source,
                         problem=f"replay artifact {source} does not exist")
    return AgentPlan("replay", label, replay_source=source)
