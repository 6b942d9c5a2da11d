"""``anchorage rescore-published ANSWERS.json --profile P``: a benchmark entry's published answers, rescored.

Registered by :mod:`anchorage.cli`. Reads an answers file in the shape of the benchmark's published answers
(``{ENTRY: {TASK: {METRIC_PATH: value}}}``, see :mod:`anchorage.scoring.published`), scores every benchmark
task of each entry under the profile and prints, per task, raw / O-Eval / BO-Eval and the hard gates that
penalised — beside the published cell when ``--scores`` is given — then the means over the scored tasks.
Tasks without answers are listed as missing (never scored as 0); partly answered tasks are marked.
"""

from __future__ import annotations

from pathlib import Path

import typer

from anchorage.commands import JSON_HELP, PROFILE_HELP, print_json


def register(app: typer.Typer) -> None:
    app.command("rescore-published")(rescore_published)


def rescore_published(
    answers: Path = typer.Argument(..., help="A published answers file: {ENTRY: {TASK: {METRIC_PATH: value}}} "
                                             "(e.g. tests/scoring/published/v4-pro-answers.json)."),
    profile: str | None = typer.Option(None, "--profile", help=PROFILE_HELP),
    entry: list[str] = typer.Option([], "--entry", help="Only this entry of the file (repeatable; default: all)."),
    scores: Path | None = typer.Option(None, "--scores", help="The entries' published scores file, to show the "
                                                              "published cells beside (e.g. v4-pro-scores.json)."),
    view: str = typer.Option("report@4a3807d", "--view", help="Which published view of --scores to show."),
    tasks_dir: Path | None = typer.Option(None, "--tasks-dir", help="The task suite (default: the repo's tasks/)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Rescore a published entry's per-metric answers under PROFILE; missing answers are reported as missing."""
    from anchorage.errors import InputError, did_you_mean
    from anchorage.scoring.published import load_answers, load_scores, rescore_entry

    entries = load_answers(answers)
    published = load_scores(scores) if scores is not None else {}
    for name in entry:
        if name not in entries:
            close = did_you_mean(name, entries)
            raise InputError(f"{answers} has no entry {name!r}" + (f" ({close})" if close else ""),
                             hint=f"use one of: {', '.join(entries)}")
    chosen = entry or list(entries)
    results = [rescore_entry(name, entries[name], profile, tasks_dir=tasks_dir,
                             published=published.get(name) if scores is not None else None, view=view)
               for name in chosen]
    if as_json:
        print_json({"answers": str(answers), "scores": None if scores is None else str(scores),
                    "entries": [r.to_dict() for r in results]})
        return
    for result in results:
        _print(result)


def _print(result: object) -> None:
    from rich.console import Console
    from rich.table import Table

    from anchorage.scoring.published import EntryRescore

    assert isinstance(result, EntryRescore)
    with_published = result.view is not None
    table = Table(title=f"{result.entry} — published answers rescored under {result.profile}")
    columns = ["task", "answers", "raw", "O-Eval", "BO-Eval", "hard gates"]
    if with_published:
        columns += [f"published O-Eval ({result.view})", "published BO-Eval"]
    for column in columns:
        table.add_column(column)
    for row in result.tasks:
        record = row.record
        answered = {"missing": "missing", "unknown_task": "not a task"}.get(
            row.status, f"{len(row.answered)}/{len(row.answered) + len(row.unanswered)}"
            + (" (partial)" if row.status == "partial" else ""))
        cells = [row.task, answered]
        if record is None:
            cells += ["—", "—", "—", row.note]
        else:
            cells += [f"{record.raw:.6f}", f"{100 * record.o_eval:.2f} %", f"{100 * record.bo_eval:+.2f} %",
                      ", ".join(g.name for g in record.gates if g.hard_error) or "—"]
        if with_published:
            cell = row.published or {}
            cells += [_pct(cell.get("o_eval")), _pct(cell.get("bo_eval"), sign=True)]
        table.add_row(*cells)
    Console(width=200).print(table)
    summary = result.summary()
    mean = summary["mean_o_eval"]
    line = (f"{summary['scored']} of {summary['benchmark_tasks']} benchmark tasks scored"
            + (f"; mean O-Eval {100 * mean:.2f} %, mean BO-Eval {100 * summary['mean_bo_eval']:+.2f} %"
               if mean is not None else ""))
    if summary["published_mean_o_eval"] is not None:
        line += f" (published, same tasks: {100 * summary['published_mean_o_eval']:.2f} %)"
    typer.echo(line)
    for key, label in (("missing", "missing (no answers; not scored, not in the means)"),
                       ("partial", "partial (unanswered metrics earn 0: lower bounds)"),
                       ("unknown_tasks", "answers for tasks the suite does not have"),
                       ("hard_gated", "hard-gated")):
        if summary[key]:
            typer.echo(f"{label}: {', '.join(summary[key])}")


def _pct(value: object, *, sign: bool = False) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "—"
    return f"{100 * value:+.2f} %" if sign else f"{100 * value:.2f} %"
