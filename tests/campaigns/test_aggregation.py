"""The leaderboard's arithmetic: per-seed task means, mean ± sample std over seeds, F, Art., cost, order."""

from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path

import pytest

from anchorage.campaigns.aggregation import TrialResult, cost_note, leaderboard, robust_bo
from anchorage.scoring import score_artifact
from anchorage.trials.phases import Phase, Reason
from anchorage.trials.records import TrialRecord


def _r(entry: str, task: str, seed: int, raw: float, *, gradable: bool = True, phase: str = "Succeeded",
       cost: float = 0.0, oracle: float = 1.0, hard: bool = False) -> TrialResult:
    return TrialResult(entry=entry, task=task, seed=seed, phase=phase, reason=None, gradable=gradable, raw=raw,
                       oracle_raw=oracle, config_baseline_raw=0.2, o_eval=min(1.0, raw / oracle) if gradable else 0.0,
                       hard_gate_failed=hard, cost_usd=cost)


def _grid() -> list[TrialResult]:
    out = []
    raws = {("a", "t1"): [0.9, 0.7], ("a", "t2"): [0.5, 0.6], ("base", "t1"): [0.3, 0.5], ("base", "t2"): [0.1, 0.1]}
    for (entry, task), values in raws.items():
        for seed, raw in enumerate(values):
            out.append(_r(entry, task, seed, raw, cost=0.25 if entry == "a" else 0.0))
    return out


def test_means_std_and_order() -> None:
    board = leaderboard(_grid(), baseline="base")
    assert [row.entry for row in board.rows] == ["a", "base"]
    a = board.rows[0]
    seed_means = [(0.9 + 0.5) / 2, (0.7 + 0.6) / 2]
    assert a.o_eval_mean == pytest.approx(statistics.fmean(seed_means))
    assert a.o_eval_std == pytest.approx(statistics.stdev(seed_means))  # sample std, ddof=1
    assert a.cost_per_seed_usd == pytest.approx(0.5)
    assert a.artifacts_mean == 2.0 and a.seeds == 2 and not a.incomplete


def test_f_is_the_baseline_mean_and_bo_uses_it() -> None:
    board = leaderboard(_grid(), baseline="base")
    assert board.f_by_task["t1"]["F"] == pytest.approx(0.4)
    assert "mean raw of 2 seeds" in board.f_by_task["t1"]["source"]
    # t1: gap = 1 − 0.4 = 0.6 ≥ 0.10 → (R − F)/gap ; t2: F = 0.1, gap 0.9
    expected_seed0 = statistics.fmean([(0.9 - 0.4) / 0.6, (0.5 - 0.1) / 0.9])
    assert board.rows[0].per_seed[0].bo_eval == pytest.approx(expected_seed0)
    base = board.rows[1]
    assert base.bo_eval_mean == pytest.approx(0.0, abs=1e-12)  # the baseline averages to its own zero point


def test_without_baseline_f_comes_from_the_configuration() -> None:
    board = leaderboard(_grid(), baseline=None)
    assert board.f_by_task["t1"]["F"] == 0.2 and "configuration" in board.f_by_task["t1"]["source"]


def test_per_task_column_means_equal_the_leaderboard() -> None:
    board = leaderboard(_grid(), baseline="base")
    for row in board.rows:
        for metric, mean in (("o_eval", row.o_eval_mean), ("bo_eval", row.bo_eval_mean)):
            column = statistics.fmean(getattr(board.per_task[t][row.entry], metric) for t in board.tasks)
            assert column == pytest.approx(mean, abs=1e-12)


def test_missing_or_gated_artifacts_are_minus_one_and_infra_is_apart() -> None:
    results = [*_grid(), _r("b", "t1", 0, 0.0, gradable=False), _r("b", "t2", 0, 0.9, hard=True),
                         _r("b", "t1", 1, 0.5), _r("b", "t2", 1, 0.0, phase="InfrastructureFailed")]
    board = leaderboard(results, baseline="base")
    b = next(row for row in board.rows if row.entry == "b")
    assert b.per_seed[0].bo_eval == -1.0 and b.per_seed[0].artifacts == 1
    assert b.infrastructure_failed == 1 and b.incomplete and b.per_seed[1].tasks == 1
    assert robust_bo(results[-3], 0.4) == -1.0


def test_single_seed_has_zero_std() -> None:
    board = leaderboard([_r("a", "t", 0, 0.5)], baseline=None)
    assert board.rows[0].o_eval_std == 0.0 and not math.isnan(board.rows[0].bo_eval_mean)


def test_unknown_costs_are_counted_not_taken_for_zero() -> None:
    base = {"entry": "m", "task": "t1", "phase": "Succeeded", "score": {"gradable": True, "raw": 1.0, "oracle_raw": 1.0,
                                                                          "o_eval": 1.0}}
    records = [{**base, "seed": 0, "cost_usd": 0.004}, {**base, "seed": 1, "cost_usd": None},
               {**base, "seed": 2, "cost_usd": 0.002}]
    results = [TrialResult.from_record(r) for r in records]
    assert [r.cost_known for r in results] == [True, False, True]
    assert TrialResult.from_record({**base, "seed": 3}).cost_known, "a record without the key (older runs) costs 0"
    [row] = leaderboard(results, baseline=None).rows
    assert row.costs_unknown == 1
    assert row.cost_per_seed_usd == pytest.approx(0.002)  # (0.004 + 0 + 0.002) / 3: a lower bound, flagged above


def test_unmetered_requests_make_the_cost_a_lower_bound_on_the_leaderboard() -> None:
    from anchorage.report.tables import to_csv, to_markdown, to_text

    base = {"entry": "m", "task": "t1", "phase": "Succeeded", "score": {"gradable": True, "raw": 1.0, "oracle_raw": 1.0,
                                                                          "o_eval": 1.0}}
    records = [{**base, "seed": 0, "cost_usd": 0.004, "usage": {"cost_usd": 0.004, "unmetered_requests": 0}},
               {**base, "seed": 1, "cost_usd": None, "cost_unknown": "3 request(s) unmetered",
                "usage": {"cost_usd": 0.002, "unmetered_requests": 3}}]
    board = leaderboard([TrialResult.from_record(r) for r in records], baseline=None)
    [row] = board.rows
    assert (row.costs_unknown, row.unmetered_requests) == (1, 3)
    assert row.cost_per_seed_usd == pytest.approx(0.003)  # the metered part of the unknown one counts: a lower bound
    assert "≥ 0.0030, 3 request(s) unmetered" in to_markdown(board)
    csv_row = dict(zip(*[line.split(",") for line in to_csv(board).splitlines()], strict=True))
    assert (csv_row["cost_is_lower_bound"], csv_row["costs_unknown"], csv_row["unmetered_requests"]) == ("true", "1", "3")
    assert float(csv_row["cost_per_seed_usd"]) == pytest.approx(0.003)  # a plain number; the flag says lower bound
    assert to_text(board)[0][4] == "≥ $0.0030, 3 request(s) unmetered"
    known = leaderboard([TrialResult.from_record(records[0])], baseline=None)
    assert "≥" not in to_markdown(known) and to_text(known)[0][4] == "$0.0040"


def test_failing_on_purpose_never_ranks_above_an_honest_twin() -> None:
    """Two twins doing equally well on seed 0 and badly on seed 1; the cheat turns its bad seed into
    infrastructure failures. Its mean over scored cells is higher — its rank is not."""
    results = []
    for task in ("t1", "t2"):
        results.append(_r("honest", task, 0, 0.9))
        results.append(_r("honest", task, 1, 0.1))
        results.append(_r("cheat", task, 0, 0.9))
        results.append(_r("cheat", task, 1, 0.0, gradable=False, phase="InfrastructureFailed"))
    board = leaderboard(results, baseline=None)
    rows = {row.entry: row for row in board.rows}
    assert rows["cheat"].o_eval_mean > rows["honest"].o_eval_mean  # the flattering mean is still shown
    assert rows["cheat"].incomplete and not rows["honest"].incomplete
    assert (rows["cheat"].cells_scored, rows["cheat"].cells_expected) == (2, 4)
    assert rows["cheat"].rank_o_eval == pytest.approx(0.45) and rows["honest"].rank_o_eval == pytest.approx(0.5)
    assert [row.entry for row in board.rows] == ["honest", "cheat"]
    assert "lower bound" in board.ranking and board.to_dict()["ranking"] == board.ranking


def test_an_incomplete_entry_still_ranks_first_when_its_lower_bound_wins() -> None:
    results = [_r("strong", t, s, 0.95) for t in ("t1", "t2") for s in (0, 1)]
    results[-1] = _r("strong", "t2", 1, 0.0, gradable=False, phase="InfrastructureFailed")
    results += [_r("weak", t, s, 0.2) for t in ("t1", "t2") for s in (0, 1)]
    board = leaderboard(results, baseline=None)
    assert [row.entry for row in board.rows] == ["strong", "weak"]  # 3 × 0.95 / 4 = 0.71 > 0.2


def test_a_tie_puts_the_complete_entry_first() -> None:
    results = [_r("complete", "t1", 0, 0.5), _r("complete", "t1", 1, 0.5),
               _r("partial", "t1", 0, 1.0), _r("partial", "t1", 1, 0.0, gradable=False, phase="InfrastructureFailed")]
    board = leaderboard(results, baseline=None)
    assert [row.entry for row in board.rows] == ["complete", "partial"]


def test_the_campaign_totals_its_unknown_costs_and_says_the_cost_is_incomplete() -> None:
    """Over every trial, infrastructure failures too (their tokens were spent); a complete cost says nothing."""
    from anchorage.report.pages import leaderboard_table
    from anchorage.report.tables import to_markdown

    base = {"task": "t1", "score": {"gradable": True, "raw": 1.0, "oracle_raw": 1.0, "o_eval": 1.0}}
    records = [{**base, "entry": "a", "seed": 0, "phase": "Succeeded", "cost_usd": 0.01},
               {**base, "entry": "a", "seed": 1, "phase": "Succeeded", "cost_usd": None,
                "usage": {"cost_usd": 0.0, "unmetered_requests": 2}},
               {**base, "entry": "b", "seed": 0, "phase": "InfrastructureFailed", "cost_usd": None,
                "usage": {"unmetered_requests": 1}},
               {**base, "entry": "b", "seed": 1, "phase": "Succeeded", "cost_usd": None}]
    board = leaderboard([TrialResult.from_record(r) for r in records], baseline=None)
    assert (board.costs_unknown, board.unmetered_requests) == (3, 3)
    assert sum(row.costs_unknown for row in board.rows) == 2  # the rows count their scored trials only
    assert board.cost_note == "cost incomplete: 3 trial cost(s) unknown, 3 request(s) unmetered by the gateway; " \
        "the costs shown are lower bounds"
    assert board.to_dict()["cost_note"] == board.cost_note  # leaderboard.json carries it (both drivers write it)
    assert "**Cost incomplete: 3 trial cost(s) unknown" in to_markdown(board)
    assert "cost incomplete: 3 trial cost(s) unknown" in leaderboard_table(board, lambda _: None)
    known = leaderboard([TrialResult.from_record(records[0])], baseline=None)
    assert known.cost_note is None and "incomplete" not in to_markdown(known).split("Scoring profile")[0]
    assert cost_note(1, 0) == "cost incomplete: 1 trial cost(s) unknown; the costs shown are lower bounds"


def test_the_typed_constructors_give_what_the_dict_reading_gives(tmp_path: Path) -> None:
    """The operator's typed reads (``TrialResult.of`` a stored record, ``.unrecorded`` for a missing one,
    ``.rescored`` a ScoringRun's artifact) rank exactly as :meth:`TrialResult.from_record` of the same dicts."""
    score = dataclasses.replace(score_artifact("smoke-inventory", tmp_path), gradable=True, raw=0.7, oracle_raw=0.9,
                                baseline_raw=0.2, o_eval=0.4, hard_gate_failed=True)
    record = TrialRecord(name="t", entry="e", task=score.task, seed=2, driver="operator", phase=Phase.SUCCEEDED,
                         reason=Reason.COMPLETED, usage={"cost_usd": 0.25, "unmetered_requests": 1},
                         panel={"outcome": "confirmed"}, cbu={"utility": 0.5}, message="done")
    record.apply_score(score, None)
    assert TrialResult.of(record) == TrialResult.from_record(record.to_json())
    record.cost_usd = 1.5
    assert TrialResult.of(record) == TrialResult.from_record(record.to_json())
    assert TrialResult.unrecorded("e", "x", 1, "InfrastructureFailed") == TrialResult.from_record(
        {"entry": "e", "task": "x", "seed": 1, "phase": "InfrastructureFailed", "score": {}})
    for profile in ("paper", "strict"):
        assert TrialResult.rescored("e", "x", 0, score, profile) == TrialResult.from_record(
            {"entry": "e", "task": "x", "seed": 0, "phase": "Succeeded", "score": score.to_dict(),
             "scoring_profile": profile})
        assert TrialResult.rescored("e", "x", 0, None, profile) == TrialResult.from_record(
            {"entry": "e", "task": "x", "seed": 0, "phase": "Succeeded", "score": {"gradable": False, "error": "none"},
             "scoring_profile": profile})
