"""``anchorage tasks validate|list|show``: check task directories, list the tasks, show one under a profile.

Registered by :mod:`anchorage.cli`. ``validate`` prints every problem with its path and a fix hint and
exits 1 when any is an error; ``list`` shows the tasks under the repository's ``tasks/`` (or ``--dir``),
with ``--metrics`` the seed's tally (declared / scored / excluded per task); ``show`` prints a task's anchor
and gates under a scoring profile and every difference of that profile from ``paper``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from anchorage.commands import JSON_HELP, PROFILE_HELP, legacy_task_argument, one_task, print_json, task_option

tasks_app = typer.Typer(help="Check and list Harbor task directories.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")


@tasks_app.command("validate")
def validate(
    dirs: list[Path] = typer.Argument(..., help="Task directories to check."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 on warnings too."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Report every problem of each task directory (path + fix hint); exit 1 if any is an error."""
    from anchorage.scoring.validation import validate_task

    failed = False
    found: list[dict[str, Any]] = []
    for directory in dirs:
        if directory.is_file():   # `tasks/*` also matches tasks/README.md and tasks/NOTICE
            if not as_json:
                typer.echo(f"{directory}: skipped (a file, not a task directory)")
            continue
        problems = validate_task(directory)
        errors = sum(p.severity == "error" for p in problems)
        warnings = len(problems) - errors
        found.append({"task": str(directory), "ok": errors == 0, "errors": errors, "warnings": warnings,
                      "problems": [p.render() for p in problems]})
        if not as_json:
            for problem in problems:
                typer.echo(problem.render())
            typer.echo(f"{directory}: {'ok' if errors == 0 else 'FAILED'} ({errors} errors, {warnings} warnings)")
        failed = failed or errors > 0 or (strict and warnings > 0)
    if as_json:
        print_json(found)
    if failed:
        raise typer.Exit(1)


@tasks_app.command("list")
def list_cmd(
    directory: Path | None = typer.Option(None, "--dir", help="Folder of task directories (default: the repo's tasks/)."),
    metrics: bool = typer.Option(False, "--metrics", help="The seed's tally instead: metrics declared, scored "
                                 "(in the panel) and excluded (weight 0, with the reason) per task, and the totals."),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
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
    if metrics:
        _print_tally(found, as_json)
        return
    rows: list[dict[str, Any]] = []
    for root in found:
        try:
            task = load_task(root)
            config = load_score_config(task.score_config_path)
        except AnchorageError as exc:
            rows.append({"slug": root.name, "error": exc.message.splitlines()[0]})
            continue
        rows.append({"slug": task.slug, "scored": sum(m.weight > 0 for m in config.metrics),
                     "declared": len(config.metrics), "scoring": config.scoring_version.split("-")[2]
                     if config.scoring_version.count("-") >= 2 else config.scoring_version,
                     "schema": task.config.schema_version, "name": task.name})
    if as_json:
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    table = Table(title=f"tasks under {base}")
    for column in ("slug", "metrics", "scoring", "schema", "name"):
        table.add_column(column)
    for row in rows:
        if "error" in row:
            table.add_row(row["slug"], "—", "—", "—", f"[red]{row['error']}[/]")
        else:
            table.add_row(row["slug"], f"{row['scored']}/{row['declared']}", row["scoring"], row["schema"], row["name"])
    Console(width=200).print(table)


def _print_tally(found: list[Path], as_json: bool) -> None:
    from anchorage.scoring.describe import SEED_TALLY, tally
    from anchorage.scoring.profiles import PAPER

    tallies = [tally(root) for root in found]
    benchmark = [t for t in tallies if t.task != "smoke-inventory"]
    declared, scored = sum(t.declared for t in benchmark), sum(t.scored for t in benchmark)
    excluded = [(t.task, path, reason) for t in benchmark for path, reason in t.excluded]
    seed_declared = SEED_TALLY["scored"] + SEED_TALLY["weight0_declared"]
    seed_panel = SEED_TALLY["scored"] - SEED_TALLY["panel_exclusions"]
    if as_json:
        typer.echo(json.dumps({"profile": PAPER.name, "tasks": [
            {"task": t.task, "declared": t.declared, "scored": t.scored,
             "excluded": [{"path": p, "reason": r} for p, r in t.excluded]} for t in tallies],
            "benchmark_total": {"declared": declared, "scored": scored, "excluded": len(excluded)},
            "seed": {"declared": seed_declared, "scored_with_weight": SEED_TALLY["scored"],
                     "in_panel": seed_panel}}, indent=2, ensure_ascii=False))
        return
    typer.echo("profile paper: the seed's tally (A.2, G.1, G.3) — declared / scored (in the panel) / excluded")
    for t in tallies:
        typer.echo(f"  {t.task:36} {t.declared:3d} declared  {t.scored:3d} scored  {len(t.excluded):2d} excluded")
        for path, reason in t.excluded:
            typer.echo(f"      excluded {path}: {' '.join(reason.split())}")
    typer.echo(f"  {'18 benchmark tasks':36} {declared:3d} declared  {scored:3d} scored  {len(excluded):2d} excluded")
    typer.echo(f"  {'the seed':36} {seed_declared:3d} declared  {seed_panel:3d} scored  "
               f"{SEED_TALLY['weight0_declared'] + SEED_TALLY['panel_exclusions']:2d} excluded "
               f"({SEED_TALLY['scored']} scored metrics + 1 Wordle metric of weight 0; G.3 excludes 3 of the 60)")
    if declared != seed_declared:
        typer.echo(f"  note: the configurations declare {declared - seed_declared:+d} metric(s) against the seed's "
                   "count; the seed does not say which, so no metric is dropped (tasks/README.md)")


@tasks_app.command("show")
def show(
    task_name: str | None = task_option(required=False),
    task: str | None = legacy_task_argument(),
    profile: str | None = typer.Option(None, "--profile", help=PROFILE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the differences from paper as JSON."),
) -> None:
    """A task's anchor and hard gates under a scoring profile, and every difference from paper."""
    from anchorage.scoring.describe import differences, tally, to_json
    from anchorage.scoring.profiles import PAPER, get_profile
    from anchorage.tasks import resolve_task
    from anchorage.tasks.profiles import load_profiles

    root = resolve_task(one_task(task_name, task, "tasks show"))
    chosen = get_profile(profile)
    diff = differences(root, chosen)
    if as_json:
        typer.echo(to_json(diff))
        return
    declared = load_profiles(root)
    counts = tally(root, chosen)
    typer.echo(f"{root.name} — profile {chosen.ref}: {chosen.summary}")
    typer.echo(f"  paper anchor: {declared.anchors.paper.source} — {' '.join(declared.anchors.paper.evidence.split())}")
    typer.echo(f"  metrics: {counts.declared} declared, {counts.scored} scored, {len(counts.excluded)} excluded")
    seed_gates = ", ".join(f"{g.gate} ({g.seed_class})" for g in declared.gates.paper) or "none"
    typer.echo(f"  seed-class gates (hard under every profile but compat overrides): {seed_gates}")
    if chosen is PAPER:
        typer.echo("  differences from paper: none (this is paper)")
        return
    if diff.empty:
        typer.echo("  differences from paper: none on this task")
        return
    typer.echo("  differences from paper:")
    for entry in diff.anchors:
        where = entry.get("erratum") and f"erratum {entry['erratum']} ({entry['script']} -> {entry['result']})"
        typer.echo(f"    anchor {entry['path']}: {entry[PAPER.name]:.10g} -> {entry['profile']:.10g}  [{where or 'compat'}]")
        for key in ("reason", "check", "evidence"):
            if entry.get(key):
                typer.echo(f"      {key}: {entry[key]}")
    for entry in diff.metrics:
        changes = ", ".join(f"{k} {v[PAPER.name]} -> {v['profile']}" for k, v in entry.items()
                            if isinstance(v, dict))
        typer.echo(f"    metric {entry['path']}: {changes}")
    if diff.baseline:
        typer.echo(f"    baseline F = {diff.baseline['raw']:g} (source: {diff.baseline['source']})")
    for entry in diff.gates_added:
        typer.echo(f"    + hard gate {entry['gate']} ({entry['form']}; source: {entry['source']})")
        typer.echo(f"        on the anchor: {entry['reason']}")
    for entry in diff.gates_removed:
        typer.echo(f"    - not a hard gate: {entry['gate']} ({entry.get('seed_class', '')})")
    for line in diff.arithmetic:
        typer.echo(f"    arithmetic: {line}")
    for line in diff.notes:
        typer.echo(f"    note: {line}")
