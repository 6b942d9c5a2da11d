"""The self-contained HTML report of a campaign run (``report.html``): one file, no external resource.

Called by :func:`anchorage.report.writing.write_outputs` (``anchorage run`` at a campaign's end and
``anchorage report RUN_DIR``). What it holds: the run's metadata (dates, scoring profile, price snapshot,
versions), the leaderboard with its notes (entries without a score and why, the board's F, the campaign's
total cost), the per-task and per-seed tables (sortable; each per-task cell links to a trial of it), the plots
(SVG, inlined as data URIs), F per task, the trials table (every trial; its rows travel as compact JSON and
are drawn a page at a time) and detail sections (anchor ``#trial-<name>``: outcome, cost and tokens,
durations, the per-metric score table, every gate with its message, obligations, the end of the agent's
logs). ``anchorage view`` shows the same pieces (:mod:`anchorage.report.pages`) as pages, with transcripts.

**Size.** A detail section is ~5–15 KB, so a campaign of thousands of trials cannot carry one per trial and
stay a file a browser opens at once: sections are written within :data:`DETAIL_BUDGET` characters, first one
trial per (entry, task) cell (its lowest seed: the per-task tables link to it), then the others in the
campaign's order; the report says how many it holds and that ``anchorage view`` shows every trial. A run of
10,000 trials gives a report under 3 MB (tested).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchorage.campaigns.aggregation import Leaderboard
from anchorage.report import pages
from anchorage.report.pages import esc

DETAIL_BUDGET = 1_200_000
"""Characters of trial detail sections one report holds (the rest of a 10,000-trial report is ~1 MB)."""


@dataclass(frozen=True)
class TrialSection:
    """What the report shows of one trial beyond its record."""

    score: Mapping[str, Any] | None
    logs: Sequence[tuple[str, str, int | None]] = ()
    problem: str | None = None


def anchor(trial: str) -> str:
    """The HTML id of a trial's section (``report.html#trial-<name>``)."""
    return f"trial-{trial}"


def _figure(path: Path) -> str:
    """An inlined plot: its SVG when written (sharp at any zoom), else its PNG."""
    svg = path.with_suffix(".svg")
    source, kind = (svg, "image/svg+xml") if svg.is_file() else (path, "image/png")
    if not source.is_file():
        return ""
    data = base64.b64encode(source.read_bytes()).decode("ascii")
    return f'<figure><img alt="{esc(path.stem.replace("_", " "))}" src="data:{kind};base64,{data}"></figure>'


def detail_order(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The order in which trials get a detail section: one per (entry, task) cell first (its lowest seed), then
    the others in the campaign's order."""
    first: dict[tuple[str, str], Mapping[str, Any]] = {}
    def seed(record: Mapping[str, Any]) -> int:
        value = record.get("seed")
        return value if isinstance(value, int) else 0

    for record in sorted(records, key=seed):
        first.setdefault((str(record.get("entry")), str(record.get("task"))), record)
    chosen = {id(r) for r in first.values()}
    return [r for r in records if id(r) in chosen] + [r for r in records if id(r) not in chosen]


def render(name: str, board: Leaderboard, records: list[dict[str, Any]], plots: list[Path], *,
           meta: Mapping[str, Any] | None = None,
           sections: Mapping[str, TrialSection] | Callable[[str], TrialSection] | None = None,
           generator: str = "anchorage report", log_window: int = 0, budget: int = DETAIL_BUDGET) -> str:
    """The whole report as one HTML string (``sections``: a trial's section by name, read only for the trials
    whose section fits the budget)."""
    given = sections or {}
    section_of: Callable[[str], TrialSection] = (given if callable(given)
                                                 else lambda trial: given.get(trial, TrialSection(None)))
    details: dict[str, str] = {}
    used = 0
    for record in detail_order(records):
        if used >= budget:
            break
        trial = str(record.get("name"))
        section = section_of(trial)
        body = pages.trial_detail(record, section.score, problem=section.problem, logs=section.logs,
                                  log_window=log_window, id_prefix=f"{trial}-", board=board)
        html = (f"<section class='trial' id='{esc(anchor(trial))}'><h2>{esc(trial)} "
                f"<a href='#{esc(anchor(trial))}' class='muted'>#</a></h2>{body}</section>")
        details[trial] = html
        used += len(html)
    first: dict[tuple[str, str], str] = {}
    for record in detail_order(records):
        first.setdefault((str(record.get("entry")), str(record.get("task"))), str(record.get("name")))

    def trial_href(trial: str) -> str | None:
        return f"#{anchor(trial)}" if trial in details else None

    def cell_href(entry: str, task: str) -> str | None:
        trial = first.get((entry, task))
        return trial_href(trial) if trial else None

    held = (f"Detail sections: all {len(records)} trials." if len(details) == len(records) else
            f"Detail sections: {len(details)} of {len(records)} trials (one per entry × task first, then the others "
            "while the report stays a file a browser opens at once); a trial without a link here is shown in full "
            "by anchorage view.")
    parts = [f"<h1>Campaign {esc(name)}</h1>", pages.metadata(meta or {"campaign": name}, generator),
             f"<h2>Leaderboard — scoring profile {esc(board.profile)}</h2>",
             pages.leaderboard_table(board, lambda entry: None),
             f"<p class='note'>Scoring profile: {esc(board.profile)}. Standard deviation: {esc(board.std)}. "
             "Baseline entry (F): "
             f"{esc(board.baseline or 'none — F from each task configuration')}. {esc(board.ranking)}</p>"]
    parts += [figure for figure in map(_figure, plots) if figure]
    for metric, title in (("o_eval", "O-Eval"), ("bo_eval", "Robust BO-Eval")):
        parts += [f"<h2>Per task: {title} (mean over seeds) — profile {esc(board.profile)}</h2>",
                  pages.per_task_table(board, metric, cell_href)]
    parts += [f"<h2 id='per-seed'>Per seed — profile {esc(board.profile)}</h2>", pages.per_seed_table(board)]
    parts += [f"<h2>F per task — profile {esc(board.profile)}</h2>", pages.f_table(board)]
    parts += ["<h2 id='trials'>Trials</h2>", pages.trials_table(records, trial_href, note=esc(held))]
    parts += [details[str(r.get("name"))] for r in records if str(r.get("name")) in details]
    return pages.document(f"Anchorage — {name}", "".join(parts), crumbs=[(f"Anchorage report — {name}", None)])
