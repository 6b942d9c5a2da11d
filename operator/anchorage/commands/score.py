"""``anchorage score``: score one artifact (or results folder) against a task's metric panel.

Registered by :mod:`anchorage.cli`. Prints the score record (``--json``) or a table, and can write a
Harbor ``reward.json`` (``--reward-file``) so the scorer serves as a task's verifier. A bad artifact is
a record (``gradable: false``, exit 1: the model's failure); a path that does not exist, a bad task, an
artifact of another task (named ``<other-task>_result.json``, or a results folder holding only another task's)
or a bad baseline (F outside [0, 1], or not below the anchor panel's O) is bad input (exit 2). ``--baseline``
takes F as a number or a file. What the artifact wrote is made readable before it is printed
(:mod:`anchorage.text`: no terminal control sequence, no invalid Unicode reaches the terminal).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer

from anchorage.commands import EXIT_MODEL_FAILURE, PROFILE_HELP, markup, print_json, task_option


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
    profile: str | None = typer.Option(None, "--profile", help=PROFILE_HELP),
) -> None:
    """Score an artifact: raw panel R, O-Eval, Robust BO-Eval, per-metric rewards and gates.

    Exit code: 0 scored (gates may have failed: the record says so), 1 the artifact is ungradable or absent
    from the results folder (the model's failure, the record says why), 2 bad input (no such file, a bad task,
    an artifact of another task, a baseline outside [0, 1] or not below O).
    """
    from anchorage.errors import InputError
    from anchorage.scoring import score_artifact
    from anchorage.tasks import load_task, resolve_task

    if not artifact.exists():
        raise InputError(f"{artifact}: no such artifact or results folder",
                         hint="pass the artifact JSON or the results folder that holds <slug>_result.json")
    loaded = load_task(resolve_task(task))
    _check_task_of(artifact, loaded.slug)
    given = _baseline(baseline)
    record = score_artifact(loaded, artifact, baseline=given, gates=not no_gates, lean=lean, profile=profile)
    if given is not None:
        _check_below_anchor(baseline or "", record.baseline_raw, record.oracle_raw)
    if reward_file is not None:
        reward_file.parent.mkdir(parents=True, exist_ok=True)
        reward_file.write_text(json.dumps(record.reward_map(), indent=2) + "\n", encoding="utf-8")
    if as_json:
        print_json(record.to_dict())
    else:
        _print_table(record.to_dict())
    if not record.gradable:
        raise typer.Exit(EXIT_MODEL_FAILURE)


RESULT_SUFFIX = "_result.json"


def _check_task_of(artifact: Path, slug: str) -> None:
    """An artifact (or a results folder holding only artifacts) of *another* task is bad input, not the model's
    failure: ``other-task_result.json`` named as the artifact, or a folder with another task's result file and
    none of this one's."""
    from anchorage.errors import InputError

    if artifact.is_dir():
        mine = (artifact / f"{slug}{RESULT_SUFFIX}").exists()
        others = sorted(p.name[:-len(RESULT_SUFFIX)] for p in artifact.glob(f"*{RESULT_SUFFIX}")
                        if p.is_file() and not p.is_symlink())
        others = [o for o in others if o != slug and _is_task(o)]
        if not mine and others:
            raise InputError(f"{artifact} holds the result of task {others[0]!r} ({others[0]}{RESULT_SUFFIX}), not "
                             f"of {slug!r}", hint=f"score it with --task {others[0]}, or pass {slug}'s results folder")
        return
    name = artifact.name
    if name.endswith(RESULT_SUFFIX):
        other = name[:-len(RESULT_SUFFIX)]
        if other != slug and _is_task(other):
            raise InputError(f"{artifact} is an artifact of task {other!r} (its name), not of {slug!r}",
                             hint=f"score it with --task {other}, or pass {slug}{RESULT_SUFFIX}")


def _is_task(name: str) -> bool:
    from anchorage.errors import InputError
    from anchorage.tasks import resolve_task

    try:
        resolve_task(name)
    except (InputError, OSError):
        return False
    return True


def _baseline(value: str | None) -> float | Path | None:
    """``--baseline``: a number is F itself (a raw panel score, in [0, 1]); anything else is a path."""
    from anchorage.errors import InputError

    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return Path(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InputError(f"--baseline {value}: F is a raw panel score, a finite number from 0 to 1",
                         hint="e.g. --baseline 0.35 (the baseline entry's raw R), or the baseline's artifact or "
                              "score record")
    return number


def _check_below_anchor(given: str, f_value: float, oracle: float) -> None:
    """F must lie below O (the anchor panel's score): Robust BO-Eval measures the way from F up to O."""
    from anchorage.errors import InputError

    if f_value >= oracle:
        raise InputError(f"--baseline {given}: F = {f_value:.6g} is not below the anchor panel's O = {oracle:.6g}, "
                         "so Robust BO-Eval has no scale", hint="F is the baseline entry's raw score, below O: pass a "
                         "smaller number or the baseline entry's artifact")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value + 0.0:.6g}" if value else "0"
    return "—" if value is None else markup(value)


def _print_table(rec: dict[str, Any]) -> None:
    """The record for a terminal: every text an artifact could have put there made readable and markup-escaped."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    table = Table(title=markup(f"{rec['task']} — {rec['artifact']} — profile {rec['profile_ref']} "
                               f"({rec['anchor_source']})"))
    for column in ("path", "value", "anchor", "baseline", "mode", "direction", "weight", "reward", "status"):
        table.add_column(column)
    for m in rec["metrics"]:
        status = m["status"] + (f": {m['reason']}" if m["reason"] else "")
        table.add_row(markup(m["path"]), _fmt(m["value"]), _fmt(m["anchor"]), _fmt(m["baseline_value"]),
                      markup(m["mode"].split("_")[0]), markup(m["direction"]), _fmt(m["weight"]), _fmt(m["reward"]),
                      markup(status))
    console.print(table)
    for gate in rec["gates"]:
        console.print(markup(f"gate {gate['name']}: {gate['status']} ({gate['severity']}) {gate['message']}"))
    if rec["recovered_from"]:
        console.print(f"[yellow]recovery:[/] {markup(rec['recovery_note'])}")
    if rec["error"]:
        console.print(f"[red]ungradable:[/] {markup(rec['error'])}")
    if rec["penalty"]:
        console.print(f"[red]penalty:[/] {markup(rec['penalty'])}")
    console.print(f"raw R = {_fmt(rec['raw'])}   oracle O = {_fmt(rec['oracle_raw'])}   baseline F = "
                  f"{_fmt(rec['baseline_raw'])} ({markup(rec['baseline_source'])})")
    if rec["obligations"]:
        ob = rec["obligations"]
        console.print(markup(f"obligations ({ob['checker']}): {ob['proved']}/{ob['total']} proved, {ob['failed']} "
                             f"failed, {ob['missing']} missing evidence"))
    console.print(f"O-Eval = {_fmt(rec['o_eval'])}   Robust BO-Eval = {_fmt(rec['bo_eval'])} "
                  f"({markup(rec['bo_branch'])})")
