"""``anchorage report RUN_DIR``: rebuild a campaign's leaderboard, plots and self-contained HTML report — or print
its paper table (``--table latex|csv``).

Registered by :mod:`anchorage.cli`; reads only the run folder (``campaign.json`` and the trials'
``trial.json``), so it works on a finished, interrupted or copied run (a rescored folder
``RUN_DIR/profiles/P`` too). ``RUN_DIR`` may be a store prefix (``s3://bucket/prefix/<campaign>``, as ``anchorage
run --store`` publishes it): the outputs go back there (:mod:`anchorage.report.storecopy`). ``--table`` writes
nothing: it prints the table (:mod:`anchorage.report.paper`) on stdout, or into ``--out``.
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
           table: str | None = typer.Option(None, "--table", help="Print the paper table instead, as latex or csv: "
                                            "per entry x task (and over all tasks) n seeds, O-Eval and Robust "
                                            "BO-Eval mean, std and 95% CI, cost, profile and price snapshot."),
           out: Path | None = typer.Option(None, "--out", "-o", help="With --table: write the table to this file."),
           ) -> None:
    """Recompute the leaderboard from RUN_DIR's trial records and write leaderboard.*, plots/ and report.html
    (or, with --table, print the paper table)."""
    from anchorage.report.storecopy import is_store_uri, store_copy
    from anchorage.report.writing import rebuild

    if table is not None:
        if is_store_uri(run_dir):
            with store_copy(run_dir) as copy:
                _table(copy.folder, table, out)
        else:
            _table(Path(run_dir), table, out)
        return
    if out is not None:
        from anchorage.errors import InputError

        raise InputError("--out is where --table writes the table", hint="add --table latex (or csv), or drop --out")
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
    from anchorage.commands import print_json, shown

    if as_json:
        print_json({"profile": board.get("profile"), "outputs": dict(sorted(outputs.items())), "leaderboard": board})
        return
    typer.echo(f"scoring profile: {board.get('profile', 'paper@1')} (named on every table of the report)")
    for kind, path in sorted(outputs.items()):
        typer.echo(shown(f"{kind}: {path}"))


def _table(run_dir: Path, fmt: str, out: Path | None) -> None:
    from anchorage.errors import InputError, did_you_mean
    from anchorage.report import paper
    from anchorage.report.writing import load_campaign

    if fmt not in paper.FORMATS:
        raise InputError(f"--table {fmt!r} is not one of {', '.join(paper.FORMATS)}",
                         hint=did_you_mean(fmt, paper.FORMATS) or "use --table latex or --table csv")
    run = load_campaign(run_dir)
    records = [r for r in run.records if r.get("phase") in ("Succeeded", "Failed", "InfrastructureFailed")]
    text = paper.render(fmt, records, run.board, run.title)
    if out is None:
        typer.echo(text, nl=False)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    typer.echo(f"{out}", err=True)
