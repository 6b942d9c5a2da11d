"""Write a campaign's outputs into its run folder: leaderboard.json|csv|md, plots/, report.html.

Called by ``anchorage run`` at the end of a campaign and by ``anchorage report RUN_DIR`` (which
rebuilds everything from the trial records alone).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from anchorage import confined
from anchorage.campaigns.aggregation import Leaderboard, TrialResult, leaderboard
from anchorage.errors import InputError
from anchorage.report import html, plots, tables


def write_outputs(directory: Path, name: str, board: Leaderboard, records: list[dict[str, Any]],
                  *, with_plots: bool = True) -> dict[str, Path]:
    """Write every output file; returns them by kind."""
    out = {"json": directory / "leaderboard.json", "csv": directory / "leaderboard.csv",
           "md": directory / "leaderboard.md", "html": directory / "report.html"}
    out["json"].write_text(json.dumps(board.to_dict(), indent=2, sort_keys=True), encoding="utf-8")
    out["csv"].write_text(tables.to_csv(board), encoding="utf-8")
    out["md"].write_text(tables.to_markdown(board), encoding="utf-8")
    images: list[Path] = []
    if with_plots and board.rows:
        (directory / "plots").mkdir(exist_ok=True)
        images.append(plots.leaderboard_bars(board, directory / "plots" / "leaderboard.png"))
        images.append(plots.per_task_heatmap(board, directory / "plots" / "per_task_o_eval.png"))
        images.append(plots.per_task_heatmap(board, directory / "plots" / "per_task_bo_eval.png", "bo_eval"))
    out["html"].write_text(html.render(name, board, records, images), encoding="utf-8")
    return out


def load_run(directory: Path) -> tuple[str, str | None, list[dict[str, Any]]]:
    """Campaign name, baseline entry and the finished trial records of a run folder."""
    meta_path = directory / "campaign.json"
    if not meta_path.is_file():
        raise InputError(f"{directory} is not a campaign run folder (no campaign.json)",
                         hint="pass runs/<campaign-name>, the folder 'anchorage run' created")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    baseline = (meta.get("manifest", {}).get("spec") or {}).get("baseline")
    records = []
    for trial in meta.get("trials", []):
        try:  # beside the agent's folders: no link followed, size-capped (anchorage.confined)
            data = json.loads(confined.read_bytes(directory / str(trial), "trial.json", limit=confined.RECORD_LIMIT))
        except confined.ConfinedError as exc:
            if exc.reason == "missing":
                continue
            raise InputError(f"{directory / str(trial) / 'trial.json'} cannot be read: {exc.message}",
                             hint="rerun the campaign to rewrite that trial's record") from exc
        except (ValueError, RecursionError) as exc:
            raise InputError(f"{directory / str(trial) / 'trial.json'} is not valid JSON",
                             hint="rerun the campaign to rewrite that trial's record") from exc
        records.append(data)
    return str(meta.get("name", directory.name)), baseline, records


def rebuild(directory: Path) -> dict[str, Path]:
    """``anchorage report``: recompute the leaderboard from the trial records and rewrite the outputs."""
    name, baseline, records = load_run(directory)
    board = leaderboard([TrialResult.from_record(r) for r in records], baseline)
    return write_outputs(directory, name, board, records)
