"""The self-contained HTML report of a campaign run (images inlined as data URIs, no external files).

Called by :func:`anchorage.report.writing.write_outputs` and ``anchorage report RUN_DIR``.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from anchorage.campaigns.aggregation import Leaderboard
from anchorage.report.tables import header as leaderboard_header
from anchorage.report.tables import per_task_body, rows

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}
th{background:#f0f0f0} .bad{color:#a00} .note{color:#555;font-size:13px}
"""


def _table(header: list[str], body: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    lines = ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in body]
    return f"<table><tr>{head}</tr>{''.join(lines)}</table>"


def _image(path: Path) -> str:
    if not path.is_file():
        return ""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def _trials_table(records: list[dict[str, Any]]) -> str:
    body = []
    for r in records:
        score = r.get("score") or {}
        body.append([r.get("name", ""), r.get("entry", ""), r.get("task", ""), str(r.get("seed", "")),
                     str(r.get("phase", "")), str(r.get("reason", "")),
                     f"{score.get('o_eval', float('nan')):.4f}" if "o_eval" in score else "—",
                     str((r.get("agent") or {}).get("label", "")), str(r.get("message", ""))[:120]])
    return _table(["trial", "entry", "task", "seed", "phase", "reason", "O-Eval", "agent", "message"], body)


def render(name: str, board: Leaderboard, records: list[dict[str, Any]], plots: list[Path]) -> str:
    """The whole report as one HTML string."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Anchorage — {html.escape(name)}</title>",
             f"<style>{_STYLE}</style></head><body>", f"<h1>Campaign {html.escape(name)}</h1>",
             f"<h2>Leaderboard — scoring profile {html.escape(board.profile)}</h2>",
             _table(leaderboard_header(board), rows(board)),
             f"<p class='note'>Scoring profile: {html.escape(board.profile)}. "
             f"Standard deviation: {html.escape(board.std)}. Baseline entry (F): "
             f"{html.escape(board.baseline or 'none — F from each task configuration')}.</p>",
             f"<p class='note'>{html.escape(board.ranking)}</p>"]
    parts += [_image(p) for p in plots]
    for metric, title in (("o_eval", "O-Eval"), ("bo_eval", "Robust BO-Eval")):
        header, body = per_task_body(board, metric)
        parts += [f"<h2>Per task: {title} (mean over seeds) — profile {html.escape(board.profile)}</h2>",
                  _table(header, body)]
    f_rows = [[t, f"{v['F']:.4f}", v["source"]] for t, v in board.f_by_task.items()]
    parts += [f"<h2>F per task — profile {html.escape(board.profile)}</h2>", _table(["task", "F", "source"], f_rows)]
    parts += [f"<h2>Trials — profile {html.escape(board.profile)}</h2>", _trials_table(records), "</body></html>"]
    return "\n".join(parts)
