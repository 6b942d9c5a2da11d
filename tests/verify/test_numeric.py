"""Numeric-answer path: majority vote by value; top two checked by substitution when there is no majority."""

from __future__ import annotations

from fractions import Fraction

import pytest

from anchorage.errors import InputError
from anchorage.verify.numeric import answers_match, decide_numeric, majority_vote, parse_number, run_numeric
from anchorage.verify.prompts import Problem

from .fakes import ScriptedClient

PROBLEM = Problem("aime", "Find the number of ordered pairs ...")


@pytest.mark.parametrize(("text", "value"), [("1/2", Fraction(1, 2)), ("0.5", Fraction(1, 2)),
                                             ("\\frac{1}{2}", Fraction(1, 2)), ("$\\boxed{1/2}$", Fraction(1, 2)),
                                             ("1,000", Fraction(1000)), ("-3e2", Fraction(-300)), ("x+1", None),
                                             ("1/0", None)])
def test_parse_number(text: str, value: Fraction | None) -> None:
    assert parse_number(text) == value


def test_majority_groups_answers_by_value() -> None:
    vote = majority_vote(["0.5", "1/2", "\\frac{1}{2}", "3", None])
    assert vote.majority == "0.5" and vote.answered == 4


def test_no_majority_checks_the_top_two_by_substitution() -> None:
    vote = majority_vote(["7", "8", "7", "8", "9"])
    assert vote.majority is None and vote.top_two() == [("7", 2), ("8", 2)]
    checked: list[str] = []

    def check(answer: str) -> bool:
        checked.append(answer)
        return answer == "8"

    record = decide_numeric(vote, check)
    assert record["answer"] == "8" and record["decided_by"] == "substitution" and checked == ["7", "8"]
    both = decide_numeric(majority_vote(["7", "8", "8", "7", "8", "9", "1"]), lambda a: True)
    assert both["answer"] == "8"                           # both pass: the more frequent wins
    none = decide_numeric(vote, lambda a: False)
    assert none["answer"] is None and none["decided_by"] == "abstain" and "top two" in none["reason"]
    silent = decide_numeric(majority_vote([None, " ", None, None, None]), lambda a: True)
    assert silent["answer"] is None and "no solver returned" in silent["reason"] and silent["checks"] == []


def test_answers_match_by_value_or_text() -> None:
    assert answers_match("0.3333333", "1/3", rel_tol=1e-6)
    assert not answers_match("0.33", "1/3")
    assert answers_match("$\\boxed{x + 1}$", "x+1") and not answers_match(None, "1")


def test_run_numeric_end_to_end_with_a_scripted_model() -> None:
    answers = {0: "12", 1: "15", 2: "12", 3: "15", 4: "20"}

    def script(user: str, seed: int) -> str:
        if "role=numeric-check" in user:
            return "**Check**: PASSES\nAll conditions hold." if "CANDIDATE ANSWER: 15" in user else "**Check**: FAILS"
        return f"<think>try</think>\n**Method**: count.\n**Detailed Solution**: ...\n**Answer**: {answers[seed]}"

    record = run_numeric(PROBLEM, ScriptedClient(script), model="m", solvers=5)
    assert record["answer"] == "15" and record["decided_by"] == "substitution"
    assert [c["answer"] for c in record["checks"]] == ["12", "15"]
    with pytest.raises(InputError, match="5–7 solvers"):
        run_numeric(PROBLEM, ScriptedClient(script), model="m", solvers=3)
