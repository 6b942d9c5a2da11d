"""Leaderboard and per-task tables as JSON, CSV and Markdown (and plain text for the terminal), and the one way a
number is written for a person (:func:`fixed`).

Called by :func:`anchorage.report.writing.write_outputs`, the HTML pages, and the commands that print a board.
Pure formatting of a :class:`anchorage.campaigns.aggregation.Leaderboard`. Nothing is invented: a value the
board does not have is "—" (an empty cell in CSV, null in JSON) and every board says why
(:func:`board_notes`), what F is (the board's one definition), the campaign's total cost and how many planned
cells were scored.
"""

from __future__ import annotations

import csv
import io
import math

from anchorage.campaigns.aggregation import Leaderboard, Row
from anchorage.text import readable

MISSING = "—"
HEADER = ["rank", "entry", "Art.", "O-Eval", "O-Eval std", "BO-Eval", "BO-Eval std", "cost/seed USD", "seeds", "infra failed"]
CONFIRMED = "confirmed"   # extra column when some trial ran verification.panel: confirmed/judged
CBU = "CBU"               # extra column when some trial ran verification.cbu: mean utility


def fixed(value: float | None, digits: int = 4, *, sign: bool = False) -> str:
    """A number as every board and command prints it: ``digits`` decimals, ``+`` when ``sign``, never "-0.0000"
    (a value that rounds to zero is zero), "—" when absent, ``nan``/``inf`` as such."""
    if value is None:
        return MISSING
    if not math.isfinite(value):
        return str(value)
    value = round(value, digits) + 0.0
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def extra_header(board: Leaderboard) -> list[str]:
    return ([CONFIRMED] if board.has_panel else []) + ([CBU] if board.has_cbu else [])


def header(board: Leaderboard) -> list[str]:
    """The leaderboard's columns: :data:`HEADER`, plus ``confirmed`` / ``CBU`` when the campaign ran them."""
    return [*HEADER, *extra_header(board)]


def cost_text(row: Row, currency: str = "") -> str:
    """The row's cost per seed; a lower bound when some cost is unknown: "≥ 0.0123, 3 requests unmetered"."""
    if row.cost_per_seed_usd is None:
        return MISSING
    value = f"{currency}{row.cost_per_seed_usd:.4f}"
    if not row.costs_unknown:
        return value
    if row.unmetered_requests:
        return f"≥ {value}, {row.unmetered_requests} request(s) unmetered"
    return f"≥ {value}, {row.costs_unknown} trial cost(s) unknown"


def entry_label(row: Row) -> str:
    """The entry's name with its flag: "(no score)" or "(incomplete: 3/4 cells scored)"."""
    if not row.scored:
        return f"{row.entry} (no score: 0/{row.cells_expected} cells scored)"
    if row.incomplete:
        return f"{row.entry} (incomplete: {row.cells_scored}/{row.cells_expected} cells scored)"
    return row.entry


def total_cost_text(board: Leaderboard) -> str:
    """The campaign's total cost, every trial included ("≥" when some cost is unknown)."""
    bound = "≥ " if board.cost_note else ""
    return f"{bound}${board.total_cost_usd:.4f}"


def board_notes(board: Leaderboard) -> list[str]:
    """The sentences every view of a board prints under it: entries without a score and why, the board's F,
    the campaign's total cost and cells scored of those planned, an incomplete cost."""
    notes = [f"{row.entry}: {MISSING} {readable(row.no_score)}" for row in board.rows if row.no_score]
    notes.append(f"{board.f_rule}.")
    notes.append(f"Campaign total cost: {total_cost_text(board)} (every trial, infrastructure failures included); "
                 f"{board.cells_scored} of {board.cells_planned} planned cells (entry × task × seed) scored.")
    if board.cost_note:
        notes.append(board.cost_note)
    return notes


def rows(board: Leaderboard) -> list[list[str]]:
    out: list[list[str]] = []
    for rank, row in enumerate(board.rows, 1):
        cells = [
            str(rank), entry_label(row),
            MISSING if row.artifacts_mean is None else f"{row.artifacts_mean:.1f}/{row.tasks}",
            fixed(row.o_eval_mean), fixed(row.o_eval_std), fixed(row.bo_eval_mean, sign=True),
            fixed(row.bo_eval_std), cost_text(row), str(row.seeds), str(row.infrastructure_failed),
        ]
        if board.has_panel:
            cells.append(f"{row.panel_confirmed}/{row.panel_trials}")
        if board.has_cbu:
            cells.append(fixed(row.cbu_mean))
        out.append(cells)
    return out


#: Columns of ``leaderboard.csv``: plain numbers (no "4.0/4", no "+1.0000"), one fact per column; an empty
#: cell is a value the board does not have (``no_score_reason`` says why).
CSV_HEADER = ["rank", "entry", "incomplete", "cells_scored", "cells_expected", "artifacts_mean", "tasks",
              "o_eval_mean", "o_eval_std", "bo_eval_mean", "bo_eval_std", "cost_per_seed_usd",
              "cost_is_lower_bound", "costs_unknown", "unmetered_requests", "seeds", "infrastructure_failed", "profile",
              "no_score_reason", "total_cost_usd", "campaign_total_cost_usd"]


def to_csv(board: Leaderboard) -> str:
    """The leaderboard for spreadsheets and scripts: numbers as numbers (full precision), flags as true/false,
    the scoring profile of every row in its own column, an empty cell where the board has no value.

    A row whose ``cost_is_lower_bound`` is true has trial costs that could not be known (``costs_unknown``):
    its ``cost_per_seed_usd`` counts only what was metered."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    extra = (["panel_confirmed", "panel_trials"] if board.has_panel else []) + (["cbu_mean"] if board.has_cbu else [])
    writer.writerow([*CSV_HEADER, *extra])
    for rank, row in enumerate(board.rows, 1):
        cells: list[object] = [
            rank, row.entry, _flag(row.incomplete), row.cells_scored, row.cells_expected, row.artifacts_mean,
            row.tasks, row.o_eval_mean, row.o_eval_std, row.bo_eval_mean, row.bo_eval_std, row.cost_per_seed_usd,
            _flag(bool(row.costs_unknown)), row.costs_unknown, row.unmetered_requests, row.seeds,
            row.infrastructure_failed, board.profile, readable(row.no_score or ""), row.total_cost_usd,
            board.total_cost_usd]
        if board.has_panel:
            cells += [row.panel_confirmed, row.panel_trials]
        if board.has_cbu:
            cells.append(row.cbu_mean)
        writer.writerow(["" if c is None else c + 0.0 if isinstance(c, float) else c for c in cells])  # no -0.0
    return buffer.getvalue()


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _md_table(header: list[str], body: list[list[str]]) -> str:
    def cell(text: str) -> str:
        return readable(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(cell, cells)) + " |" for cells in body]
    return "\n".join(lines)


def per_task_body(board: Leaderboard, metric: str) -> tuple[list[str], list[list[str]]]:
    entries = [row.entry for row in board.rows]
    body: list[list[str]] = []
    for task in board.tasks:
        cells = board.per_task[task]
        body.append([task] + [fixed(getattr(cells[e], metric), sign=metric == "bo_eval") if e in cells else MISSING
                              for e in entries])
    return ["task", *entries], body


def to_markdown(board: Leaderboard) -> str:
    leader = [[r[1], r[2], _pm(r[3], r[4]), _pm(r[5], r[6]), r[7], r[8], r[9], *r[10:]] for r in rows(board)]
    columns = ["entry", "Art.", "O-Eval (mean ± std)", "Robust BO-Eval (mean ± std)", "cost/seed USD", "seeds",
               "infra failed"] + [{"confirmed": "panel confirmed"}.get(c, c) for c in extra_header(board)]
    notes = board_notes(board)
    cost = notes.pop() if board.cost_note else None
    parts = [f"# Leaderboard — scoring profile {board.profile}", "",
             _md_table(columns, leader), "",
             *[f"- {note}" for note in notes], "",
             *([f"**{cost[0].upper()}{cost[1:]}.**", ""] if cost else []),
             f"Scoring profile: {board.profile}. Standard deviation: {board.std}. "
             f"Baseline entry (F): {board.baseline or 'none (F from each task configuration)'}.",
             "", board.ranking, ""]
    for metric, title in (("o_eval", "O-Eval"), ("bo_eval", "Robust BO-Eval")):
        header, body = per_task_body(board, metric)
        means = ["column mean"] + [fixed(_column_mean(board, e, metric), sign=metric == "bo_eval") for e in header[1:]]
        parts += [f"## Per task: {title} (mean over seeds) — profile {board.profile}", "",
                  _md_table(header, [*body, means]), ""]
        reasons = [f"- {task} × {entry}: {readable(board.cell_reason(task, entry, metric))}"
                   for task in board.tasks for entry in header[1:] if board.cell_reason(task, entry, metric)]
        if reasons:
            parts += ["—: " + ("no scored trial, or F undefined:" if metric == "bo_eval" else "no scored trial:"), "",
                      *reasons, ""]
    return "\n".join(parts)


def _pm(mean: str, std: str) -> str:
    return MISSING if mean == MISSING else f"{mean} ± {std}"


def _column_mean(board: Leaderboard, entry: str, metric: str) -> float | None:
    values = [getattr(board.per_task[t][entry], metric) for t in board.tasks if entry in board.per_task[t]]
    values = [v for v in values if v is not None]
    return math.fsum(values) / len(values) if values else None


def to_text(board: Leaderboard) -> list[list[str]]:
    """Rows for a terminal table: entry, Art., O-Eval ± std, BO-Eval ± std, cost (+ panel confirmed, CBU)."""
    return [[r[1], r[2], _pm(r[3], r[4]), _pm(r[5], r[6]), cost_text(row, "$"), *r[10:]]
            for r, row in zip(rows(board), board.rows, strict=True)]
