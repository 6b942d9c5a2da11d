"""Properties over generated solver outputs: cleaning never fails, is idempotent, never leaks thinking."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from anchorage.verify.cleaning import clean_solution
from anchorage.verify.verdicts import Kind, parse_verdict

FRAGMENTS = [
    "**Method**: induction.", "## Proof", "**Detailed Solution**:", "**Answer**: 42", "Answer: n^2",
    "<think>SECRET plan</think>", "<thinking>\nSECRET\n</thinking>", "Let me try SECRET small cases.",
    "Actually wait, SECRET.", "Hmm, SECRET.", "This doesn't work, SECRET.", "$$a^2 + b^2 = c^2$$",
    "Hence the claim holds.", "[GAP: bound the tail]", "", "**Verdict**: complete solution",
    "Suppose x > 0. Then x^2 > 0.", "\\[ \\sum_k k = n(n+1)/2 \\]", "**Self-verification notes**: SECRET",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=14), st.sampled_from(["\n", "\n\n"]))
def test_cleaning_is_total_idempotent_and_leak_free(parts: list[str], joiner: str) -> None:
    cleaned = clean_solution(joiner.join(parts))
    assert "SECRET" not in cleaned.text
    again = clean_solution(cleaned.text)
    assert again.text == cleaned.text
    assert cleaned.gaps == again.gaps


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_verdict_parser_is_total(reply: str) -> None:
    verdict = parse_verdict(reply)
    assert verdict.kind in set(Kind)
    if verdict.kind is Kind.UNCLEAR:
        assert verdict.reason
