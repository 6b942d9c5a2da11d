"""``anchorage compare RUN_A RUN_B``: per entry and task, how run B differs from run A and whether it is more
than seed noise.

Registered by :mod:`anchorage.cli`. Reads both campaigns (folders or ``s3://`` prefixes, through
:mod:`anchorage.report.runs`) and compares them with :func:`anchorage.campaigns.comparison.compare`. Exit code
0 when compared, 2 bad input (no campaign there, nothing in common).
"""

from __future__ import annotations

import typer

from anchorage.commands import JSON_HELP, print_json


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)


def compare(
    run_a: str = typer.Argument(..., help="The first campaign: its run folder (runs/demo) or s3://bucket/prefix/name."),
    run_b: str = typer.Argument(..., help="The second campaign (compared against the first: delta = B - A)."),
    metric: str = typer.Option("o_eval", "--metric", help="o_eval (as scored) or bo_eval (Robust BO-Eval against "
                               "each run's own F)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Per entry and task: mean A, mean B, the difference and its significance over seeds (paired where the
    seeds match; Benjamini-Hochberg over all cells). Exit 0 compared, 2 bad input."""
    from rich.console import Console
    from rich.table import Table

    from anchorage.campaigns.comparison import METRICS, compare
    from anchorage.errors import InputError, did_you_mean
    from anchorage.report.runs import open_campaign

    if metric not in METRICS:
        raise InputError(f"--metric {metric!r} is not one of {', '.join(METRICS)}",
                         hint=did_you_mean(metric, METRICS) or "use o_eval or bo_eval")
    a, b = open_campaign(run_a), open_campaign(run_b)
    result = compare(a.records, a.baseline, b.records, b.baseline, metric=metric, run_a=run_a, run_b=run_b)
    if not result.cells:
        raise InputError(f"{run_a} and {run_b} have no (entry, task) cell in common",
                         hint="compare runs of the same entries on the same tasks")
    profiles = {tuple(a.metadata()["profiles"]), tuple(b.metadata()["profiles"])}
    if len(profiles) > 1:
        typer.secho(f"note: the runs were scored under different profiles ({' vs '.join(map(', '.join, profiles))}): "
                    "their differences include the profiles'", fg="yellow", err=True)
    if as_json:
        print_json(result.to_dict())
        return
    table = Table(title=f"{metric}: {run_b} (B) vs {run_a} (A)")
    for column in ("entry", "task", "seeds A/B", "mean A", "mean B", "Δ B−A", "95% CI", "test", "p", "q", "verdict"):
        table.add_column(column, justify="left" if column in ("entry", "task", "test", "verdict") else "right")
    for cell in result.cells:
        ci = f"[{cell.ci95[0]:+.4f}, {cell.ci95[1]:+.4f}]" if cell.ci95 else "—"
        table.add_row(cell.entry, cell.task, f"{len(cell.seeds_a)}/{len(cell.seeds_b)}", f"{cell.mean_a:.4f}",
                      f"{cell.mean_b:.4f}", f"{cell.delta:+.4f}", ci, f"{cell.test} (n={cell.n})",
                      "—" if cell.p is None else f"{cell.p:.3g}", "—" if cell.q is None else f"{cell.q:.3g}",
                      cell.verdict + (f" — {cell.note}" if cell.note else ""))
    console = Console(width=200)
    console.print(table)
    for label, cells in (("only in A", result.only_a), ("only in B", result.only_b)):
        if cells:
            console.print(f"{label}: " + ", ".join(f"{e} × {t}" for e, t in cells))
    console.print(result.method)
