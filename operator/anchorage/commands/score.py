"""``anchorage score``: score one artifact (or results folder) against a task's metric panel.

Registered by :mod:`anchorage.cli`. Prints the score record (``--json``) or a table, and can write a
Harbor ``reward.json`` (``--reward-file``) so the scorer serves as a task's verifier. A bad artifact is
a record (``gradable: false``, exit 1: the model's failure); a path that does not exist, a bad task or
baseline is bad input (exit 2). ``--baseline`` takes F as a number or a file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer

from anchorage.commands import EXIT_MODEL_FAILURE, PROFILE_HELP, task_option


def register(app: typer.Typer) -> None:
    app.command("score")(score)


def score(
    artifact: Path = typer.Argument(..., help="The artifact JSON, or a results folder searched for "
                                    "<slug>_result.json (near-miss names are recovered and recorded)."),
    task: str = task_option(),
    baseline: str | None = typer.Option(None, "--baseline", help="F of Robust BO-Eval: a number (a raw panel score), "
                                        "or the baseline entry's artifact or score record; default: the "
                                        "configuration's baseline endpoint."),
    as_json: bool = typer.Option(False, "--json", help="Print the full score record as JSON."),
    reward_file: Path | None = typer.Option(None, "--reward-file", help="Also write a Harbor reward.json "
                                            "(flat map of numbers: reward = O-Eval, raw, o_eval, bo_eval, ...)."),
    no_gates: bool = typer.Option(False, "--no-gates", help="Skip the programmatic gates (no hard-gate penalty)."),
    lean: bool = typer.Option(False, "--lean", help="Also check the Lean obligation layer (verification.lean): "
                              "counts in the record's obligations{}; lake build only where lake is on PATH."),
    profile: str = typer.Option("paper", "--profile", help=PROFILE_HELP),
) -> None:
    """Score an artifact: raw panel R, O-Eval, Robust BO-Eval, per-metric rewards and gates.

    Exit code: 0 scored (gates may have failed: the record says so), 1 the artifact is ungradable or absent
    from the results folder (the model's failure, the record says why), 2 bad input (no such file, a bad task
    or baseline).
    """
    from anchorage.errors import InputError
    from anchorage.scoring import score_artifact

    if not artifact.exists():
        raise InputError(f"{artifact}: no such artifact or results folder",
                         hint="pass the artifact JSON or the results folder that holds <slug>_result.json")
    record = score_artifact(task, artifact, baseline=_baseline(baseline), gates=not no_gates, lean=lean,
                            profile=profile)
    if reward_file is not None:
        reward_file.parent.mkdir(parents=True, exist_ok=True)
        reward_file.write_text(json.dumps(record.reward_map(), indent=2) + "\n", encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(record.to_dict(), indent=2, ensure_ascii=False, allow_nan=False))
    else:
        _print_table(record.to_dict())
    if not record.gradable:
        raise typer.Exit(EXIT_MODEL_FAILURE)


def _baseline(value: str | None) -> float | Path | None:
    """``--baseline``: a number is F itself; anything else is a path."""
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return Path(value)
    if not math.isfinite(number):
        from anchorage.errors import InputError

        raise InputError(f"--baseline {value}: F must be a finite number", hint="e.g. --baseline 0.35")
    return number


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "—" if value is None else str(value)


def _print_table(rec: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    table = Table(title=f"{rec['task']} — {rec['artifact']} — profile {rec['profile_ref']} ({rec['anchor_source']})")
    for column in ("path", "value", "anchor", "baseline", "mode", "direction", "weight", "reward", "status"):
        table.add_column(column)
    for m in rec["metrics"]:
        status = m["status"] + (f": {m['reason']}" if m["reason"] else "")
        table.add_row(m["path"], _fmt(m["value"]), _fmt(m["anchor"]), _fmt(m["baseline_value"]),
                      m["mode"].split("_")[0], m["direction"], _fmt(m["weight"]), _fmt(m["reward"]), status)
    console.print(table)
    for gate in rec["gates"]:
        console.print(f"gate {gate['name']}: {gate['status']} ({gate['severity']}) {gate['message']}")
    if rec["recovered_from"]:
        console.print(f"[yellow]recovery:[/] {rec['recovery_note']}")
    if rec["error"]:
        console.print(f"[red]ungradable:[/] {rec['error']}")
    if rec["penalty"]:
        console.print(f"[red]penalty:[/] {rec['penalty']}")
    console.print(f"raw R = {_fmt(rec['raw'])}   oracle O = {_fmt(rec['oracle_raw'])}   baseline F = "
                  f"{_fmt(rec['baseline_raw'])} ({rec['baseline_source']})")
    if rec["obligations"]:
        ob = rec["obligations"]
        console.print(f"obligations ({ob['checker']}): {ob['proved']}/{ob['total']} proved, {ob['failed']} failed, "
                      f"{ob['missing']} missing evidence")
    console.print(f"O-Eval = {_fmt(rec['o_eval'])}   Robust BO-Eval = {_fmt(rec['bo_eval'])} ({rec['bo_branch']})")
