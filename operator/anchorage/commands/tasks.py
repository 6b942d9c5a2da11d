"""``anchorage tasks validate|list``: check task directories and list the benchmark's tasks.

Registered by :mod:`anchorage.cli`. ``validate`` prints every problem with its path and a fix hint and
exits 1 when any is an error; ``list`` shows the tasks under the repository's ``tasks/`` (or ``--dir``).
"""

from __future__ import annotations

from pathlib import Path

import typer

tasks_app = typer.Typer(help="Check and list Harbor task directories.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")


@tasks_app.command("validate")
def validate(
    dirs: list[Path] = typer.Argument(..., help="Task directories to check."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 on warnings too."),
) -> None:
    """Report every problem of each task directory (path + fix hint); exit 1 if any is an error."""
    from anchorage.scoring.validation import validate_task

    failed = False
    for directory in dirs:
        if directory.is_file():   # `tasks/*` also matches tasks/README.md and tasks/NOTICE
            typer.echo(f"{directory}: skipped (a file, not a task directory)")
            continue
        problems = validate_task(directory)
        errors = sum(p.severity == "error" for p in problems)
        warnings = len(problems) - errors
        for problem in problems:
            typer.echo(problem.render())
        verdict = "ok" if errors == 0 else "FAILED"
        typer.echo(f"{directory}: {verdict} ({errors} errors, {warnings} warnings)")
        failed = failed or errors > 0 or (strict and warnings > 0)
    if failed:
        raise typer.Exit(1)


@tasks_app.command("list")
def list_cmd(
    directory: Path | None = typer.Option(None, "--dir", help="Folder of task directories (default: the repo's tasks/)."),
) -> None:
    """List the tasks (slug, metric count, schema version, name) under tasks/."""
    from rich.console import Console
    from rich.table import Table

    from anchorage.errors import AnchorageError
    from anchorage.scoring import load_score_config
    from anchorage.tasks import list_tasks, load_task
    from anchorage.tasks.loading import REPO_TASKS

    base = directory or REPO_TASKS
    found = list_tasks(base)
    if not found:
        typer.echo(f"no tasks under {base}")
        return
    table = Table(title=f"tasks under {base}")
    for column in ("slug", "metrics", "scoring", "schema", "name"):
        table.add_column(column)
    for root in found:
        try:
            task = load_task(root)
            config = load_score_config(task.score_config_path)
        except AnchorageError as exc:
            table.add_row(root.name, "—", "—", "—", f"[red]{exc.message.splitlines()[0]}[/]")
            continue
        included = sum(m.weight > 0 for m in config.metrics)
        table.add_row(task.slug, f"{included}/{len(config.metrics)}", config.scoring_version.split("-")[2]
                      if config.scoring_version.count("-") >= 2 else config.scoring_version,
                      task.config.schema_version, task.name)
    Console(width=200).print(table)
