"""Leaderboard and per-task tables as JSON, CSV and Markdown (and plain text for the terminal).

Called by :func:`anchorage.report.writing.write_outputs` and the HTML report. Pure formatting of a
:class:`anchorage.campaigns.aggregation.Leaderboard`.
"""

from __future__ import annotations

import csv
import io

from anchorage.campaigns.aggregation import Leaderboard, Row

HEADER = ["rank", "entry", "Art.", "O-Eval", "O-Eval std", "BO-Eval", "BO-Eval std", "cost/seed USD", "seeds", "infra failed"]
CONFIRMED = "confirmed"   # extra column when some trial ran verification.panel: confirmed/judged
CBU = "CBU"               # extra column when some trial ran verification.cbu: mean utility


def extra_header(board: Leaderboard) -> list[str]:
    return ([CONFIRMED] if board.has_panel else []) + ([CBU] if board.has_cbu else [])


def header(board: Leaderboard) -> list[str]:
    """The leaderboard's columns: :data:`HEADER`, plus ``confirmed`` / ``CBU`` when the campaign ran them."""
    return [*HEADER, *extra_header(board)]


def cost_text(row: Row, currency: str = "") -> str:
    """The row's cost per seed; a lower bound when some cost is unknown: "≥ 0.0123, 3 requests unmetered"."""
    value = f"{currency}{row.cost_per_seed_usd:.4f}"
    if not row.costs_unknown:
        return value
    if row.unmetered_requests:
        return f"≥ {value}, {row.unmetered_requests} request(s) unmetered"
    return f"≥ {value}, {row.costs_unknown} trial cost(s) unknown"


def rows(board: Leaderboard) -> list[list[str]]:
    out: list[list[str]] = []
    for rank, row in enumerate(board.rows, 1):
        flag = f" (incomplete: {row.cells_scored}/{row.cells_expected} cells scored)" if row.incomplete else ""
        cells = [
            str(rank), row.entry + flag, f"{row.artifacts_mean:.1f}/{row.tasks}",
            f"{row.o_eval_mean:.4f}", f"{row.o_eval_std:.4f}", f"{_unsigned_zero(row.bo_eval_mean):+.4f}",
            f"{row.bo_eval_std:.4f}",
            cost_text(row), str(row.seeds), str(row.infrastructure_failed),
        ]
        if board.has_panel:
            cells.append(f"{row.panel_confirmed}/{row.panel_trials}")
        if board.has_cbu:
            cells.append("—" if row.cbu_mean is None else f"{row.cbu_mean:.4f}")
        out.append(cells)
    return out


#: Columns of ``leaderboard.csv``: plain numbers (no "4.0/4", no "+1.0000"), one fact per column.
CSV_HEADER = ["rank", "entry", "incomplete", "cells_scored", "cells_expected", "artifacts_mean", "tasks",
              "o_eval_mean", "o_eval_std", "bo_eval_mean", "bo_eval_std", "cost_per_seed_usd",
              "cost_is_lower_bound", "costs_unknown", "unmetered_requests", "seeds", "infrastructure_failed", "profile"]


def _unsigned_zero(value: float, digits: int = 4) -> float:
    """``value`` rounded, so that a mean of -2.5e-17 prints +0.0000, not -0.0000."""
    return round(value, digits) + 0.0


def to_csv(board: Leaderboard) -> str:
    """The leaderboard for spreadsheets and scripts: numbers as numbers (full precision), flags as true/false,
    the scoring profile of every row in its own column.

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
            row.infrastructure_failed, board.profile]
        if board.has_panel:
            cells += [row.panel_confirmed, row.panel_trials]
        if board.has_cbu:
            cells.append("" if row.cbu_mean is None else row.cbu_mean)
        writer.writerow([c + 0.0 if isinstance(c, float) else c for c in cells])  # -0.0 is written 0.0
    return buffer.getvalue()


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _md_table(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines)


def per_task_body(board: Leaderboard, metric: str) -> tuple[list[str], list[list[str]]]:
    entries = [row.entry for row in board.rows]
    body: list[list[str]] = []
    for task in board.tasks:
        cells = board.per_task[task]
        body.append([task] + [f"{_unsigned_zero(getattr(cells[e], metric)):.4f}" if e in cells else "—" for e in entries])
    return ["task", *entries], body


def to_markdown(board: Leaderboard) -> str:
    leader = [[r[1], r[2], f"{r[3]} ± {r[4]}", f"{r[5]} ± {r[6]}", r[7], r[8], r[9], *r[10:]] for r in rows(board)]
    columns = ["entry", "Art.", "O-Eval (mean ± std)", "Robust BO-Eval (mean ± std)", "cost/seed USD", "seeds",
               "infra failed"] + [{"confirmed": "panel confirmed"}.get(c, c) for c in extra_header(board)]
    parts = [f"# Leaderboard — scoring profile {board.profile}", "",
             _md_table(columns, leader), "",
             *([f"**{board.cost_note[0].upper()}{board.cost_note[1:]}.**", ""] if board.cost_note else []),
             f"Scoring profile: {board.profile}. Standard deviation: {board.std}. "
             f"Baseline entry (F): {board.baseline or 'none (F from each task configuration)'}.",
             "", board.ranking, ""]
    for metric, title in (("o_eval", "O-Eval"), ("bo_eval", "Robust BO-Eval")):
        header, body = per_task_body(board, metric)
        means = ["column mean"] + [f"{_column_mean(board, e, metric):.4f}" for e in header[1:]]
        parts += [f"## Per task: {title} (mean over seeds) — profile {board.profile}", "",
                  _md_table(header, [*body, means]), ""]
    return "\n".join(parts)


def _column_mean(board: Leaderboard, entry: str, metric: str) -> float:
    values = [getattr(board.per_task[t][entry], metric) for t in board.tasks if entry in board.per_task[t]]
    return sum(values) / len(values) if values else float("nan")


def to_text(board: Leaderboard) -> list[list[str]]:
    """Rows for a terminal table: entry, Art., O-Eval ± std, BO-Eval ± std, cost (+ panel confirmed, CBU)."""
    return [[r[1], r[2], f"{r[3]} ± {r[4]}", f"{r[5]} ± {r[6]}", cost_text(row, "$"), *r[10:]]
            for r, row in zip(rows(board), board.rows, strict=True)]
