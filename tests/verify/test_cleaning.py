"""Cleaning of solver output on realistic samples: keep Method/Proof/Answer, drop thinking and exploration."""

from __future__ import annotations

import pytest

from anchorage.verify.cleaning import CleanedSolution, clean_solution

CODEX_STYLE = """\
<think>
We need sqrt(2) irrational. Standard: assume p/q in lowest terms. Let me make sure about parity lemma:
if p^2 even then p even since odd^2 is odd. Good.
</think>
**Verdict**: complete solution
**Rounds**: 1
**Method**: Infinite descent on a reduced fraction, using that a square is even only if its root is.
**Detailed Solution**:
Suppose, for contradiction, that √2 = p/q with integers p, q > 0 and gcd(p, q) = 1.

Hmm, should I use the fundamental theorem of arithmetic instead? Parity is enough.

Then p² = 2q², so p² is even. Since the square of an odd number is odd, p is even; write p = 2r.
Then 4r² = 2q², i.e. q² = 2r², so q is even as well. This contradicts gcd(p, q) = 1.
**Answer**: √2 is irrational.
**Self-verification notes**: checked the parity lemma separately.
"""

RAMBLING = """\
## Method
Pigeonhole on residues mod n.

## Proof
Let me try a direct construction first. Take the numbers 1, ..., n+1. Actually wait, that only works
for consecutive integers. Scrap that, this approach fails for arbitrary sets.

Consider the n + 1 given integers a_1, …, a_{n+1}. Their residues modulo n take at most n values, so
by the pigeonhole principle two of them, a_i and a_j with i ≠ j, are congruent mod n.
Oops, I need i < j. Without loss of generality i < j. Then n divides a_j − a_i.

## Answer
Two of the numbers differ by a multiple of n.
"""

UNSECTIONED = """<thinking>scratch: 2+2</thinking>
Hmm. OK so the claim: the product of two odd numbers is odd.
Write a = 2m + 1 and b = 2k + 1. Then ab = 4mk + 2m + 2k + 1 = 2(2mk + m + k) + 1, which is odd.
"""

UNCLOSED = """<think>
Lots of exploration that never closes the tag... Let me try n = 4.

**Proof**: For n ≥ 1, n² ≥ n since n ≥ 1 implies n·n ≥ 1·n.
**Answer**: n² ≥ n.
"""

REVISED_WITH_GAP = """\
**Method**: Telescoping.

**Proof**:
We have 1/(k(k+1)) = 1/k − 1/(k+1). [GAP: justify the interchange of the limit and the sum for n → ∞]
$$\\sum_{k=1}^{n} \\frac{1}{k(k+1)} = 1 - \\frac{1}{n+1}.$$
Wait — this holds for each finite n, which is all we need.

**Answer**: 1 − 1/(n+1).
"""


def test_codex_style_output_keeps_only_method_proof_answer() -> None:
    cleaned = clean_solution(CODEX_STYLE)
    assert cleaned.sectioned
    assert cleaned.method.startswith("Infinite descent")
    assert "p² = 2q²" in cleaned.proof and "contradicts gcd(p, q) = 1" in cleaned.proof
    assert cleaned.answer == "√2 is irrational."
    for gone in ("We need sqrt(2)", "parity lemma", "Hmm", "complete solution", "Rounds", "checked the parity"):
        assert gone not in cleaned.text
    reasons = {r.reason for r in cleaned.removed}
    assert {"thinking block", "exploratory prose", "process section (verdict/rounds/self-verification)"} <= reasons


def test_false_starts_and_exploratory_sentences_are_removed() -> None:
    cleaned = clean_solution(RAMBLING)
    assert "Let me try" not in cleaned.text and "Actually wait" not in cleaned.text
    assert "Scrap that" not in cleaned.text and "1, ..., n+1" not in cleaned.text     # the false-start paragraph
    assert "Oops" not in cleaned.text
    assert "by the pigeonhole principle two of them" in cleaned.proof
    assert "Without loss of generality i < j. Then n divides a_j − a_i." in cleaned.proof
    assert cleaned.method == "Pigeonhole on residues mod n."
    assert any(r.reason == "false start" for r in cleaned.removed)


def test_output_without_headings_is_kept_as_the_proof() -> None:
    cleaned = clean_solution(UNSECTIONED)
    assert not cleaned.sectioned and cleaned.method == "" and cleaned.answer == ""
    assert cleaned.proof.startswith("Write a = 2m + 1") and "2(2mk + m + k) + 1" in cleaned.proof
    assert "OK so" not in cleaned.text
    assert "scratch" not in cleaned.text and "Hmm" not in cleaned.text


def test_unclosed_thinking_tag_is_cut_at_the_first_section() -> None:
    cleaned = clean_solution(UNCLOSED)
    assert "exploration" not in cleaned.text and "n = 4" not in cleaned.text
    assert cleaned.proof.startswith("For n ≥ 1") and cleaned.answer == "n² ≥ n."


def test_gap_markers_and_display_math_survive() -> None:
    cleaned = clean_solution(REVISED_WITH_GAP)
    assert cleaned.gaps == ["justify the interchange of the limit and the sum for n → ∞"]
    assert "$$\\sum_{k=1}^{n} \\frac{1}{k(k+1)} = 1 - \\frac{1}{n+1}.$$" in cleaned.proof
    assert "Wait" not in cleaned.text


def test_digest_names_the_exact_text() -> None:
    assert clean_solution(CODEX_STYLE).digest == clean_solution(CODEX_STYLE).digest
    assert clean_solution(CODEX_STYLE).digest != clean_solution(RAMBLING).digest


def test_a_cleaned_solution_cannot_be_built_by_hand() -> None:
    with pytest.raises(TypeError, match="clean_solution"):
        CleanedSolution("m", "raw trace smuggled in", "a", True)


R1_TEMPLATE_STYLE = """Okay, the problem asks for the maximum. Let me consider f'(x) = 0 ... so x = 2.
Wait, check the endpoints too. f(0) = 1, f(3) = 4. Hmm, f(2) = 5 is larger.
</think>

**Proof.** On [0, 3], f is continuous, so it attains a maximum at a critical point or an endpoint.
The only critical point is x = 2 with f(2) = 5, while f(0) = 1 and f(3) = 4.

**Answer.** The maximum is 5, attained at x = 2.
"""


def test_orphan_closing_tag_and_period_headings() -> None:
    cleaned = clean_solution(R1_TEMPLATE_STYLE)
    assert cleaned.sectioned and "Okay" not in cleaned.text and "endpoints too" not in cleaned.text
    assert cleaned.proof.startswith("On [0, 3], f is continuous")
    assert cleaned.answer == "The maximum is 5, attained at x = 2."
    assert cleaned.removed[0].reason == "thinking before an orphan closing tag"
