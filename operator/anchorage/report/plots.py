"""Leaderboard bars with error bars and the per-task heatmaps, each as SVG and a high-DPI PNG (matplotlib, Agg).

Called by :func:`anchorage.report.writing.write_outputs`; matplotlib is imported inside the
functions so importing the report package stays cheap. Every figure has a title naming the campaign
and what it shows, wrapped (measured as drawn) so no line is clipped; ``path`` is the PNG's path, the SVG is
written beside it with the same stem. An entry without a score has no bar (a note says so), a cell without
one is blank: a plot never draws a zero that is not there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from anchorage.campaigns.aggregation import Leaderboard


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


TITLE_SIZE = 10


def _title(ax: Any, campaign: str, what: str) -> None:
    """The figure's title — the campaign, then what it shows; :func:`_save` wraps it until it fits the figure."""
    ax._anchorage_title = (campaign, what)
    ax.set_title("\n".join(([campaign] if campaign else []) + [what]), fontsize=TITLE_SIZE)


def _fit_titles(fig: Any) -> None:
    """Wrap each titled axes' title (measured as drawn, after the layout) until every line is inside the figure."""
    import textwrap

    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        parts = getattr(ax, "_anchorage_title", None)
        if parts is None:
            continue
        campaign, what = parts
        per_line = len(what) + 1
        while per_line > 16:
            box = ax.title.get_window_extent(renderer)
            if box.x0 >= fig.bbox.x0 and box.x1 <= fig.bbox.x1:
                break
            per_line = int(per_line * 0.85)
            lines = textwrap.wrap(campaign, per_line) + textwrap.wrap(what, per_line)
            ax.set_title("\n".join(lines), fontsize=TITLE_SIZE)
            fig.tight_layout()


PNG_DPI = 220
"""Twice the usual screen density: sharp on high-DPI displays and in print."""


def _save(fig: Any, path: Path) -> Path:
    """Write the figure as ``path`` (PNG, :data:`PNG_DPI`) and as ``path`` with suffix ``.svg``."""
    plt = _pyplot()
    fig.tight_layout()
    _fit_titles(fig)
    fig.savefig(path, dpi=PNG_DPI)
    fig.savefig(path.with_suffix(".svg"), format="svg", metadata={"Date": None})
    plt.close(fig)
    return path


def leaderboard_bars(board: Leaderboard, path: Path, campaign: str = "") -> Path:
    """O-Eval and Robust BO-Eval per entry, mean with ± std error bars over seeds."""
    plt = _pyplot()
    entries = [r.entry for r in board.rows]
    xs = list(range(len(entries)))
    width = 0.38
    fig, ax = plt.subplots(figsize=(max(6.5, 1.4 * len(entries) + 2), 4.2))
    nan = float("nan")   # an entry without a score has no bar (never a zero-height one)
    ax.bar([x - width / 2 for x in xs], [nan if r.o_eval_mean is None else r.o_eval_mean for r in board.rows], width,
           yerr=[0.0 if r.o_eval_std is None else r.o_eval_std for r in board.rows], capsize=4, label="O-Eval")
    ax.bar([x + width / 2 for x in xs], [nan if r.bo_eval_mean is None else r.bo_eval_mean for r in board.rows],
           width, yerr=[0.0 if r.bo_eval_std is None else r.bo_eval_std for r in board.rows], capsize=4,
           label="Robust BO-Eval")
    for x, row in zip(xs, board.rows, strict=True):
        if row.o_eval_mean is None:
            ax.text(x, 0.05, "— no scored trial", rotation=90, ha="center", va="bottom", fontsize=8, color="#8a5a00")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(xs, entries, rotation=20, ha="right")
    ax.set_ylim(-1.05, 1.1)
    ax.set_ylabel("score (mean ± std over seeds)")
    ax.legend(loc="best", fontsize=8)
    _title(ax, campaign, f"O-Eval and Robust BO-Eval per entry (mean ± std over seeds; no bar: no scored trial) — "
                         f"profile {board.profile}")
    return _save(fig, path)


TITLES = {"o_eval": "O-Eval", "bo_eval": "Robust BO-Eval"}


def per_task_heatmap(board: Leaderboard, path: Path, metric: str = "o_eval", campaign: str = "") -> Path:
    """Tasks × entries, colour = the metric's mean over seeds (blank where no scored trial)."""
    plt = _pyplot()
    import numpy as np

    entries = [r.entry for r in board.rows]
    grid = np.full((len(board.tasks), len(entries)), np.nan)
    for i, task in enumerate(board.tasks):
        for j, entry in enumerate(entries):
            cell = board.per_task[task].get(entry)
            value = getattr(cell, metric) if cell is not None else None
            if value is not None:
                grid[i, j] = value
    fig, ax = plt.subplots(figsize=(max(7.5, 1.2 * len(entries) + 4), max(3.0, 0.35 * len(board.tasks) + 2.0)))
    low = -1.0 if metric == "bo_eval" else 0.0
    image = ax.imshow(grid, cmap="viridis", vmin=low, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(entries)), entries, rotation=20, ha="right")
    ax.set_yticks(range(len(board.tasks)), board.tasks, fontsize=7)
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            if not np.isnan(grid[i, j]):
                shade = "black" if grid[i, j] > (low + 1.0) / 2 else "white"  # readable on viridis' light end
                ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7, color=shade)
    fig.colorbar(image, ax=ax, label=TITLES.get(metric, metric))
    _title(ax, campaign, f"{TITLES.get(metric, metric)} per task and entry (mean over seeds; blank: no scored trial"
                         f"{' or F undefined' if metric == 'bo_eval' else ''}) — profile {board.profile}")
    return _save(fig, path)
