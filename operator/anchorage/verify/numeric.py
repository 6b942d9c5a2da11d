"""The numeric-answer path (seed 002, AIME-style; SPEC §7): majority vote, substitution check of the top two.

No proof machinery: 5–7 solvers with different starting angles each return an **Answer**; answers are
compared by *value* (``0.5``, ``1/2``, ``\\frac{1}{2}`` and ``\\boxed{1/2}`` are one answer; non-numeric
answers compare as normalised text). A strict majority of the solvers that answered wins. Without one,
the two most frequent answers (ties: first seen) are each checked by substitution — a fresh model call
that substitutes the candidate back into the problem and answers ``PASSES`` or ``FAILS``. Exactly one
passing → it wins; both passing → the more frequent; neither → abstain. Used by ``anchorage verify
numeric``; :func:`majority_vote` and :func:`decide_numeric` are pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from anchorage.errors import InfrastructureError, InputError
from anchorage.verify.cleaning import clean_solution
from anchorage.verify.models import ModelClient
from anchorage.verify.prompts import Problem, PromptSet, load_prompts

_FRAC = re.compile(r"\\[dt]?frac\{\s*(-?[\d.]+)\s*\}\{\s*(-?[\d.]+)\s*\}")
_BOXED = re.compile(r"\\boxed\{(.*)\}")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$")
_CHECK = re.compile(r"check\W*\s*(?P<v>passes|fails)", re.IGNORECASE)


def parse_number(text: str) -> Fraction | None:
    """An exact value for a numeric answer, or None when it is not a plain number/fraction."""
    text = text.strip().strip("$").strip()
    boxed = _BOXED.search(text)
    text = (boxed.group(1) if boxed else text).strip().rstrip(".").replace(" ", "")
    frac = _FRAC.fullmatch(text)
    if frac:
        text = f"{frac.group(1)}/{frac.group(2)}"
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    try:
        if "/" in text:
            num, den = text.split("/", 1)
            return Fraction(num) / Fraction(den) if _NUMBER.match(num) and _NUMBER.match(den) else None
        return Fraction(text) if _NUMBER.match(text) else None
    except (ValueError, ZeroDivisionError):
        return None


def answer_key(text: str) -> str:
    """The comparison key of an answer: its exact value, else its normalised text."""
    value = parse_number(text)
    if value is not None:
        return f"={value}"
    text = text.strip().strip("$").strip()
    boxed = _BOXED.search(text)
    return re.sub(r"\s+", "", boxed.group(1) if boxed else text).lower()


def answers_match(given: str | None, expected: str, rel_tol: float = 1e-6) -> bool:
    """Whether ``given`` states ``expected`` (by value within ``rel_tol``, else by normalised text)."""
    if given is None:
        return False
    a, b = parse_number(given), parse_number(expected)
    if a is not None and b is not None:
        return abs(float(a) - float(b)) <= rel_tol * max(1.0, abs(float(b)))
    return answer_key(given) == answer_key(expected)


def extract_answer(reply: str) -> str | None:
    """The **Answer** of a reply (cleaned), else None."""
    answer = clean_solution(reply).answer.strip()
    return answer.splitlines()[0].strip() if answer else None


@dataclass
class NumericVote:
    """Answers grouped by value, in order of first appearance."""

    groups: list[tuple[str, str, int]] = field(default_factory=list)  # (key, first spelling, count)
    answered: int = 0
    solvers: int = 0

    @property
    def majority(self) -> str | None:
        best = max(self.groups, key=lambda g: g[2], default=None)
        return best[1] if best and best[2] * 2 > self.answered else None

    def top_two(self) -> list[tuple[str, int]]:
        ranked = sorted(enumerate(self.groups), key=lambda ig: (-ig[1][2], ig[0]))
        return [(g[1], g[2]) for _, g in ranked[:2]]


def majority_vote(answers: Sequence[str | None]) -> NumericVote:
    vote = NumericVote(solvers=len(answers))
    index: dict[str, int] = {}
    for answer in answers:
        if answer is None or not answer.strip():
            continue
        vote.answered += 1
        key = answer_key(answer)
        if key in index:
            k, spelling, count = vote.groups[index[key]]
            vote.groups[index[key]] = (k, spelling, count + 1)
        else:
            index[key] = len(vote.groups)
            vote.groups.append((key, answer.strip(), 1))
    return vote


def decide_numeric(vote: NumericVote, check: Callable[[str], bool | None]) -> dict[str, Any]:
    """Majority, else substitution of the top two; the record says which rule decided."""
    record: dict[str, Any] = {"answers": [{"answer": s, "count": c} for _, s, c in vote.groups],
                              "solvers": vote.solvers, "answered": vote.answered, "checks": []}
    if vote.majority is not None:
        return {**record, "answer": vote.majority, "decided_by": "majority"}
    if not vote.answered:
        return {**record, "answer": None, "decided_by": "abstain", "reason": "no solver returned an **Answer**"}
    top = vote.top_two()
    passing = []
    for answer, count in top:
        result = check(answer)
        record["checks"].append({"answer": answer, "count": count, "passes": result})
        if result:
            passing.append((answer, count))
    if not passing:
        return {**record, "answer": None, "decided_by": "abstain",
                "reason": "no majority and neither of the top two survives substitution"}
    return {**record, "answer": max(passing, key=lambda p: p[1])[0], "decided_by": "substitution"}


def run_numeric(problem: Problem, client: ModelClient, *, model: str, solvers: int = 5,
                prompts: PromptSet | None = None) -> dict[str, Any]:
    """Run the solvers through the client, vote, check by substitution when needed."""
    if not 5 <= solvers <= 7:
        raise InputError(f"the numeric path runs 5–7 solvers, got {solvers}", hint="--solvers 5, 6 or 7")
    prompts = prompts or load_prompts()
    angles = prompts.angles()

    def solve(i: int) -> str | None:
        try:
            reply = client.complete(prompts.solver(problem, angles[i % len(angles)]), model=model, seed=i,
                                    run_id=f"{problem.id}/numeric-solver{i}").text
        except InfrastructureError:
            return None
        return extract_answer(reply)

    def check(answer: str) -> bool | None:
        reply = client.complete(prompts.numeric_check(problem, answer), model=model, seed=0,
                                run_id=f"{problem.id}/substitution").text
        match = _CHECK.search(reply)
        return None if match is None else match.group("v").lower() == "passes"

    with ThreadPoolExecutor(max_workers=solvers, thread_name_prefix="numeric") as pool:
        answers = list(pool.map(solve, range(solvers)))
    return {"problem": problem.id, **decide_numeric(majority_vote(answers), check)}
