"""Ranking metrics against hand-computed values on small pools with ties (seed 003, §4.4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.errors import InputError
from anchorage.verify.ranking import Candidate, load_labels, load_scores, problem_metrics, rank, recall_at_k

# P1 and P2 are variants of one original problem (group G1); P3 stands alone and has no incorrect candidate.
SCORES = {
    "P1": {"a": 0.9, "b": 0.9, "c": 0.5, "d": 0.2, "e": 0.2, "f": 0.1, "h": 0.6},
    "P2": {"x": 1.0, "y": 0.0, "z": 0.0},
    "P3": {"p": 0.3, "q": 0.3},
}
LABELS: dict[str, dict[str, Any]] = {
    "P1": {"group": "G1", "candidates": {"a": {"correct": True}, "b": {"correct": False}, "c": {"correct": True},
                                         "d": {"correct": False}, "e": {"correct": False}, "f": {"correct": True},
                                         "h": {"correct": True, "human": True}}},
    "P2": {"group": "G1", "candidates": {"x": {"correct": True}, "y": {"correct": False},
                                         "z": {"correct": True, "human": True}}},
    "P3": {"candidates": {"p": {"correct": True}, "q": {"correct": True}}},
}


def test_per_problem_values_by_hand() -> None:
    result = rank(SCORES, LABELS)["per_problem"]
    # P1 pool (human apart): 0.9 C, 0.9 I, 0.5 C, 0.2 I, 0.2 I, 0.1 C
    assert result["P1"]["acc_at_1"] == pytest.approx(0.5)           # top tie: one of two correct
    assert result["P1"]["recall_at_5"] == pytest.approx(2 / 3)      # a, c in the top 5 of 3 correct
    assert result["P1"]["auc"] == pytest.approx(4.5 / 9)            # (0.5+1+1) + (0+1+1) + 0 over 9 pairs
    assert result["P1"]["human_win"] == 1.0                         # 0.6 > mean incorrect 0.4333
    assert result["P1"]["mean_win"] == 1.0                          # mean correct 0.5 > 0.4333
    assert result["P2"]["human_win"] == 0.5                         # human 0.0 ties mean incorrect 0.0
    assert result["P2"]["acc_at_1"] == 1.0 and result["P2"]["auc"] == 1.0
    assert result["P3"]["acc_at_1"] == 1.0 and result["P3"]["recall_at_5"] == 1.0
    assert result["P3"]["auc"] is None and result["P3"]["mean_win"] is None and result["P3"]["human_win"] is None


def test_aggregate_averages_variants_first() -> None:
    metrics = rank(SCORES, LABELS)["metrics"]
    assert metrics["acc_at_1"]["value"] == pytest.approx((0.75 + 1.0) / 2)     # G1 = mean(0.5, 1.0); P3 = 1.0
    assert metrics["recall_at_5"]["value"] == pytest.approx(((2 / 3 + 1) / 2 + 1) / 2)
    assert metrics["auc"]["value"] == pytest.approx(0.75)                     # only G1 defined: mean(0.5, 1.0)
    assert metrics["auc"]["undefined"] == 1 and metrics["auc"]["groups"] == 1
    assert metrics["human_win"]["value"] == pytest.approx(0.75)
    assert metrics["mean_win"]["value"] == 1.0


def test_human_in_pool_changes_the_pool() -> None:
    p1 = rank(SCORES, LABELS, human_in_pool=True)["per_problem"]["P1"]
    assert p1["recall_at_5"] == pytest.approx(3 / 4)                # a, h, c of four correct
    assert p1["auc"] == pytest.approx(6.5 / 12)                     # 2.5 + 2 + 2 + 0 over 4 × 3 pairs


def test_recall_with_a_tie_across_the_cut() -> None:
    pool = [Candidate("top", 1.0, False)] + [Candidate(f"t{i}", 0.5, i % 2 == 0) for i in range(6)]
    # 4 slots left for a tie group of 6 holding 3 correct: 4 · 3/6 = 2 expected, of 3 correct
    assert recall_at_k(pool, 5) == pytest.approx(2 / 3)


def test_all_tied_scores_are_chance_level() -> None:
    pool = [Candidate("a", 0.0, True), Candidate("b", 0.0, False), Candidate("c", 0.0, False), Candidate("d", 0.0, True)]
    values = problem_metrics(pool)
    assert values["acc_at_1"] == 0.5 and values["auc"] == 0.5 and values["mean_win"] == 0.5


def test_missing_score_is_an_input_error() -> None:
    scores = {**SCORES, "P2": {"x": 1.0, "y": 0.0}}
    with pytest.raises(InputError, match="no score for candidate"):
        rank(scores, LABELS)


def test_loaders_accept_rows_and_nested_forms(tmp_path: Path) -> None:
    rows = [{"problem": p, "candidate": c, "score": s} for p, pool in SCORES.items() for c, s in pool.items()]
    (tmp_path / "scores.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    label_rows = [{"problem": p, "candidate": c, "group": pool.get("group"), **lab}
                  for p, pool in LABELS.items() for c, lab in pool["candidates"].items()]
    (tmp_path / "labels.json").write_text(json.dumps(label_rows))
    (tmp_path / "short.json").write_text(json.dumps({"P3": {"p": True, "q": True}}))
    assert load_scores(tmp_path / "scores.jsonl") == SCORES
    assert rank(load_scores(tmp_path / "scores.jsonl"), load_labels(tmp_path / "labels.json")) == rank(SCORES, LABELS)
    assert load_labels(tmp_path / "short.json")["P3"]["candidates"]["p"] == {"correct": True, "human": False}
    (tmp_path / "bad.json").write_text(json.dumps([{"problem": "P", "candidate": "c", "correct": "yes"}]))
    with pytest.raises(InputError, match="'correct' must be true or false"):
        load_labels(tmp_path / "bad.json")


def test_cli_rank_json_and_table(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps(SCORES))
    (tmp_path / "l.json").write_text(json.dumps(LABELS))
    runner = CliRunner()
    done = runner.invoke(app, ["verify", "rank", "--scores", str(tmp_path / "s.json"), "--labels",
                               str(tmp_path / "l.json"), "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["metrics"]["auc"]["value"] == pytest.approx(0.75)
    table = runner.invoke(app, ["verify", "rank", "--scores", str(tmp_path / "s.json"), "--labels",
                                str(tmp_path / "l.json")])
    assert table.exit_code == 0 and "Acc@1" in table.output and "87.50" in table.output and "75.00" in table.output
