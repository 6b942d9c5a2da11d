"""``anchorage report RUN_DIR``: rebuild a campaign's leaderboard, plots and self-contained HTML report.

Registered by :mod:`anchorage.cli`; reads only the run folder (``campaign.json`` and the trials'
``trial.json``), so it works on a finished, interrupted or copied run. ``RUN_DIR`` may be a store prefix
(``s3://bucket/prefix/<campaign>``, as ``anchorage run --store`` publishes it): the outputs go back there
(:mod:`anchorage.report.storecopy`).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def report(run_dir: str = typer.Argument(..., help="A campaign's run folder (runs/<campaign>), or its store prefix "
                                          "(s3://bucket/prefix/<campaign>)."),
           as_json: bool = typer.Option(False, "--json", help="Print the files written and the leaderboard as JSON."),
           ) -> None:
    """Recompute the leaderboard from RUN_DIR's trial records and write leaderboard.*, plots/ and report.html."""
    from anchorage.report.storecopy import is_store_uri, store_copy
    from anchorage.report.writing import rebuild

    if is_store_uri(run_dir):
        with store_copy(run_dir) as copy:
            written = rebuild(copy.folder)
            board = json.loads(written["json"].read_text(encoding="utf-8"))
            uploaded = copy.upload(list(written.values()))
            uris = {kind: uploaded[path] for kind, path in written.items()}
        _print(board, uris, as_json)
        return
    outputs = rebuild(Path(run_dir))
    board = json.loads(outputs["json"].read_text(encoding="utf-8"))
    _print(board, {k: str(v) for k, v in outputs.items()}, as_json)


def _print(board: dict[str, object], outputs: dict[str, str], as_json: bool) -> None:
    from anchorage.commands import print_json

    if as_json:
        print_json({"profile": board.get("profile"), "outputs": dict(sorted(outputs.items())), "leaderboard": board})
        return
    typer.echo(f"scoring profile: {board.get('profile', 'paper@1')} (named on every table of the report)")
    for kind, path in sorted(outputs.items()):
        typer.echo(f"{kind}: {path}")
