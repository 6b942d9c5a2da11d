"""``anchorage rescore RUN_DIR --profile P``: the same run's artifacts scored under another scoring profile.

Registered by :mod:`anchorage.cli`. Writes ``RUN_DIR/profiles/P/`` (records, leaderboard.*, plots,
report.html) without touching the run or rerunning any agent (:mod:`anchorage.report.rescoring`), and
prints that profile's leaderboard (``--json``: the folder, profile, leaderboard and files). ``RUN_DIR`` may be a
store prefix (``s3://bucket/prefix/<campaign>``): the profile's folder is written under it
(:mod:`anchorage.report.storecopy`).
"""

from __future__ import annotations

from pathlib import Path

import typer

from anchorage.commands import JSON_HELP, PROFILE_HELP, print_json


def register(app: typer.Typer) -> None:
    app.command("rescore")(rescore)


def rescore(
    run_dir: str = typer.Argument(..., help="A campaign's run folder (runs/<campaign>), or its store prefix "
                                  "(s3://bucket/prefix/<campaign>)."),
    profile: str = typer.Option(..., "--profile", help=PROFILE_HELP),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Also draw the PNG plots."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Rescore RUN_DIR's artifacts under PROFILE into RUN_DIR/profiles/PROFILE and print its leaderboard."""
    from rich.console import Console
    from rich.table import Table

    from anchorage.commands import markup, shown
    from anchorage.report.rescoring import rescore_run
    from anchorage.report.storecopy import is_store_uri, store_copy
    from anchorage.report.tables import board_notes, to_text

    if is_store_uri(run_dir):
        with store_copy(run_dir) as copy:
            out_dir, board, written = rescore_run(copy.folder, profile, with_plots=plots, source=run_dir)
            uploaded = copy.upload([p for p in out_dir.rglob("*") if p.is_file()])
            where = uploaded[out_dir / "campaign.json"].removesuffix("/campaign.json")
            outputs = {kind: uploaded[path] for kind, path in written.items()}
    else:
        out_dir, board, files = rescore_run(Path(run_dir), profile, with_plots=plots)
        where, outputs = str(out_dir), {kind: str(path) for kind, path in files.items()}
    if as_json:
        print_json({"run": where, "profile": board.profile, "leaderboard": board.to_dict(),
                    "outputs": dict(sorted(outputs.items()))})
        return
    table = Table(title=markup(f"Leaderboard — {run_dir.rstrip('/').rsplit('/', 1)[-1]} — scoring profile "
                               f"{board.profile} (rescored)"))
    for column in ("entry", "Art.", "O-Eval", "Robust BO-Eval", "cost/seed"):
        table.add_column(column)
    for cells in to_text(board):
        table.add_row(*map(markup, cells[:5]))
    Console(width=160).print(table)
    for note in board_notes(board):
        typer.echo(shown(note))
    for kind, path in sorted(outputs.items()):
        typer.echo(shown(f"{kind}: {path}"))
