"""Ranking metrics of a verifier's scores over pools of labelled candidates (seed 003, §4.4; SPEC §7).

Per problem, over its pool of *model* candidates (the human solution, flagged ``human``, only enters
HumanWin unless ``human_in_pool``), all higher-is-better and in [0, 1]:

* **Acc@1** — whether the top-scored candidate is correct. Ties at the top are broken uniformly at
  random, so the value is the expected one: correct / tied among the top-scored.
* **Recall@5** — the share of the correct candidates recovered in the top 5 (expected value under
  random tie-breaking: a tie group straddling the cut contributes ``slots · correct / size``).
* **AUC** — pairwise separability: over every (correct, incorrect) pair, 1 if the correct one scores
  higher, ½ on a tie, 0 otherwise; averaged.
* **HumanWin** — the human solution scores above the mean incorrect candidate (½ on a tie).
* **MeanWin** — the mean correct score is above the mean incorrect score (½ on a tie).

A metric that is undefined for a problem (AUC without a correct or without an incorrect candidate,
HumanWin without a human solution …) is ``None`` there and left out of that metric's average; the
counts are reported. Aggregation follows the paper: "when one original problem has several variants,
we average over the variants" — per-problem values are averaged within their ``group`` (the original
problem; a problem without a group is its own group), then over groups. Used by ``anchorage verify rank``.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchorage.errors import InputError

METRICS = ("acc_at_1", "recall_at_5", "auc", "human_win", "mean_win")
LABELS = {"acc_at_1": "Acc@1", "recall_at_5": "Recall@5", "auc": "AUC", "human_win": "HumanWin",
          "mean_win": "MeanWin"}


@dataclass(frozen=True)
class Candidate:
    id: str
    score: float
    correct: bool
    human: bool = False


def _win(a: float, b: float) -> float:
    return 1.0 if a > b else 0.5 if a == b else 0.0


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def acc_at_1(pool: list[Candidate]) -> float | None:
    if not pool:
        return None
    top = max(c.score for c in pool)
    tied = [c for c in pool if c.score == top]
    return sum(c.correct for c in tied) / len(tied)


def recall_at_k(pool: list[Candidate], k: int = 5) -> float | None:
    correct_total = sum(c.correct for c in pool)
    if correct_total == 0:
        return None
    expected, slots = 0.0, k
    for score in sorted({c.score for c in pool}, reverse=True):
        if slots <= 0:
            break
        group = [c for c in pool if c.score == score]
        taken = min(slots, len(group))
        expected += taken * sum(c.correct for c in group) / len(group)
        slots -= taken
    return expected / correct_total


def auc(pool: list[Candidate]) -> float | None:
    good = [c.score for c in pool if c.correct]
    bad = [c.score for c in pool if not c.correct]
    if not good or not bad:
        return None
    return _mean([_win(g, b) for g in good for b in bad])


def human_win(human: Candidate | None, pool: list[Candidate]) -> float | None:
    bad = [c.score for c in pool if not c.correct]
    if human is None or not bad:
        return None
    return _win(human.score, _mean(bad))


def mean_win(pool: list[Candidate]) -> float | None:
    good = [c.score for c in pool if c.correct]
    bad = [c.score for c in pool if not c.correct]
    if not good or not bad:
        return None
    return _win(_mean(good), _mean(bad))


def problem_metrics(candidates: list[Candidate], *, human_in_pool: bool = False, k: int = 5) -> dict[str, float | None]:
    humans = [c for c in candidates if c.human]
    if len(humans) > 1:
        raise InputError(f"{len(humans)} candidates are flagged human in one problem",
                         hint="flag exactly one human-written solution per problem")
    pool = candidates if human_in_pool else [c for c in candidates if not c.human]
    return {"acc_at_1": acc_at_1(pool), "recall_at_5": recall_at_k(pool, k), "auc": auc(pool),
            "human_win": human_win(humans[0] if humans else None, pool), "mean_win": mean_win(pool)}


def aggregate(per_problem: dict[str, dict[str, float | None]], groups: dict[str, str]) -> dict[str, Any]:
    """Average each metric within groups (variants of one original problem), then over groups."""
    summary: dict[str, Any] = {}
    for metric in METRICS:
        by_group: dict[str, list[float]] = defaultdict(list)
        for problem, values in per_problem.items():
            value = values[metric]
            if value is not None:
                by_group[groups.get(problem, problem)].append(value)
        group_means = [_mean(v) for v in by_group.values()]
        defined = sum(len(v) for v in by_group.values())
        summary[metric] = {"value": _mean(group_means) if group_means else None, "groups": len(group_means),
                           "problems": defined, "undefined": len(per_problem) - defined}
    return summary


def rank(scores: dict[str, dict[str, float]], labels: dict[str, dict[str, Any]], *, human_in_pool: bool = False,
         k: int = 5) -> dict[str, Any]:
    """The full record: per-problem metrics and the aggregate."""
    per_problem: dict[str, dict[str, float | None]] = {}
    groups: dict[str, str] = {}
    for problem, pool_labels in sorted(labels.items()):
        candidates = _join(problem, scores.get(problem), pool_labels["candidates"])
        per_problem[problem] = problem_metrics(candidates, human_in_pool=human_in_pool, k=k)
        groups[problem] = str(pool_labels.get("group") or problem)
    return {"metrics": aggregate(per_problem, groups), "per_problem": per_problem, "groups": groups,
            "human_in_pool": human_in_pool, "k": k}


def _join(problem: str, scores: dict[str, float] | None, labels: dict[str, dict[str, Any]]) -> list[Candidate]:
    if scores is None:
        raise InputError(f"no scores for problem {problem!r}", hint="every labelled problem needs scores")
    missing = sorted(set(labels) - set(scores))
    if missing:
        raise InputError(f"problem {problem!r}: no score for candidate(s) {', '.join(missing)}",
                         hint="score every labelled candidate (or drop its label)")
    candidates = []
    for cid, label in labels.items():
        score = scores[cid]
        if not isinstance(score, int | float) or isinstance(score, bool) or not math.isfinite(score):
            raise InputError(f"problem {problem!r}, candidate {cid!r}: score {score!r} is not a finite number")
        candidates.append(Candidate(cid, float(score), bool(label["correct"]), bool(label.get("human", False))))
    return candidates


# ----- files ------------------------------------------------------------------------------------------------

def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON: {exc}") from exc


def load_scores(path: Path) -> dict[str, dict[str, float]]:
    """``{problem: {candidate: score}}``, or rows ``[{problem, candidate, score}]`` (JSON or JSONL)."""
    data = _read_json(path)
    if isinstance(data, dict) and "scores" in data and isinstance(data["scores"], dict):
        data = data["scores"]
    if isinstance(data, list):
        out: dict[str, dict[str, float]] = defaultdict(dict)
        for row in data:
            try:
                out[str(row["problem"])][str(row["candidate"])] = row["score"]
            except (KeyError, TypeError) as exc:
                raise InputError(f"{path}: each row needs problem, candidate, score (got {row!r})") from exc
        return dict(out)
    if isinstance(data, dict) and all(isinstance(v, dict) for v in data.values()):
        return {str(p): {str(c): s for c, s in pool.items()} for p, pool in data.items()}
    raise InputError(f"{path}: scores must be {{problem: {{candidate: score}}}} or a list of rows",
                     hint='e.g. {"P1": {"c1": 0.8, "c2": 0.1}}')


def load_labels(path: Path) -> dict[str, dict[str, Any]]:
    """``{problem: {"group": G, "candidates": {id: {"correct": bool, "human": bool}}}}``, a shorthand
    ``{problem: {id: bool}}``, or rows ``[{problem, candidate, correct, human?, group?}]``."""
    data = _read_json(path)
    rows: list[dict[str, Any]] = []
    if isinstance(data, list):
        rows = data
    elif isinstance(data, dict):
        for problem, pool in data.items():
            if not isinstance(pool, dict):
                raise InputError(f"{path}: problem {problem!r} must map to an object")
            cands = pool.get("candidates", pool if "candidates" not in pool else {})
            for cid, label in cands.items():
                label = label if isinstance(label, dict) else {"correct": label}
                rows.append({"problem": problem, "candidate": cid, "group": pool.get("group"), **label})
    return _labels_from_rows(path, rows)


def _labels_from_rows(path: Path, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        if not isinstance(row, dict) or "problem" not in row or "candidate" not in row:
            raise InputError(f"{path}: a label row needs problem and candidate (got {row!r})")
        if not isinstance(row.get("correct"), bool):
            raise InputError(f"{path}: problem {row['problem']!r}, candidate {row['candidate']!r}: 'correct' must be "
                             f"true or false (got {row.get('correct')!r})")
        pool = out.setdefault(str(row["problem"]), {"group": row.get("group"), "candidates": {}})
        pool["group"] = pool["group"] or row.get("group")
        pool["candidates"][str(row["candidate"])] = {"correct": row["correct"], "human": bool(row.get("human"))}
    if not out:
        raise InputError(f"{path}: no labels found")
    return out
