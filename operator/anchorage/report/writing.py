"""Write a campaign's outputs into its run folder: leaderboard.json|csv|md, plots/ (SVG + PNG), report.html.

Called by ``anchorage run`` at the end of a campaign and by ``anchorage report RUN_DIR`` (which
rebuilds everything from the trial records alone). Trial folders are read through
:class:`anchorage.report.runs.LocalRuns` (confined, capped reads: they hold what agents wrote).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from anchorage.campaigns.aggregation import Leaderboard
from anchorage.files import write_atomic
from anchorage.report import html, plots, tables
from anchorage.report.runs import LOGS, CampaignRun, LocalRuns, RunReadError
from anchorage.text import clean
from anchorage.trials.records import anchorage_version

REPORT_LOG_WINDOW = 2048
"""Bytes of the end of each agent log that ``report.html`` keeps per trial (``anchorage view`` shows more)."""


def write_outputs(directory: Path, name: str, board: Leaderboard, records: list[dict[str, Any]],
                  *, with_plots: bool = True, run: CampaignRun | None = None) -> dict[str, Path]:
    """Write every output file; returns them by kind (``json``, ``csv``, ``md``, ``html``, plots by stem)."""
    out = {"json": directory / "leaderboard.json", "csv": directory / "leaderboard.csv",
           "md": directory / "leaderboard.md", "html": directory / "report.html"}
    _write(out["json"], json.dumps(board.to_dict(), indent=2, sort_keys=True))
    _write(out["csv"], tables.to_csv(board))
    _write(out["md"], tables.to_markdown(board))
    images: list[Path] = []
    if with_plots and board.rows:
        folder = directory / "plots"
        folder.mkdir(exist_ok=True)
        images.append(plots.leaderboard_bars(board, folder / "leaderboard.png", name))
        images.append(plots.per_task_heatmap(board, folder / "per_task_o_eval.png", "o_eval", name))
        images.append(plots.per_task_heatmap(board, folder / "per_task_bo_eval.png", "bo_eval", name))
        for image in images:
            out[f"plot {image.stem} (png)"] = image
            out[f"plot {image.stem} (svg)"] = image.with_suffix(".svg")
    runs = LocalRuns(directory) if (directory / "campaign.json").is_file() else None
    if run is None and runs is not None:
        run = runs.campaign(directory.name)
    meta = run.metadata() if run is not None else {"campaign": name, "location": str(directory)}
    _write(out["html"], html.render(name, board, records, images, meta=meta, sections=_sections(runs, directory.name),
                                    generator=f"anchorage {anchorage_version()} (report)",
                                    log_window=REPORT_LOG_WINDOW))
    return out


def _write(path: Path, text: str) -> None:
    """Write an output whole or not at all (a temporary file renamed over it): a failure never leaves a
    truncated report behind, and the text is made valid Unicode first (:func:`anchorage.text.clean`)."""
    write_atomic(path, clean(text).encode("utf-8"))


def _sections(runs: LocalRuns | None, campaign: str) -> Callable[[str], html.TrialSection]:
    """A trial's section, read when the report has room for it (its score record and log tails)."""
    def section(trial: str) -> html.TrialSection:
        if runs is None:
            return html.TrialSection(None)
        try:
            score = runs.json(campaign, trial, "score.json")
            problem = None
        except RunReadError as exc:
            score, problem = None, str(exc)
        logs = [(name, *runs.tail(campaign, trial, path, window=REPORT_LOG_WINDOW)) for name, path in LOGS.items()]
        return html.TrialSection(score if isinstance(score, dict) else None, logs, problem)

    return section


def load_run(directory: Path) -> tuple[str, str | None, list[dict[str, Any]]]:
    """Campaign name, baseline entry and the finished trial records of a run folder."""
    run = _run(directory)
    return run.name, run.baseline, [r for r in run.records]


def load_campaign(directory: Path) -> CampaignRun:
    """A run folder's campaign, every record readable (an :class:`~anchorage.errors.InputError` naming the first
    that is not)."""
    return _run(directory)


def _run(directory: Path) -> CampaignRun:
    from anchorage.errors import InputError

    if not (directory / "campaign.json").is_file():
        raise InputError(f"{directory} is not a campaign run folder (no campaign.json)",
                         hint="pass runs/<campaign-name>, the folder 'anchorage run' created")
    run = LocalRuns(directory).campaign(directory.resolve().name)
    unreadable = {t: p for t, p in run.problems.items() if "does not match" not in p}
    if unreadable:
        trial, problem = next(iter(unreadable.items()))
        raise InputError(f"{directory / trial / 'trial.json'} cannot be read: {problem}",
                         hint="rerun the campaign to rewrite that trial's record")
    return run


def rebuild(directory: Path) -> dict[str, Path]:
    """``anchorage report``: recompute the leaderboard from the trial records and rewrite the outputs."""
    run = _run(directory)
    records = [r for r in run.records if r.get("phase") in ("Succeeded", "Failed", "InfrastructureFailed")]
    return write_outputs(directory, str((run.manifest or {}).get("metadata", {}).get("name") or run.name),
                         run.board, records, run=run)
