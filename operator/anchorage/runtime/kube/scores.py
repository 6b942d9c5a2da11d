"""A ScoringRun's published status, bounded whatever the number of artifacts it scored — pure.

A ``campaignRef`` run rescores every trial of a task (entries × seeds: 100 × 1,000 is 100,000 artifacts); one
summary per artifact in the status (~180 B each) would pass etcd's 1.5 MiB object limit near 8,000 of them. So the
status holds what does not grow with the artifacts — counts (``artifacts``, ``gradable``, ``unscored``), the first
artifact's headline numbers (a trial's run has only that one), at most :data:`SCORES_IN_STATUS` summaries, the
leaderboard (one row per entry: bounded by the campaign's entries) and the conditions — and ``scoresUri`` points at
every summary in the store (:func:`scores_lines`, JSON lines, written by the operator beside the score records).
``tests/kube/test_bounded_status.py`` builds the status of 100,000 scores and checks its size (under 100 KB).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from anchorage.runtime.kube.conditions import condition, lifecycle
from anchorage.runtime.kube.status import (
    SCORES_IN_STATUS,
    Condition,
    LeaderboardRow,
    ScoreSummary,
    ScoringRunStatus,
    now_rfc3339,
)

#: The file of every artifact's summary, beside the run's score records (``<out>/scores.jsonl``).
SCORES_FILE = "scores.jsonl"
#: The keys of a summary (ScoreSummary's, camelCase) in the status and in :data:`SCORES_FILE`.
SUMMARY_KEYS = ("entry", "seed", "artifact", "raw", "oEval", "boEval", "gradable", "recordUri")


def summary(score: Mapping[str, Any]) -> dict[str, Any]:
    """A score's summary (its :data:`SUMMARY_KEYS` that are set)."""
    return {k: score[k] for k in SUMMARY_KEYS if score.get(k) is not None}


def scores_lines(scores: Iterable[Mapping[str, Any]]) -> bytes:
    """Every artifact's summary, one JSON object per line (what ``scoresUri`` holds)."""
    return b"".join(json.dumps(summary(s), separators=(",", ":")).encode() + b"\n" for s in scores)


def run_status(*, scores: Sequence[Mapping[str, Any]], ok: bool, result: str, job_name: str, record_uri: str,
               scores_uri: str | None, profile: str, leaderboard: Sequence[LeaderboardRow] = (),
               generation: int | None = None) -> ScoringRunStatus:
    """The status a run's end publishes: ``scores`` are the artifacts' summaries (dicts with :data:`SUMMARY_KEYS`,
    ``unscored`` true for one without a score record), ``ok`` whether the run succeeded, ``result`` how its verifier
    Job ended."""
    first = scores[0] if scores else {}
    message = f"{len(scores)} artifact(s) scored at {now_rfc3339()}" if ok else f"verifier job ended: {result}"
    reason = "Scored" if ok else "VerifierFailed"
    conditions = [condition("Ready", ok, reason, message, generation),
                  *lifecycle("succeeded" if ok else "failed", reason, message, generation)]
    return ScoringRunStatus(
        phase="Succeeded" if ok else "Failed", job_name=job_name, record_uri=record_uri, scores_uri=scores_uri,
        observed_generation=generation, raw=first.get("raw"), o_eval=first.get("oEval"), bo_eval=first.get("boEval"),
        artifacts=len(scores), gradable=sum(1 for s in scores if s.get("gradable")),
        unscored=sum(1 for s in scores if s.get("unscored")),
        scores=[ScoreSummary.model_validate(summary(s)) for s in scores[:SCORES_IN_STATUS]],
        profile=profile, leaderboard=list(leaderboard), message=None if ok else message,
        conditions=[Condition.model_validate(c) for c in conditions])
