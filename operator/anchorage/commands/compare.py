"""``anchorage compare RUN_A RUN_B``: per entry and task, how run B differs from run A and whether it is more
than seed noise.

Registered by :mod:`anchorage.cli`. Reads both campaigns (folders or ``s3://`` prefixes, through
:mod:`anchorage.report.runs`) and compares them with :func:`anchorage.campaigns.comparison.compare`. Exit code
0 when compared, 2 bad input (no campaign there, nothing in common, a negative ``--min-effect``).
"""

from __future__ import annotations

import math

import typer

from anchorage.campaigns.comparison import MIN_EFFECT
from anchorage.commands import JSON_HELP, print_json


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)


def compare(
    run_a: str = typer.Argument(..., help="The first campaign: its run folder (runs/demo) or s3://bucket/prefix/name."),
    run_b: str = typer.Argument(..., help="The second campaign (compared against the first: delta = B - A)."),
    metric: str = typer.Option("o_eval", "--metric", help="o_eval (as scored) or bo_eval (Robust BO-Eval against "
                               "each run's own F)."),
    min_effect: float = typer.Option(MIN_EFFECT, "--min-effect", help="The practical threshold: a difference smaller "
                                     "than this (in the metric's unit) is never called higher or lower."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Per entry and task: mean A, mean B, the difference and its 95% CI over seeds (paired over the matched seeds;
    Benjamini-Hochberg over all cells), and a verdict only when the CI excludes 0 and the difference passes
    --min-effect. Exit 0 compared, 2 bad input."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from anchorage.campaigns.comparison import METRICS, compare
    from anchorage.errors import InputError, did_you_mean
    from anchorage.report.runs import open_campaign
    from anchorage.report.tables import fixed

    if metric not in METRICS:
        raise InputError(f"--metric {metric!r} is not one of {', '.join(METRICS)}",
                         hint=did_you_mean(metric, METRICS) or "use o_eval or bo_eval")
    if not (math.isfinite(min_effect) and min_effect >= 0):
        raise InputError(f"--min-effect {min_effect}: the practical threshold must be a number >= 0",
                         hint="e.g. --min-effect 0.01 (one hundredth of the metric's unit; 0 to call any difference)")
    a, b = open_campaign(run_a), open_campaign(run_b)
    result = compare(a.records, a.baseline, b.records, b.baseline, metric=metric, run_a=run_a, run_b=run_b,
                     min_effect=min_effect)
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
    table = Table(title=escape(f"{metric}: {run_b} (B) vs {run_a} (A)"))
    for column in ("entry", "task", "seeds A/B", "samples", "mean A", "mean B", "Δ B−A", "95% CI", "test", "p", "q",
                   "verdict"):
        table.add_column(column, justify="left" if column in ("entry", "task", "samples", "test", "verdict")
                         else "right")
    for cell in result.cells:
        ci = f"[{fixed(cell.ci95[0], sign=True)}, {fixed(cell.ci95[1], sign=True)}]" if cell.ci95 else "—"
        samples = (f"{cell.paired} matched" if cell.test == "paired-t" else f"{cell.n_a}/{cell.n_b} unpaired")
        table.add_row(escape(cell.entry), escape(cell.task), f"{len(cell.seeds_a)}/{len(cell.seeds_b)}", samples,
                      fixed(cell.mean_a), fixed(cell.mean_b), fixed(cell.delta, sign=True), ci, cell.test,
                      "—" if cell.p is None else f"{cell.p:.3g}", "—" if cell.q is None else f"{cell.q:.3g}",
                      escape(cell.verdict + (f" — {cell.note}" if cell.note else "")))
    console = Console(width=220)
    console.print(table)
    for label, cells in (("only in A", result.only_a), ("only in B", result.only_b)):
        if cells:
            console.print(escape(f"{label}: " + ", ".join(f"{e} × {t}" for e, t in cells)))
    console.print(escape(f"{result.method}. Practical threshold: {min_effect:g}."))
