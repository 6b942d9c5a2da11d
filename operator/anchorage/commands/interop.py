"""``anchorage export inspect|harbor`` and ``anchorage import harbor``: other tools' formats in and out.

Registered by :mod:`anchorage.cli`. ``export inspect RUN -o DIR`` writes Inspect AI eval logs (one per entry
× task; needs the ``anchorage[inspect]`` extra) that ``inspect view --log-dir DIR`` opens;
``export harbor RUN -o DIR`` writes a Harbor job folder; ``import harbor JOB_DIR`` scores a Harbor job's
artifacts with this project's scorer into an ordinary run folder (:mod:`anchorage.interop`). RUN is a run
folder or an ``s3://`` prefix. Exit codes: 0 written, 2 bad input; ``import`` also 1 when a trial was the
model's failure and 3 when one failed for the platform (as ``anchorage run``).
"""

from __future__ import annotations

from pathlib import Path

import typer

from anchorage.commands import JSON_HELP, PROFILE_HELP, phases_exit_code, print_json

RUN_HELP = "The campaign: its run folder (runs/demo) or s3://bucket/prefix/name."
export_app = typer.Typer(help="Export a campaign to another tool's format (Inspect AI logs, a Harbor job).",
                         no_args_is_help=True)
import_app = typer.Typer(help="Score another tool's results with this project's scorer.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
    app.add_typer(import_app, name="import")


@export_app.command("inspect")
def export_inspect(
    run: str = typer.Argument(..., help=RUN_HELP),
    out: Path = typer.Option(..., "-o", "--out", help="Folder for the eval logs (open it with inspect view "
                             "--log-dir OUT)."),
    fmt: str = typer.Option("eval", "--format", help="eval (Inspect's compressed format) or json."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Write the campaign as Inspect AI eval logs: one per entry x task, one sample per trial (needs
    pip install 'anchorage\\[inspect]')."""
    from anchorage.interop.inspect_logs import export_inspect as write
    from anchorage.report.runs import locate_campaign

    runs, name = locate_campaign(run)
    files = write(runs, name, out, fmt=fmt)
    if as_json:
        print_json({"campaign": name, "format": fmt, "logs": [str(f) for f in files]})
        return
    for path in files:
        typer.echo(str(path))
    typer.echo(f"{len(files)} eval log(s); open them with: inspect view --log-dir {out}", err=True)


@export_app.command("harbor")
def export_harbor(
    run: str = typer.Argument(..., help=RUN_HELP),
    out: Path = typer.Option(..., "-o", "--out", help="The jobs folder: the job is written to OUT/<campaign>."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Write the campaign as a Harbor job folder (config.json, result.json, one folder per trial)."""
    from anchorage.interop.harbor import export_harbor as write
    from anchorage.report.runs import locate_campaign

    runs, name = locate_campaign(run)
    job = write(runs, name, out)
    if as_json:
        print_json({"campaign": name, "job": str(job)})
        return
    typer.echo(str(job))


@import_app.command("harbor")
def import_harbor(
    job: Path = typer.Argument(..., help="A Harbor job folder (jobs/<job name>: one <trial>/result.json each)."),
    runs_dir: Path = typer.Option(Path("runs"), "--runs-dir", help="Where the run folder is written."),
    name: str | None = typer.Option(None, "--name", help="The campaign's name (default: the job folder's)."),
    profile: str | None = typer.Option(None, "--profile", help=PROFILE_HELP),
    baseline: str | None = typer.Option(None, "--baseline", help="The entry whose scores are Robust BO-Eval's F."),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Also draw the plots."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Score a Harbor job's artifacts with this project's scorer into RUNS_DIR/NAME (a run folder that view,
    report, compare and rescore read). Exit 0 every trial scored, 1 a trial was the model's failure, 3 one
    failed for the platform, 2 bad input."""
    import json

    from anchorage.commands import shown
    from anchorage.interop.harbor import import_harbor as load
    from anchorage.report.tables import fixed

    out_dir, board, outputs = load(job, runs_dir, name=name, profile=profile, baseline=baseline, with_plots=plots)
    records = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(out_dir.glob("*/trial.json"))]
    code = phases_exit_code(r.get("phase") for r in records)
    if as_json:
        print_json({"run": str(out_dir), "profile": board.profile, "leaderboard": board.to_dict(),
                    "trials": {r["name"]: {"phase": r.get("phase"), "reason": r.get("reason"),
                                           "o_eval": (r.get("score") or {}).get("o_eval")} for r in records},
                    "outputs": {k: str(v) for k, v in outputs.items()}})
    else:
        for record in records:
            score = (record.get("score") or {}).get("o_eval")
            typer.echo(shown(f"{record['name']}: {record.get('phase')} ({record.get('reason')})")
                       + (f" O-Eval {fixed(score)}" if isinstance(score, int | float) else ""))
        typer.echo(shown(f"run: {out_dir}  ·  report: {outputs.get('html')}"))
    raise typer.Exit(code)
