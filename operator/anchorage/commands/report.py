"""``anchorage report RUN_DIR``: rebuild a campaign's leaderboard, plots and self-contained HTML report.

Registered by :mod:`anchorage.cli`; reads only the run folder (``campaign.json`` and the trials'
``trial.json``), so it works on a finished, interrupted or copied run.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def report(run_dir: Path = typer.Argument(..., help="A campaign's run folder (runs/<campaign>)."),
           as_json: bool = typer.Option(False, "--json", help="Print the files written and the leaderboard as JSON."),
           ) -> None:
    """Recompute the leaderboard from RUN_DIR's trial records and write leaderboard.*, plots/ and report.html."""
    from anchorage.commands import print_json
    from anchorage.report.writing import rebuild

    outputs = rebuild(run_dir)
    board = json.loads(outputs["json"].read_text(encoding="utf-8"))
    if as_json:
        print_json({"profile": board.get("profile"), "outputs": {k: str(v) for k, v in sorted(outputs.items())},
                    "leaderboard": board})
        return
    typer.echo(f"scoring profile: {board.get('profile', 'paper@1')} (named on every table of the report)")
    for kind, path in sorted(outputs.items()):
        typer.echo(f"{kind}: {path}")
