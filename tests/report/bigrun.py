"""A large campaign run folder written directly (no agent runs): what the report and the viewer must open at once.

Used by ``tests/report/test_big_run.py`` (report.html's size at 10,000 trials) and ``bench/viewer.py`` (the
viewer's server time). The records have the shape ``TrialRecord.to_json()`` writes (one validated template,
its fields set per trial) of two entries — the mock-like baseline and an oracle-like entry — over four tasks;
each trial has a score record shaped like the scorer's (metrics, gates with messages) and a short log, so a
detail section is as large as a real one.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from anchorage.campaigns.names import trial_name
from anchorage.trials.records import SCORE_KEYS, ScoreInfo, TrialRecord

TASKS = ("smoke-inventory", "cumcm-2024-a-dragon-dance", "cumcm-2024-b-production-decision",
         "cumcm-2024-c-crop-planting")
ENTRIES = ("mock", "oracle")
GATES = [f"gate_{i}_{kind}" for i, kind in enumerate(("ordering", "finite_domain", "sign", "range", "identity",
                                                      "interval", "sign", "ordering"))]


def _score(rng: random.Random, raw: float, oracle: bool) -> dict[str, object]:
    metrics = [{"path": f"experiment_result.q{i}.value_{i}", "value": round(rng.uniform(0, 100), 4), "number": None,
                "anchor": 50.0 + i, "baseline_value": None, "reward": round(rng.uniform(0, 1), 4), "weight": 1.0,
                "status": "scored", "reason": "", "mode": "legacy_target", "direction": "target_value",
                "unit": "yuan per year"} for i in range(8)]
    gates = [{"name": name, "form": name.split("_")[-1], "paths": [f"experiment_result.q{i}.value_{i}"],
              "status": "passed" if oracle or i % 3 else "failed", "severity": "warning",
              "message": f"{rng.uniform(0, 100):.4f} ≤ {rng.uniform(0, 100):.4f} (a constraint cannot lower the cost)"}
             for i, name in enumerate(GATES)]
    return {"raw": raw, "oracle_raw": 1.0, "baseline_raw": 0.0, "baseline_source": "config:baseline_endpoint",
            "o_eval": raw, "bo_eval": raw, "bo_branch": "normalized", "gradable": True, "hard_gate_failed": False,
            "profile_ref": "paper@1", "anchor_source": "paper (original)", "metrics": metrics, "gates": gates,
            "obligations": {}, "error": None, "penalty": None}


def make_trials(trials: int = 10_000, name: str = "big", seed: int = 0) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(trial record, score record) of ``trials`` trials (a multiple of 8: entries × tasks × seeds), in plan order."""
    rng = random.Random(seed)
    seeds = trials // (len(ENTRIES) * len(TASKS))
    template = TrialRecord(name="t", campaign=name, entry="e", task="t", seed=0, driver="local", phase="Succeeded",
                           reason="completed", started_at="2026-12-01T10:00:00.000+00:00",
                           finished_at="2026-12-01T10:00:02.000+00:00", scoring_profile="paper@1").to_json()
    out: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for entry in ENTRIES:
        oracle = entry == "oracle"
        for task in TASKS:
            shared = _score(rng, 1.0, oracle)   # one score record per cell (its headline numbers set per trial)
            failed = [g["name"] for g in shared["gates"] if g["status"] == "failed"]   # type: ignore[attr-defined]
            for s in range(seeds):
                raw = 1.0 if oracle else round(rng.uniform(0.05, 0.6), 6)
                score = {**shared, "raw": raw, "o_eval": raw, "bo_eval": raw}
                record = {**template, "name": trial_name(name, entry, task, s), "entry": entry, "task": task,
                          "seed": s, "cost_usd": 0.0 if oracle else 0.0012,
                          "message": "" if oracle else f"{len(failed)} gate(s) failed as warnings under paper@1: "
                                                       + ", ".join(failed),
                          "score": ScoreInfo.model_validate({k: score[k] for k in SCORE_KEYS if score.get(k) is not None})
                          .model_dump(mode="json")}
                out.append((record, score))
    return out


def manifest(name: str, trials: int) -> dict[str, Any]:
    return {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": name},
            "spec": {"tasks": list(TASKS), "entries": [{"name": e, "agent": {"kind": e}} for e in ENTRIES],
                     "baseline": "mock", "seeds": trials // (len(ENTRIES) * len(TASKS))}}


def write_run(root: Path, trials: int = 10_000, name: str = "big", seed: int = 0) -> Path:
    """``root/name``: a finished campaign folder of :func:`make_trials` (trial.json, score.json, a log each)."""
    folder = root / name
    folder.mkdir(parents=True)
    made = make_trials(trials, name, seed)
    for record, score in made:
        trial = folder / record["name"]
        (trial / "agent").mkdir(parents=True)
        (trial / "trial.json").write_text(json.dumps(record))
        (trial / "score.json").write_text(json.dumps(score))
        (trial / "agent" / "stdout.log").write_text(f"{record['entry']} agent: wrote the result\n")
    (folder / "campaign.json").write_text(json.dumps({"name": name, "manifest": manifest(name, trials),
                                                      "trials": [r["name"] for r, _ in made]}))
    return folder
