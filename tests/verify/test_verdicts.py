"""The verdict parser: lenient about formatting, strict about meaning (unreadable → UNCLEAR with a reason)."""

from __future__ import annotations

import pytest

from anchorage.verify.verdicts import Kind, parse_verdict

FULL = """**Verdict**: HOLE FOUND

**If HOLE FOUND**:
- Location: "hence f is uniformly continuous on ℝ"
- Pattern: #5 hypotheses of cited theorems
- Why it breaks: Heine–Cantor needs a compact domain; ℝ is not compact.
- Fixable?: yes with a restriction to [0, 1]
"""


@pytest.mark.parametrize(("reply", "kind"), [
    ("**Verdict**: HOLDS", Kind.HOLDS),
    ("Verdict: holds\nEvery step checks out.", Kind.HOLDS),
    ("## Verdict\n\n`HOLDS`", Kind.HOLDS),
    ("**Verdict:** Hole-Found\n- Location: step 2\n- Why it breaks: x", Kind.HOLE_FOUND),
    ("> **VERDICT** — HOLE_FOUND\nLocation: l\nWhy: w", Kind.HOLE_FOUND),
    ("HOLE FOUND\nLocation: the last line\nWhy it breaks: division by zero", Kind.HOLE_FOUND),
    ("**Verdict**: UNCLEAR (the notation is ambiguous)", Kind.UNCLEAR),
    ("verdict = HOLDS", Kind.HOLDS),
], ids=["bold", "plain", "heading+code", "hyphen", "quote+underscore", "bare-first-line", "unclear", "equals"])
def test_formatting_variations(reply: str, kind: Kind) -> None:
    assert parse_verdict(reply).kind is kind


def test_full_hole_report() -> None:
    verdict = parse_verdict(FULL)
    assert verdict.kind is Kind.HOLE_FOUND
    assert verdict.location == '"hence f is uniformly continuous on ℝ"'
    assert verdict.pattern == "#5 hypotheses of cited theorems"
    assert verdict.why == "Heine–Cantor needs a compact domain; ℝ is not compact."
    assert verdict.fixable is True and "restriction" in verdict.fixable_detail
    assert "Location: \"hence f" in verdict.hole_report()


@pytest.mark.parametrize(("answer", "fixable"), [("no, fundamental", False), ("No — the approach is wrong", False),
                                                 ("yes with X", True), ("Fixable by a case split", True),
                                                 ("maybe", None)])
def test_fixable_readings(answer: str, fixable: bool | None) -> None:
    reply = f"**Verdict**: HOLE FOUND\n- Location: l\n- Why it breaks: w\n- Fixable?: {answer}"
    assert parse_verdict(reply).fixable is fixable


@pytest.mark.parametrize(("reply", "reason"), [
    ("", "empty reply"),
    ("The proof looks fine to me overall.", "no 'Verdict"),
    ("**Verdict**: HOLDS | HOLE FOUND | UNCLEAR\n(template echoed)", "several verdicts"),
], ids=["empty", "no-verdict", "echoed-template"])
def test_unparseable_is_unclear_with_a_reason(reply: str, reason: str) -> None:
    verdict = parse_verdict(reply)
    assert verdict.kind is Kind.UNCLEAR and reason in verdict.reason


def test_hole_without_location_is_kept_but_noted() -> None:
    verdict = parse_verdict("**Verdict**: HOLE FOUND\nSomething is off.")
    assert verdict.kind is Kind.HOLE_FOUND and "lacks location, why" in verdict.reason
