"""``anchorage oracle --task TASK``: run a task's anchor reproduction in the sandbox and score it.

Registered by :mod:`anchorage.cli`. A task whose anchor is only imported (no runnable
``solution/solve.sh``) is said so plainly; nothing is run for it.
"""

from __future__ import annotations

from pathlib import Path

import typer

from anchorage.commands import (
    EXIT_MODEL_FAILURE,
    JSON_HELP,
    legacy_task_argument,
    one_task,
    phases_exit_code,
    print_json,
    task_option,
)


def register(app: typer.Typer) -> None:
    app.command("oracle")(oracle)


def oracle(
    task_option: str | None = task_option(required=False),
    task_dir: str | None = legacy_task_argument(),
    runs_dir: Path = typer.Option(Path("runs"), "--runs-dir", help="Where the trial folder is written."),
    timeout: float | None = typer.Option(None, "--timeout", help="Agent timeout in seconds (default: task.toml)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Run the task's solution/solve.sh in the sandbox, then score its artifact against the anchor.

    Exit code: 0 the reproduction ran and was scored, 1 it failed (or the anchor is only imported), 3 the
    platform failed, 2 bad input.
    """
    from anchorage.manifests import AgentSpec, Limits, Metadata, Trial, TrialSpec
    from anchorage.runtime.local import sandbox
    from anchorage.runtime.local.engine import run_with_retries
    from anchorage.runtime.local.trials import LocalRuntime, TrialJob
    from anchorage.tasks import load_task, resolve_task
    from anchorage.trials.agents.oracle import anchor_is_imported

    task = load_task(resolve_task(one_task(task_option, task_dir, "oracle")))
    if anchor_is_imported(task):
        if as_json:
            print_json({"task": task.slug, "imported_anchor": True, "expected_result": str(task.expected_result_path)})
            raise typer.Exit(EXIT_MODEL_FAILURE)
        typer.echo(f"{task.slug}: the anchor is imported, not reproduced (task.toml [metadata] anchor = \"imported\"): "
                   "there is no runnable reproduction to run. "
                   f"Its committed expected result is {task.expected_result_path}; campaigns replay it, labelled "
                   "'imported anchor'.")
        raise typer.Exit(1)
    trial = Trial(metadata=Metadata(name=f"oracle-{task.slug}"[:63].rstrip("-")),
                  spec=TrialSpec(task=str(task.root), agent=AgentSpec(kind="oracle"),
                                 limits=Limits(agent_timeout_sec=timeout)))
    runtime = LocalRuntime(mechanism=sandbox.detect_mechanism(), base_dir=Path.cwd())
    job = TrialJob(trial.metadata.name, task, trial.spec, "oracle")
    record = run_with_retries(job, runs_dir / trial.metadata.name, runtime)
    score = record.score
    code = phases_exit_code([record.phase])
    if as_json:
        print_json({"task": task.slug, "imported_anchor": False, "folder": str(runs_dir / trial.metadata.name),
                    "phase": record.phase, "reason": record.reason, "message": record.message,
                    "duration_sec": record.durations.total_sec,
                    "score": score.model_dump(mode="json") if score is not None else None})
        raise typer.Exit(code)
    typer.echo(f"{task.slug}: {record.phase} ({record.reason}) in {record.durations.total_sec:.1f}s "
               f"{record.message}".rstrip())
    if score is not None and score.raw is not None:
        typer.echo(f"  raw {score.raw:.6f} (anchor panel {score.oracle_raw:.6f})  O-Eval {score.o_eval:.4f}"
                   f"  gradable {score.gradable}")
    typer.echo(f"  folder: {runs_dir / trial.metadata.name}")
    raise typer.Exit(code)
