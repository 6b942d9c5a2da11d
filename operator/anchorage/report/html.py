"""The self-contained HTML report of a campaign run (``report.html``): one file, no external resource.

Called by :func:`anchorage.report.writing.write_outputs` (``anchorage run`` at a campaign's end and
``anchorage report RUN_DIR``). What it holds: the run's metadata (dates, scoring profile, price snapshot,
versions), the leaderboard and per-task tables (sortable; each cell links to its trials), the plots (SVG,
inlined as data URIs), F per task, the trials table (sortable, filterable) and one section per trial
(anchor ``#trial-<name>``: outcome, cost and tokens, durations, the per-metric score table, every gate
with its message, obligations, the end of the agent's logs). ``anchorage view`` shows the same pieces
(:mod:`anchorage.report.pages`) as pages, with transcripts.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchorage.campaigns.aggregation import Leaderboard
from anchorage.report import pages
from anchorage.report.pages import esc


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


def render(name: str, board: Leaderboard, records: list[dict[str, Any]], plots: list[Path], *,
           meta: Mapping[str, Any] | None = None, sections: Mapping[str, TrialSection] | None = None,
           generator: str = "anchorage report", log_window: int = 0) -> str:
    """The whole report as one HTML string."""
    sections = sections or {}
    first: dict[tuple[str, str], str] = {}
    for record in records:
        first.setdefault((str(record.get("entry")), str(record.get("task"))), str(record.get("name")))

    def trial_href(trial: str) -> str:
        return f"#{anchor(trial)}"

    def cell_href(entry: str, task: str) -> str | None:
        trial = first.get((entry, task))
        return trial_href(trial) if trial else None

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
    parts += [f"<h2>F per task — profile {esc(board.profile)}</h2>", pages.f_table(board)]
    parts += ["<h2 id='trials'>Trials</h2>", pages.trials_table(records, trial_href)]
    for record in records:
        trial = str(record.get("name"))
        section = sections.get(trial, TrialSection(None))
        body = pages.trial_detail(record, section.score, problem=section.problem, logs=section.logs,
                                  log_window=log_window, id_prefix=f"{trial}-")
        parts.append(f"<section class='trial' id='{esc(anchor(trial))}'><h2>{esc(trial)} "
                     f"<a href='#{esc(anchor(trial))}' class='muted'>#</a></h2>{body}</section>")
    return pages.document(f"Anchorage — {name}", "".join(parts), crumbs=[(f"Anchorage report — {name}", None)])
