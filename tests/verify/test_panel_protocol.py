"""Panel protocol details with a scripted client: mixed votes, pattern sweep, GAP revisions, failures, solvers."""

from __future__ import annotations

from anchorage.verify.panel import run_panel, solve_and_verify
from anchorage.verify.prompts import Problem
from anchorage.verify.settings import PanelSettings

from .fakes import HOLDS, HOLE, ScriptedClient, fail

PROBLEM = Problem("p1", "Prove that 1 + 1 = 2 in the natural numbers.")
SOLUTION = "**Method**: Peano.\n**Proof**: 1 + 1 = S(0) + S(0) = S(S(0) + 0) = S(S(0)) = 2.\n**Answer**: 2"


def test_one_flaky_hole_does_not_kill_a_correct_proof() -> None:
    client = ScriptedClient(lambda user, seed: HOLE.format(why="flaky") if seed == 0 else HOLDS)
    record = run_panel(PROBLEM, SOLUTION, client, PanelSettings()).to_dict()
    vote = record["rounds"][0]["vote"]
    assert record["status"] == "confirmed"
    assert vote["counts"] == {"HOLDS": 4, "HOLE FOUND": 1, "UNCLEAR": 0} and vote["launched"] == 5
    assert client.roles() == ["verifier"] * 5


def test_large_tier_pattern_sweep_can_refute_a_confirmation() -> None:
    def script(user: str, seed: int) -> str:
        return HOLE.format(why="pattern hit") if "role=pattern#40" in user or "role=pattern#5 " in user else HOLDS

    settings = PanelSettings(tier="large", max_revisions=0)
    record = run_panel(PROBLEM, SOLUTION, ScriptedClient(script), settings).to_dict()
    vote = record["rounds"][0]["vote"]
    assert record["status"] == "refuted" and vote["counts"]["HOLDS"] == 4
    assert {b["role"] for b in vote["pattern_sweep"] if b["verdict"]["kind"] == "HOLE FOUND"} == {"pattern#5", "pattern#40"}


def test_one_pattern_hole_alone_does_not_refute() -> None:
    def script(user: str, seed: int) -> str:
        return HOLE.format(why="pattern hit") if "role=pattern#40" in user else HOLDS

    record = run_panel(PROBLEM, SOLUTION, ScriptedClient(script), PanelSettings(tier="large")).to_dict()
    assert record["status"] == "confirmed" and len(record["rounds"][0]["vote"]["pattern_sweep"]) == 6


def test_gaps_go_back_to_the_reviser_without_a_vote() -> None:
    revisions = iter([
        "**Proof**: 1 + 1 = 2 by definition. [GAP: show S(0) + S(0) = S(S(0))]\n**Answer**: 2",
        "**Proof**: S(0) + S(0) = S(S(0) + 0) = S(S(0)) by the recursion equations of +.\n**Answer**: 2",
    ])

    def script(user: str, seed: int) -> str:
        if "role=reviser" in user:
            return next(revisions)
        return HOLDS if "recursion equations" in user else HOLE.format(why="unjustified step")

    client = ScriptedClient(script)
    record = run_panel(PROBLEM, SOLUTION, client, PanelSettings(max_parallel=1)).to_dict()
    assert [r["revision"] for r in record["rounds"]] == ["", "gaps left", "revised"]
    assert record["rounds"][1]["vote"] is None and record["status"] == "confirmed"
    second_reviser = [u for u, _ in client.calls if "role=reviser" in u][1]
    assert "[GAP: show S(0) + S(0) = S(S(0))]" in second_reviser and "declared gap" in second_reviser


def test_revisions_run_out_into_a_calibrated_abstention() -> None:
    def script(user: str, seed: int) -> str:
        if "role=reviser" in user:
            return "**Proof**: still the same idea, reworded.\n**Answer**: 2"
        return HOLE.format(why="still unjustified")

    client = ScriptedClient(script)
    record = run_panel(PROBLEM, SOLUTION, client, PanelSettings(max_revisions=2, max_parallel=1)).to_dict()
    assert record["status"] == "abstained" and len(record["rounds"]) == 3
    assert record["abstention"]["declared_by"] == "panel" and "still unjustified" in record["abstention"]["where_it_breaks"]
    assert client.roles().count("reviser") == 2 and client.roles().count("verifier") == 6   # 2 per refuting vote


def test_failed_verifier_calls_count_as_unclear_never_as_votes() -> None:
    client = ScriptedClient(lambda user, seed: fail() if seed in (1, 2) else HOLDS)
    record = run_panel(PROBLEM, SOLUTION, client, PanelSettings(max_revisions=0)).to_dict()
    vote = record["rounds"][0]["vote"]
    # two UNCLEAR of five: 4 HOLDS are out of reach, 2 HOLE FOUND too once two HOLDS arrive → undecided early
    assert record["status"] == "undecided" and vote["counts"]["UNCLEAR"] == 2 and vote["counts"]["HOLE FOUND"] == 0
    assert sum(bool(b["error"]) for b in vote["ballots"]) == 2


def test_solver_stage_screens_candidates_and_votes_on_the_best() -> None:
    def script(user: str, seed: int) -> str:
        if "role=solver" in user:
            body = "by the recursion equations" if seed == 3 else "by intuition"
            return f"<think>hmm</think>\n**Method**: m{seed}\n**Detailed Solution**: 1 + 1 = 2 {body}.\n**Answer**: 2"
        return HOLDS if "recursion equations" in user else HOLE.format(why="no justification")

    client = ScriptedClient(script)
    record = solve_and_verify(PROBLEM, client, PanelSettings(solvers=4)).to_dict()
    assert record["status"] == "confirmed" and "m3" in record["final_solution"]
    assert record["screening"][0]["solver"] == 3 and len(record["screening"]) == 4
    assert client.roles().count("solver") == 4 and all("<think>" not in u for u, _ in client.calls)
