"""HTML pieces shared by the self-contained report (``report.html``) and the viewer (``anchorage view``).

Pure functions from run data (leaderboards, trial records, score records, transcripts) to HTML strings;
everything is escaped here. Tables are sortable (click a column header) and filterable (a box above
them) by a small inline script, :data:`SCRIPT` — no external file, no build step; the viewer keeps the
sort and filter of each table in the page's query string so a link shows what its sender saw.
Honest numbers: an unknown cost is written "unknown" with its reason, never $0; a value that is absent
is "—"; every page names the profile, price snapshot and version its numbers come from.
Called by :mod:`anchorage.report.html` and :mod:`anchorage.viewer.app`.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from anchorage.campaigns.aggregation import Leaderboard
from anchorage.report.tables import cost_text

STYLE = (files("anchorage.report") / "assets" / "page.css").read_text(encoding="utf-8")
SCRIPT = (files("anchorage.report") / "assets" / "tables.js").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Cell:
    """One table cell: its text, the value it sorts by (default: the text), a link, a CSS class, a tooltip."""

    text: str
    sort: str | float | None = None
    href: str | None = None
    cls: str = ""
    title: str = ""
    left: bool = False


CellLike = Cell | str


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def num(value: Any, digits: int = 4, *, sign: bool = False) -> str:
    """A number for a page ("—" when absent or not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—" if value is None else str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int):
        return str(value)
    value = round(value, digits) + 0.0   # no "-0.0000"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def general(value: Any) -> str:
    """A value as read from an artifact (6 significant digits for floats)."""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict | list):
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 80 else text[:77] + "..."
    return "—" if value is None else str(value)


def number_cell(value: Any, digits: int = 4, *, sign: bool = False, cls: str = "") -> Cell:
    sortable = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    return Cell(num(value, digits, sign=sign), sortable, cls=cls)


def cost_cell(record: Mapping[str, Any]) -> Cell:
    """A trial's cost; unknown is said so with its reason (never $0)."""
    value = record.get("cost_usd")
    if value is None:
        reason = record.get("cost_unknown_reason") or "not recorded"
        return Cell("unknown", None, cls="warn", title=str(reason))
    return Cell(f"{float(value):.4f}", float(value), title=str(record.get("cost_source") or ""))


def phase_class(phase: Any) -> str:
    return {"Succeeded": "ok", "Failed": "bad", "InfrastructureFailed": "warn"}.get(str(phase), "")


def link(text: str, href: str | None) -> str:
    return f'<a href="{esc(href)}">{esc(text)}</a>' if href else esc(text)


def _cell_html(item: CellLike, left: bool) -> str:
    cell = item if isinstance(item, Cell) else Cell(str(item))
    classes = " ".join(c for c in (cell.cls, "l" if left or cell.left else "") if c)
    attrs = f' class="{classes}"' if classes else ""
    if cell.sort is not None and str(cell.sort) != cell.text:
        attrs += f' data-v="{esc(cell.sort)}"'
    if cell.title:
        attrs += f' title="{esc(cell.title)}"'
    return f"<td{attrs}>{link(cell.text, cell.href)}</td>"


def _is_left(item: CellLike) -> bool:
    return isinstance(item, Cell) and item.left


def table(table_id: str, header: Sequence[str], rows: Iterable[Sequence[CellLike]], *, left: int = 1,
          filterable: bool = True, note: str = "") -> str:
    """A sortable table (and a filter box above it); the first ``left`` columns are left-aligned text."""
    body = list(rows)
    first = list(body[0]) if body else []
    lefts = [i < left or (i < len(first) and _is_left(first[i])) for i in range(len(header))]
    head = "".join(f'<th class="l" scope="col">{esc(h)}</th>' if lefts[i] else f'<th scope="col">{esc(h)}</th>'
                   for i, h in enumerate(header))
    lines = ["<tr>" + "".join(_cell_html(c, i < left) for i, c in enumerate(row)) + "</tr>" for row in body]
    box = (f'<div class="filter"><label>filter <input type="search" data-filter-for="{esc(table_id)}" '
           f'placeholder="words that a row must contain" aria-label="filter {esc(table_id)}"></label>'
           f'<span class="count" data-count-for="{esc(table_id)}">{len(body)} rows</span></div>'
           if filterable else "")
    caption = f'<p class="note">{note}</p>' if note else ""
    return (f'{box}<table class="sortable" id="{esc(table_id)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(lines)}</tbody></table>{caption}')


def facts(items: Iterable[tuple[str, str]]) -> str:
    """A definition list; values are HTML already (escape them with :func:`esc`)."""
    return '<dl class="facts">' + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


def document(title: str, body: str, *, crumbs: Sequence[tuple[str, str | None]] = ()) -> str:
    """A whole page: style and script inline (a report must work from a file, the viewer without assets)."""
    trail = '<span class="sep">/</span>'.join(link(text, href) for text, href in crumbs)
    top = f'<header class="top">{trail or esc(title)}</header>'
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{esc(title)}</title>"
            f"<style>{STYLE}</style></head><body>{top}<main>{body}</main><script>{SCRIPT}</script></body></html>")


# ----- campaign level ----------------------------------------------------------------------------------------

def metadata(meta: Mapping[str, Any], generator: str) -> str:
    """What made the numbers: campaign, dates, profiles, price snapshots, versions."""
    def joined(key: str) -> str:
        values = meta.get(key) or []
        return esc(", ".join(values)) if values else '<span class="muted">not recorded</span>'

    return facts([
        ("campaign", esc(meta.get("campaign"))), ("from", esc(meta.get("location"))),
        ("trials", esc(f"{meta.get('trials')} finished of {meta.get('planned')} planned")),
        ("started", esc(meta.get("started") or "—")), ("finished", esc(meta.get("finished") or "—")),
        ("baseline entry (F)", esc(meta.get("baseline") or "none — F from each task configuration")),
        ("scoring profile", joined("profiles")), ("price snapshot", joined("price_snapshots")),
        ("Anchorage (trials)", joined("anchorage_versions")), ("scorer", joined("scorers")),
        ("driver", joined("drivers")), ("made by", esc(generator)),
    ])


def leaderboard_table(board: Leaderboard, entry_href: Callable[[str], str | None]) -> str:
    """Table 7: rank, entry, Art., O-Eval and Robust BO-Eval mean ± std over seeds, cost per seed — and, when the
    campaign's cost is incomplete (unknown trial costs, unmetered requests), the board's note saying so."""
    header = ["rank", "entry", "Art.", "O-Eval", "± std", "Robust BO-Eval", "± std", "cost/seed USD", "seeds",
              "infra failed"]
    header += (["panel confirmed"] if board.has_panel else []) + (["CBU"] if board.has_cbu else [])
    rows: list[list[CellLike]] = []
    for rank, row in enumerate(board.rows, 1):
        flag = f" (incomplete: {row.cells_scored}/{row.cells_expected} cells scored)" if row.incomplete else ""
        cells: list[CellLike] = [
            Cell(str(rank), rank), Cell(row.entry + flag, row.entry, href=entry_href(row.entry), left=True),
            Cell(f"{row.artifacts_mean:.1f}/{row.tasks}", row.artifacts_mean),
            number_cell(row.o_eval_mean), number_cell(row.o_eval_std),
            number_cell(row.bo_eval_mean, sign=True), number_cell(row.bo_eval_std),
            Cell(cost_text(row), row.cost_per_seed_usd, cls="warn" if row.costs_unknown else ""),
            Cell(str(row.seeds), row.seeds), Cell(str(row.infrastructure_failed), row.infrastructure_failed,
                                                  cls="warn" if row.infrastructure_failed else ""),
        ]
        if board.has_panel:
            cells.append(Cell(f"{row.panel_confirmed}/{row.panel_trials}", row.panel_confirmed))
        if board.has_cbu:
            cells.append(number_cell(row.cbu_mean))
        rows.append(cells)
    note = f"<p class='warn'>{esc(board.cost_note)}</p>" if board.cost_note else ""  # the campaign's cost is incomplete
    return table("leaderboard", header, rows, left=2, filterable=False) + note


def per_task_table(board: Leaderboard, metric: str, cell_href: Callable[[str, str], str | None]) -> str:
    """Tasks × entries: the metric's mean over seeds (each cell links to that entry × task)."""
    entries = [row.entry for row in board.rows]
    rows: list[list[CellLike]] = []
    for task in board.tasks:
        cells = board.per_task[task]
        line: list[CellLike] = [Cell(task, left=True)]
        for entry in entries:
            cell = cells.get(entry)
            value = getattr(cell, metric) if cell is not None else None
            line.append(Cell(num(value, sign=metric == "bo_eval"), value, href=cell_href(entry, task)))
        rows.append(line)
    return table(f"per-task-{metric.replace('_', '-')}", ["task", *entries], rows, filterable=False)


def f_table(board: Leaderboard) -> str:
    rows = [[Cell(t, left=True), number_cell(v["F"]), Cell(str(v["source"]), left=True)]
            for t, v in board.f_by_task.items()]
    return table("f-per-task", ["task", "F", "source"], rows, filterable=False)


def trials_table(records: Sequence[Mapping[str, Any]], trial_href: Callable[[str], str | None],
                 table_id: str = "trials") -> str:
    """Every trial: coordinates, phase and reason, its scores, cost, duration and message."""
    header = ["trial", "entry", "task", "seed", "phase", "reason", "raw R", "O-Eval", "hard gate", "cost USD",
              "duration s", "message"]
    rows: list[list[CellLike]] = []
    for r in records:
        score = r.get("score") or {}
        phase = str(r.get("phase") or "")
        hard = score.get("hard_gate_failed")
        message = str(r.get("message") or "")
        rows.append([
            Cell(str(r.get("name")), href=trial_href(str(r.get("name")))), Cell(str(r.get("entry")), left=True),
            Cell(str(r.get("task")), left=True), Cell(str(r.get("seed")), r.get("seed")),
            Cell(phase, cls=phase_class(phase), left=True), Cell(str(r.get("reason") or ""), left=True),
            number_cell(score.get("raw")), number_cell(score.get("o_eval")),
            Cell("failed" if hard else ("—" if not score else "no"), cls="bad" if hard else "", left=True),
            cost_cell(r), number_cell((r.get("durations") or {}).get("total_sec"), 1),
            Cell(message if len(message) <= 160 else message[:157] + "...", left=True, title=message),
        ])
    return table(table_id, header, rows, left=6)


# ----- one trial -------------------------------------------------------------------------------------------

def outcome_line(record: Mapping[str, Any]) -> str:
    phase = str(record.get("phase") or "unknown")
    message = str(record.get("message") or "")
    return (f'<p><span class="badge {phase_class(phase)}">{esc(phase)}</span> {esc(record.get("reason") or "")}'
            + (f" — {esc(message)}" if message else "") + "</p>")


def usage_facts(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Cost and tokens as the record has them; an unknown cost shows its reason."""
    usage = record.get("usage") or {}
    cost = record.get("cost_usd")
    if cost is None:
        reason = record.get("cost_unknown_reason") or "not recorded"
        metered = usage.get("cost_usd")
        part = f" (metered part: ${float(metered):.6f})" if isinstance(metered, int | float) else ""
        cost_html = f'<span class="warn">unknown</span> — {esc(reason)}{esc(part)}'
    else:
        cost_html = f"${float(cost):.6f} <span class='muted'>({esc(record.get('cost_source') or '')})</span>"
    items = [("cost", cost_html)]
    if usage:
        tokens = ", ".join(f"{k.replace('_tokens', '').replace('_', ' ')} {usage[k]}" for k in
                           ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens",
                            "billed_output_tokens") if usage.get(k) is not None)
        items.append(("tokens", esc(tokens or "none recorded")))
        items.append(("requests", esc(f"{usage.get('requests', 0)} ({usage.get('retries', 0)} retried, "
                                      f"{usage.get('errors', 0)} errors, {usage.get('unmetered_requests', 0)} "
                                      "unmetered)")))
        models = ", ".join(sorted((usage.get("by_model") or {}).keys()))
        if models:
            items.append(("models", esc(models)))
    return items


def trial_facts(record: Mapping[str, Any]) -> str:
    agent = record.get("agent") or {}
    sandbox = record.get("sandbox") or {}
    versions = record.get("versions") or {}
    durations = record.get("durations") or {}
    prompt = record.get("prompt") or {}
    artifact = record.get("artifact") or {}
    items: list[tuple[str, str]] = [
        ("campaign · entry · task · seed", esc(f"{record.get('campaign')} · {record.get('entry')} · "
                                               f"{record.get('task')} · {record.get('seed')}")),
        ("agent", esc(" · ".join(str(v) for v in (agent.get("label") or agent.get("kind"), agent.get("model"),
                                                   agent.get("reasoning_effort")) if v))),
        ("attempt · driver", esc(f"{record.get('attempt')} · {record.get('driver')}")),
        ("started · finished", esc(f"{record.get('started_at') or '—'} · {record.get('finished_at') or '—'}")),
        ("durations s", esc(", ".join(f"{k.removesuffix('_sec')} {v:.2f}" for k, v in durations.items()
                                      if isinstance(v, int | float)) or "—")),
        ("exit code", esc(record.get("exit_code"))),
        ("sandbox", esc(f"{sandbox.get('mechanism') or '—'}" + (f" · {sandbox['user']}" if sandbox.get("user") else ""))),
        ("limits", esc(", ".join(f"{k} {v}" for k, v in (sandbox.get("limits") or {}).items() if v is not None) or "—")),
        *usage_facts(record),
        ("scoring profile", esc(record.get("scoring_profile") or "—")),
        ("price snapshot", esc(versions.get("price_snapshot") or "—")),
        ("versions", esc(f"Anchorage {versions.get('anchorage') or '?'} · scorer {versions.get('scorer') or '—'}")),
        ("prompt", esc(f"{prompt.get('path', '—')} (sha256 {str(prompt.get('sha256', ''))[:12]}…, "
                       f"delivered {prompt.get('delivered')})" if prompt else "—")),
        ("artifact", esc((artifact.get("path") or "none") + (f" — recovered from {artifact['recovered_from']}: "
                                                             f"{artifact.get('recovery_note', '')}"
                                                             if artifact.get("recovered_from") else ""))),
    ]
    if record.get("replay"):
        items.append(("replay", esc((record.get("replay") or {}).get("label"))))
    for attempt in record.get("previous_attempts") or []:
        items.append((f"attempt {attempt.get('attempt')}", esc(f"{attempt.get('reason')}: {attempt.get('message')}")))
    return facts(items)


def score_headline(score: Mapping[str, Any]) -> str:
    items = [
        ("raw R", esc(num(score.get("raw"), 6)) + (f" <span class='muted'>(before gates "
                                                    f"{esc(num(score.get('raw_before_gates'), 6))})</span>"
                                                    if score.get("hard_gate_failed") else "")),
        ("anchor panel O", esc(f"{num(score.get('oracle_raw'), 6)} ({score.get('oracle_source') or '—'})")),
        ("baseline F", esc(f"{num(score.get('baseline_raw'), 6)} ({score.get('baseline_source') or '—'})")),
        ("O-Eval", esc(num(score.get("o_eval")))),
        ("Robust BO-Eval (as scored)", esc(f"{num(score.get('bo_eval'), sign=True)} ({score.get('bo_branch') or '—'})")),
        ("profile", esc(f"{score.get('profile_ref') or score.get('profile') or '—'} — anchors: "
                        f"{score.get('anchor_source') or '—'}")),
        ("gradable", esc(score.get("gradable"))),
    ]
    if score.get("penalty"):
        items.append(("penalty", f'<span class="bad">{esc(score["penalty"])}</span>'))
    if score.get("error"):
        items.append(("ungradable", f'<span class="bad">{esc(score["error"])}</span>'))
    if score.get("recovered_from"):
        items.append(("recovery", esc(score.get("recovery_note"))))
    return facts(items)


def metrics_table(score: Mapping[str, Any], table_id: str = "metrics") -> str:
    """The per-metric record: value, anchor, reward, status and reason."""
    header = ["metric (path)", "value", "anchor", "baseline", "reward", "weight", "status", "reason", "mode",
              "direction", "unit"]
    rows: list[list[CellLike]] = []
    for m in score.get("metrics") or []:
        status = str(m.get("status") or "")
        rows.append([
            Cell(str(m.get("path")), left=True), Cell(general(m.get("value")), m.get("number")),
            number_cell(m.get("anchor"), 6), number_cell(m.get("baseline_value"), 6),
            number_cell(m.get("reward")), number_cell(m.get("weight"), 2),
            Cell(status, cls="" if status in ("scored", "excluded") else "bad", left=True),
            Cell(str(m.get("reason") or ""), left=True), Cell(str(m.get("mode") or "").split("_")[0], left=True),
            Cell(str(m.get("direction") or ""), left=True), Cell(str(m.get("unit") or ""), left=True),
        ])
    return table(table_id, header, rows, filterable=len(rows) > 8)


def gate_rank(gate: Mapping[str, Any]) -> int:
    if gate.get("status") == "failed":
        return 0 if gate.get("severity") == "hard" else 1
    return 2 if gate.get("status") == "missing" else 3


def failed_gates(score: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [g for g in score.get("gates") or [] if g.get("status") == "failed"]


def gates_table(score: Mapping[str, Any], table_id: str = "gates") -> str:
    """Every gate with its message, failed ones first (hard before warnings)."""
    gates = sorted(score.get("gates") or [], key=gate_rank)
    rows: list[list[CellLike]] = []
    for g in gates:
        status = str(g.get("status"))
        cls = "bad" if status == "failed" and g.get("severity") == "hard" else (
            "warn" if status in ("failed", "missing") else "ok")
        rows.append([Cell(str(g.get("name")), left=True), Cell(status, gate_rank(g), cls=cls, left=True),
                     Cell(str(g.get("severity")), left=True), Cell(str(g.get("form")), left=True),
                     Cell(str(g.get("message") or ""), left=True), Cell(", ".join(g.get("paths") or []), left=True)])
    failed = failed_gates(score)
    hard = sum(1 for g in failed if g.get("severity") == "hard")
    note = (f"{len(failed)} of {len(gates)} gates failed ({hard} hard, {len(failed) - hard} warnings under "
            f"{esc(score.get('profile_ref') or score.get('profile') or 'the profile')})" if gates else "no gates")
    return f"<p class='note'>{note}</p>" + (table(table_id, ["gate", "status", "severity", "form", "message",
                                                            "paths"], rows, left=6, filterable=len(rows) > 8)
                                            if rows else "")


def obligations_block(score: Mapping[str, Any]) -> str:
    ob = score.get("obligations") or {}
    if not ob:
        return "<p class='note'>Lean obligations: not checked (verification.lean off).</p>"
    counts = ", ".join(f"{k.replace('_', ' ')} {ob[k]}" for k in
                       ("total", "proved", "unconfirmed", "failed", "missing", "proved_by_lean", "disagreements")
                       if k in ob)
    lean = ob.get("lean") or {}
    hard = ", ".join(ob.get("failed_hard") or [])
    return (f"<p class='note'>Lean obligations (checker {esc(ob.get('checker') or '—')}): {esc(counts)}"
            + (f"; <span class='bad'>failed hard: {esc(hard)}</span>" if hard else "")
            + (f"; Lean: {esc(lean.get('reason'))}" if lean.get("reason") else "") + "</p>")


def protocol_block(record: Mapping[str, Any]) -> str:
    parts = []
    panel = record.get("panel")
    if panel:
        parts.append(facts([("panel", esc(f"{panel.get('outcome')} (status {panel.get('status')}, "
                                          f"{panel.get('calls')} calls)"))]))
    cbu = record.get("cbu")
    if cbu:
        parts.append(facts([("CBU", esc(f"{cbu.get('utility')} ({cbu.get('outcome')})"))]))
    return "".join(parts)


def log_block(name: str, text: str, size: int | None, window: int) -> str:
    if size is None:
        return f"<h3>{esc(name)}</h3><p class='note'>not recorded</p>"
    cut = size > window
    label = f"{esc(name)} <span class='muted'>({size} bytes{f', last {window} shown' if cut else ''})</span>"
    return f"<h3>{label}</h3><pre>{esc(text) or '<span class=muted>(empty)</span>'}</pre>"


def trial_detail(record: Mapping[str, Any], score: Mapping[str, Any] | None, *, problem: str | None = None,
                 logs: Sequence[tuple[str, str, int | None]] = (), log_window: int = 0,
                 transcript_href: str | None = None, id_prefix: str = "") -> str:
    """One trial: outcome, facts (agent, sandbox, cost and tokens, durations, profile, prices, versions), the
    score record (headline, per-metric table, gates with their messages, obligations), protocols and logs."""
    parts = [outcome_line(record)]
    if problem:
        parts.append(f"<p class='warn'>{esc(problem)}</p>")
    parts.append(trial_facts(record))
    transcript = record.get("transcript") or {}
    if transcript.get("path"):
        text = f"{transcript.get('records')} model calls, {transcript.get('bytes')} bytes" + (
            " (truncated by the gateway)" if transcript.get("truncated") else "")
        parts.append(f"<p>Transcript: {link(text, transcript_href)}</p>")
    elif transcript.get("error"):
        parts.append(f"<p class='warn'>Transcript: {esc(transcript['error'])}</p>")
    if score is None:
        parts.append("<p class='note'>No score record (score.json): the trial was not scored.</p>")
    else:
        parts += ["<h3>Score</h3>", score_headline(score), "<h3>Metrics</h3>",
                  metrics_table(score, f"{id_prefix}metrics"), "<h3>Gates</h3>",
                  gates_table(score, f"{id_prefix}gates"), obligations_block(score)]
    parts.append(protocol_block(record))
    for name, text, size in logs:
        parts.append(log_block(name, text, size, log_window))
    return "".join(parts)


# ----- a transcript ---------------------------------------------------------------------------------------

def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(c.get("text") or c.get("content") or c.get("output") or c.get("arguments")
                                  or "") if isinstance(c, dict) else str(c) for c in content)
    if isinstance(content, dict):
        return str(content.get("text") or content.get("head") or json.dumps(content, ensure_ascii=False))
    return "" if content is None else str(content)


def request_turns(request: Any) -> list[tuple[str, str]]:
    """(role, text) of a request body in any of the three APIs (Chat Completions, Responses, Messages)."""
    if not isinstance(request, dict):
        return [("request", _text_of(request))]
    turns: list[tuple[str, str]] = []
    if request.get("system"):
        turns.append(("system", _text_of(request["system"])))
    if request.get("instructions"):
        turns.append(("system", _text_of(request["instructions"])))
    items = request.get("messages") or request.get("input") or []
    if isinstance(items, str):
        return [*turns, ("user", items)]
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            role = str(item.get("role") or item.get("type") or "item")
            turns.append((role, _text_of(item.get("content") if "content" in item else item.get("output", item))))
    return turns


def response_text(line: Mapping[str, Any]) -> str:
    response = line.get("response")
    if isinstance(response, dict):
        choices = response.get("choices")
        if isinstance(choices, list) and choices:
            message = (choices[0] or {}).get("message") or {}
            calls = message.get("tool_calls") or []
            return _text_of(message.get("content")) + "".join(
                f"\n[tool call] {(c.get('function') or {}).get('name')}: {(c.get('function') or {}).get('arguments')}"
                for c in calls if isinstance(c, dict))
        if "output" in response:
            return _text_of(response.get("output"))
        if "content" in response:
            return _text_of(response.get("content"))
    if line.get("response_sse"):
        return str(line.get("response_sse"))
    return _text_of(response)


def transcript_view(lines: Sequence[Mapping[str, Any]], *, cut: bool, unreadable: int, max_chars: int = 20_000) -> str:
    """Each model call: when, endpoint, model, status, usage, the conversation sent and the answer."""
    parts = [f"<p class='note'>{len(lines)} model calls" + (", the file's end only (it is larger than the "
                                                            "viewer reads)" if cut else "")
             + (f", {unreadable} unreadable lines" if unreadable else "") + ".</p>"]
    rows: list[list[CellLike]] = []
    for index, line in enumerate(lines, 1):
        usage = line.get("usage") or {}
        rows.append([Cell(f"#{index}", index, href=f"#call-{index}"), Cell(str(line.get("ts") or ""), left=True),
                     Cell(str(line.get("endpoint") or ""), left=True), Cell(str(line.get("model") or ""), left=True),
                     Cell(str(line.get("status") or ""), line.get("status")),
                     number_cell(usage.get("input_tokens")), number_cell(usage.get("output_tokens")),
                     Cell("unmetered: " + str(line["unmetered"]) if line.get("unmetered") else "", cls="warn",
                          left=True)])
    parts.append(table("calls", ["call", "time", "endpoint", "model", "status", "input tokens", "output tokens",
                                 "note"], rows, left=4, filterable=len(rows) > 8))
    for index, line in enumerate(lines, 1):
        if line.get("truncated") and "request" not in line:
            parts.append(f"<p class='warn' id='call-{index}'>The gateway stopped recording here: {esc(line)}</p>")
            continue
        turns = "".join(f"<div class='turn {esc(role)}'><b>{esc(role)}</b><pre>{esc(_cap(text, max_chars))}</pre></div>"
                        for role, text in request_turns(line.get("request")))
        answer = f"<div class='turn assistant'><b>answer</b><pre>{esc(_cap(response_text(line), max_chars))}</pre></div>"
        raw = esc(_cap(json.dumps(line, ensure_ascii=False, indent=1), max_chars * 2))
        parts.append(f"<section id='call-{index}'><h3>Call #{index} · {esc(line.get('model'))} · "
                     f"{esc(line.get('ts'))}</h3>{turns}{answer}<details><summary>the line as recorded</summary>"
                     f"<pre>{raw}</pre></details></section>")
    return "".join(parts)


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters)"
