"""Rescoring a finished local run under another scoring profile, from the same artifacts (no agent reruns).

Called by ``anchorage rescore RUN_DIR --profile P``. Every trial of the run that was scored has its
``artifacts/`` folder scored again under ``P`` (the campaign's own ``verification`` settings); the results
go to ``RUN_DIR/profiles/P/``: a ``campaign.json`` naming the profile and the run it came from, one
``<trial>/trial.json`` (the original record with the new ``score`` and ``scoring_profile``) and
``<trial>/score.json`` per trial, and the leaderboard, plots and report of that profile. The original run
is never modified, so both boards sit side by side; ``anchorage report RUN_DIR/profiles/P`` rebuilds the
rescored one like any run folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from anchorage.campaigns.aggregation import Leaderboard, TrialResult, leaderboard
from anchorage.errors import InputError
from anchorage.report.runs import PROFILES
from anchorage.report.writing import load_run, write_outputs
from anchorage.scoring import score_artifact
from anchorage.scoring.profiles import get_profile
from anchorage.tasks import load_task, resolve_task
from anchorage.trials.phases import Phase
from anchorage.trials.records import SCORE_KEYS

PROFILES_DIR = PROFILES


def rescore_run(run_dir: Path, profile: str, *, with_plots: bool = True,
                source: str | None = None) -> tuple[Path, Leaderboard, dict[str, Path]]:
    """Rescore ``run_dir`` under ``profile``; returns the output folder, its board and the files written. ``source``:
    where the run is, when ``run_dir`` is a copy of it (a store prefix)."""
    chosen = get_profile(profile)
    name, baseline, records = load_run(run_dir)
    meta = json.loads((run_dir / "campaign.json").read_text(encoding="utf-8"))
    if meta.get("rescored_from"):
        raise InputError(f"{run_dir} is itself a rescored folder", hint="rescore the original run folder")
    spec = (meta.get("manifest") or {}).get("spec") or {}
    verification = spec.get("verification") or {}
    gates, lean = bool(verification.get("gates", True)), bool(verification.get("lean", False))
    out_dir = run_dir / PROFILES_DIR / chosen.name
    out_dir.mkdir(parents=True, exist_ok=True)
    rescored = [_rescore(run_dir, out_dir, record, chosen.name, gates, lean) for record in records]
    board = leaderboard([TrialResult.from_record(r) for r in rescored], baseline)
    meta_out = {**meta, "profile": chosen.ref, "rescored_from": source or str(run_dir.resolve())}
    (out_dir / "campaign.json").write_text(json.dumps(meta_out, indent=2, sort_keys=True, default=str), encoding="utf-8")
    outputs = write_outputs(out_dir, f"{name} (rescored: {chosen.ref})", board, rescored, with_plots=with_plots)
    return out_dir, board, outputs


def _rescore(run_dir: Path, out_dir: Path, record: dict[str, Any], profile: str, gates: bool,
             lean: bool) -> dict[str, Any]:
    """One trial's record under ``profile`` (an unscored trial — infrastructure failure — stays unscored)."""
    trial = str(record.get("name") or "")
    if not trial or "/" in trial or trial.startswith("."):
        raise InputError(f"{run_dir}: a trial record has no usable name ({trial!r})", hint="rerun the campaign")
    target = out_dir / trial
    target.mkdir(parents=True, exist_ok=True)
    copy = dict(record)
    if record.get("phase") != str(Phase.INFRASTRUCTURE_FAILED) and record.get("score") is not None:
        task = load_task(resolve_task(str(record["task"])))
        score = score_artifact(task, run_dir / trial / "artifacts", gates=gates, lean=lean, profile=profile).to_dict()
        (target / "score.json").write_text(json.dumps(score, indent=2, sort_keys=True), encoding="utf-8")
        copy["score"] = {k: score[k] for k in SCORE_KEYS if score.get(k) is not None}
        copy["scoring_profile"] = get_profile(profile).ref
    (target / "trial.json").write_text(json.dumps(copy, indent=2, sort_keys=True, default=str), encoding="utf-8")
    return copy
