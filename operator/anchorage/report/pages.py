"""HTML pieces shared by the self-contained report (``report.html``) and the viewer (``anchorage view``).

Pure functions from run data (leaderboards, trial records, score records, transcripts) to HTML strings;
everything is escaped here, through :func:`esc` (which first makes agent-written text readable:
:mod:`anchorage.text`). Tables are sortable (click a column header) and filterable (a box above
them) by a small inline script, :data:`SCRIPT` — no external file, no build step; the trials tables are data
tables (:func:`data_table`: rows as JSON, drawn a page at a time), so 10,000 trials open at once. The viewer
keeps the sort, filter and page of each table in the page's query string so a link shows what its sender saw.
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

from anchorage.campaigns.aggregation import INFRA_PHASE, Leaderboard, TrialResult, robust_bo
from anchorage.report.tables import MISSING, board_notes, cost_text, entry_label, fixed
from anchorage.text import json_text, readable

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
    """``value`` as HTML text: made readable first (:func:`anchorage.text.readable`: no lone surrogate, no control
    sequence or raw control byte an agent wrote), then escaped. Every text of every page goes through here."""
    return html.escape(readable(value), quote=True)


def num(value: Any, digits: int = 4, *, sign: bool = False) -> str:
    """A number for a page ("—" when absent or not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—" if value is None else str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return fixed(value, digits, sign=sign)


def general(value: Any) -> str:
    """A value as read from an artifact (6 significant digits for floats)."""
    if isinstance(value, float):
        return f"{value + 0.0:.6g}" if value else "0"
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
        *([("rescored", esc(meta["rescored"]))] if meta.get("rescored") else []),
        ("trials", esc(f"{meta.get('trials')} finished of {meta.get('planned')} planned")),
        ("started", esc(meta.get("started") or "—")), ("finished", esc(meta.get("finished") or "—")),
        ("baseline entry (F)", esc(meta.get("baseline") or "none — F from each task configuration")),
        ("scoring profile", joined("profiles")), ("price snapshot", joined("price_snapshots")),
        ("Anchorage (trials)", joined("anchorage_versions")), ("scorer", joined("scorers")),
        ("driver", joined("drivers")), ("made by", esc(generator)),
    ])


def leaderboard_table(board: Leaderboard, entry_href: Callable[[str], str | None]) -> str:
    """Table 7: rank, entry, Art., O-Eval and Robust BO-Eval mean ± std over seeds, cost per seed — "—" where the
    board has no value — and under it the board's notes (:func:`anchorage.report.tables.board_notes`: entries
    without a score and why, F, the campaign's total cost and cells scored of those planned, an incomplete cost)."""
    header = ["rank", "entry", "Art.", "O-Eval", "± std", "Robust BO-Eval", "± std", "cost/seed USD", "seeds",
              "infra failed"]
    header += (["panel confirmed"] if board.has_panel else []) + (["CBU"] if board.has_cbu else [])
    rows: list[list[CellLike]] = []
    for rank, row in enumerate(board.rows, 1):
        why = row.no_score or ""
        cells: list[CellLike] = [
            Cell(str(rank), rank),
            Cell(entry_label(row), row.entry, href=entry_href(row.entry), left=True, cls="" if row.scored else "warn",
                 title=why),
            Cell(MISSING if row.artifacts_mean is None else f"{row.artifacts_mean:.1f}/{row.tasks}", row.artifacts_mean,
                 title=why),
            _value(row.o_eval_mean, why), _value(row.o_eval_std, why),
            _value(row.bo_eval_mean, why, sign=True), _value(row.bo_eval_std, why),
            Cell(cost_text(row), row.cost_per_seed_usd, cls="warn" if row.costs_unknown else "", title=why),
            Cell(str(row.seeds), row.seeds), Cell(str(row.infrastructure_failed), row.infrastructure_failed,
                                                  cls="warn" if row.infrastructure_failed else ""),
        ]
        if board.has_panel:
            cells.append(Cell(f"{row.panel_confirmed}/{row.panel_trials}", row.panel_confirmed))
        if board.has_cbu:
            cells.append(number_cell(row.cbu_mean))
        rows.append(cells)
    return table("leaderboard", header, rows, left=2, filterable=False) + notes_block(board)


def notes_block(board: Leaderboard) -> str:
    """The board's notes as a list (id ``board-notes``): entries without a score and an incomplete cost are
    warnings."""
    notes = board_notes(board)
    unscored = sum(1 for row in board.rows if row.no_score)
    warned = set(range(unscored)) | ({len(notes) - 1} if board.cost_note else set())
    items = "".join(f"<li class='warn'>{esc(note)}</li>" if i in warned else f"<li>{esc(note)}</li>"
                    for i, note in enumerate(notes))
    return f"<ul class='note' id='board-notes'>{items}</ul>"


def _value(value: float | None, why: str, *, sign: bool = False) -> Cell:
    return Cell(num(value, sign=sign), value, title=why if value is None else "")


def per_task_table(board: Leaderboard, metric: str, cell_href: Callable[[str, str], str | None]) -> str:
    """Tasks × entries: the metric's mean over seeds (each cell links to that entry × task); "—" where there is
    no value, with the reason under the table."""
    entries = [row.entry for row in board.rows]
    rows: list[list[CellLike]] = []
    reasons: list[str] = []
    for task in board.tasks:
        cells = board.per_task[task]
        line: list[CellLike] = [Cell(task, left=True)]
        for entry in entries:
            cell = cells.get(entry)
            value = getattr(cell, metric) if cell is not None else None
            why = board.cell_reason(task, entry, metric) or ""
            if why:
                reasons.append(f"{task} × {entry}: {why}")
            line.append(Cell(num(value, sign=metric == "bo_eval"), value, href=cell_href(entry, task), title=why,
                             cls="muted" if why else ""))
        rows.append(line)
    listed = "".join(f"<li>{esc(r)}</li>" for r in reasons)
    return (table(f"per-task-{metric.replace('_', '-')}", ["task", *entries], rows, filterable=False)
            + (f"<p class='note'>—: no value, because</p><ul class='note'>{listed}</ul>" if reasons else ""))


def f_table(board: Leaderboard) -> str:
    """F per task and where it came from, under the board's one definition of F (stated above the table)."""
    rows = [[Cell(t, left=True), number_cell(v["F"]), Cell(str(v["source"]), left=True,
                                                            cls="warn" if v["F"] is None else "")]
            for t, v in board.f_by_task.items()]
    return (f"<p class='note' id='f-rule'>{esc(board.f_rule)}.</p>"
            + table("f-per-task", ["task", "F", "source"], rows, filterable=False))


def per_seed_table(board: Leaderboard, entry_link: str | None = None) -> str:
    """Entry × seed: O-Eval and Robust BO-Eval (the board's F) averaged over the tasks scored on that seed — a
    :func:`data_table` (1,250 seeds × 2 entries open at once); ``entry_link``: the entry column's link template."""
    columns = [Column("entry", "enum", left=True, href=entry_link), Column("seed", "num", digits=0),
               Column("O-Eval", "num"), Column("Robust BO-Eval", "num", sign=True), Column("tasks scored", "num",
                                                                                           digits=0),
               Column("Art.", "num", digits=0), Column("cost USD", "num")]
    rows = [[row.entry, seed.seed, seed.o_eval, seed.bo_eval, seed.tasks, seed.artifacts, seed.cost_usd]
            for row in board.rows for seed in row.per_seed]
    return data_table("per-seed", columns, rows, filterable=len(rows) > 20,
                      note="Per entry and seed: the mean over the tasks scored on that seed (Robust BO-Eval against "
                           "the board's F); the leaderboard's mean ± std is over these rows.")


# ----- data tables: rows as JSON, rendered a page at a time ---------------------------------------------------------

@dataclass(frozen=True)
class Column:
    """A column of a :func:`data_table`: ``kind`` text (each value as is), enum (values repeat: stored once) or
    num (``digits``, ``sign``; ``none`` is the text of a missing number); ``href`` a link template ("{}" is the
    value, percent-encoded); ``classes`` a CSS class per shown text; ``title``: the text is also the tooltip."""

    name: str
    kind: str = "text"
    left: bool = False
    digits: int = 4
    sign: bool = False
    none: str | None = None
    none_class: str | None = None
    href: str | None = None
    classes: Mapping[str, str] | None = None
    title: bool = False
    cls: str | None = None


def data_table(table_id: str, columns: Sequence[Column], rows: Iterable[Sequence[Any]], *, page_size: int = 100,
               filterable: bool = True, note: str = "") -> str:
    """A sortable, filterable table whose rows travel as compact JSON and are drawn a page at a time by
    :data:`SCRIPT` (10,000 trials: one page of rows in the DOM). A value of a link column may be ``[text, href]``
    (its own link, or ``None`` for none); every string is made readable (:func:`anchorage.text.readable`)."""
    strings: dict[str, int] = {}
    codes: dict[str, int] = {}          # a repeated string as written -> its index (made readable once)
    body: list[list[Any]] = []
    enum = [c.kind == "enum" for c in columns]
    for row in rows:
        line: list[Any] = []
        for value, interned in zip(row, enum, strict=True):
            if isinstance(value, str):
                if interned:
                    code = codes.get(value)
                    if code is None:
                        code = codes[value] = strings.setdefault(readable(value), len(strings))
                    value = code
                else:
                    value = readable(value)
            elif isinstance(value, list | tuple):
                value = [readable(value[0]), value[1]]
            elif isinstance(value, float):
                value = value if math.isfinite(value) else None
            line.append(value)
        body.append(line)
    spec = []
    for c in columns:
        item: dict[str, Any] = {"kind": c.kind}
        for key, value in (("left", c.left), ("sign", c.sign), ("none", c.none), ("noneClass", c.none_class),
                           ("href", c.href), ("classes", dict(c.classes) if c.classes else None), ("title", c.title),
                           ("cls", c.cls)):
            if value:
                item[key] = value
        if c.kind == "num":
            item["digits"] = c.digits
        spec.append(item)
    payload = json_text({"cols": spec, "strings": list(strings), "rows": body, "page": page_size},
                        separators=(",", ":")).replace("<", "\\u003c")
    lefts = [c.left for c in columns]
    head = "".join(f'<th class="l" scope="col">{esc(c.name)}</th>' if lefts[i] else f'<th scope="col">{esc(c.name)}</th>'
                   for i, c in enumerate(columns))
    box = (f'<div class="filter"><label>filter <input type="search" data-filter-for="{esc(table_id)}" '
           f'placeholder="words that a row must contain" aria-label="filter {esc(table_id)}"></label>'
           f'<span class="count" data-count-for="{esc(table_id)}">{len(body)} rows</span></div>'
           if filterable else "")
    pager = (f'<div class="pager" data-pager-for="{esc(table_id)}"><button type="button" class="prev">‹ previous'
             '</button> <span class="pages"></span> <button type="button" class="next">next ›</button></div>')
    caption = f'<p class="note">{note}</p>' if note else ""
    return (f'{box}<table class="sortable data" id="{esc(table_id)}"><thead><tr>{head}</tr></thead><tbody></tbody>'
            f'</table>{pager}<script type="application/json" id="data-{esc(table_id)}">{payload}</script>{caption}')


PHASE_CLASSES = {"Succeeded": "ok", "Failed": "bad", "InfrastructureFailed": "warn"}
TRIAL_COLUMNS = (
    Column("trial", left=True), Column("entry", "enum", left=True), Column("task", "enum", left=True),
    Column("seed", "num", digits=0), Column("phase", "enum", left=True, classes=PHASE_CLASSES),
    Column("reason", "enum", left=True), Column("raw R", "num"), Column("O-Eval", "num"),
    Column("hard gate", "enum", left=True, classes={"failed": "bad"}),
    Column("cost USD", "num", none="unknown", none_class="warn"), Column("duration s", "num", digits=1),
    Column("message", "enum", left=True, title=True, cls="msg"),
)


def trials_table(records: Sequence[Mapping[str, Any]], trial_href: Callable[[str], str | None],
                 table_id: str = "trials", *, link: str | None = None, extra: Sequence[Column] = (),
                 extra_values: Callable[[Mapping[str, Any]], Sequence[Any]] | None = None, note: str = "") -> str:
    """Every trial: coordinates, phase and reason, its scores, cost, duration and message — a :func:`data_table`
    (``link``: the trial column's link template, "{}" the trial's name; without it ``trial_href`` per trial)."""
    columns = [Column("trial", left=True, href=link, cls="name"), *TRIAL_COLUMNS[1:], *extra]
    rows: list[list[Any]] = []
    for r in records:
        score = r.get("score") or {}
        name = str(r.get("name"))
        hard = score.get("hard_gate_failed")
        cost = r.get("cost_usd")
        rows.append([
            name if link else [name, trial_href(name)], str(r.get("entry")), str(r.get("task")), _int(r.get("seed")),
            str(r.get("phase") or ""), str(r.get("reason") or ""), _float(score.get("raw")), _float(score.get("o_eval")),
            "failed" if hard else (MISSING if not score else "no"), _float(cost),
            _float((r.get("durations") or {}).get("total_sec")), str(r.get("message") or ""),
            *(extra_values(r) if extra_values else ()),
        ])
    return data_table(table_id, columns, rows, note=note)


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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


def board_bo(record: Mapping[str, Any], board: Leaderboard) -> tuple[float | None, str]:
    """The Robust BO-Eval the board uses for this trial (against the board's F) and what F that is; None with the
    reason when the board has none (not scored, or F undefined on the task)."""
    if record.get("phase") == INFRA_PHASE or not record.get("score"):
        return None, "not scored"
    result = TrialResult.from_record(dict(record))
    f = board.f_by_task.get(result.task) or {}
    if f.get("F") is None:
        return None, str(f.get("source") or "F is undefined on this task")
    return robust_bo(result, float(f["F"])), f"F = {num(f['F'], 6)}, {f.get('source')}"


def score_headline(score: Mapping[str, Any], board_value: tuple[float | None, str] | None = None) -> str:
    """The score record's headline numbers; with ``board_value`` (:func:`board_bo`) the Robust BO-Eval the board
    used beside the one the scorer computed for this trial alone, each labelled with its F."""
    as_scored = (f"{num(score.get('bo_eval'), sign=True)} ({score.get('bo_branch') or '—'}) — against this trial's "
                 f"F = {num(score.get('baseline_raw'), 6)}, {score.get('baseline_source') or '—'}")
    bo_items = [("Robust BO-Eval, as scored (this trial)", esc(as_scored))]
    if board_value is not None:
        value, why = board_value
        bo_items.insert(0, ("Robust BO-Eval, on the board", f"<b>{esc(num(value, sign=True))}</b> — " + esc(
            f"against the board's {why}" if value is not None else why)))
    items = [
        ("raw R", esc(num(score.get("raw"), 6)) + (f" <span class='muted'>(before gates "
                                                    f"{esc(num(score.get('raw_before_gates'), 6))})</span>"
                                                    if score.get("hard_gate_failed") else "")),
        ("anchor panel O", esc(f"{num(score.get('oracle_raw'), 6)} ({score.get('oracle_source') or '—'})")),
        ("baseline F", esc(f"{num(score.get('baseline_raw'), 6)} ({score.get('baseline_source') or '—'})")),
        ("O-Eval", esc(num(score.get("o_eval")))),
        *bo_items,
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
                 transcript_href: str | None = None, id_prefix: str = "", board: Leaderboard | None = None,
                 files: str = "") -> str:
    """One trial: outcome, facts (agent, sandbox, cost and tokens, durations, profile, prices, versions), the
    score record (headline — with ``board``, the Robust BO-Eval the board used beside the trial's own —, per-metric
    table, gates with their messages, obligations), its files (``files``: HTML), protocols and logs."""
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
        parts += ["<h3>Score</h3>", score_headline(score, board_bo(record, board) if board else None),
                  "<h3>Metrics</h3>",
                  metrics_table(score, f"{id_prefix}metrics"), "<h3>Gates</h3>",
                  gates_table(score, f"{id_prefix}gates"), obligations_block(score)]
    parts.append(files)
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
