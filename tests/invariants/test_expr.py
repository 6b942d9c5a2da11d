"""The obligation tree: fast evaluation equals the unfolded meaning, and the Python meaning of every
predicate is the text of its ``abbrev`` in the Lean Feasibility library."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from anchorage.invariants.expr import (
    PREDICATES,
    Both,
    Cmp,
    Either,
    Mul,
    Pred,
    Prop,
    Term,
    holds,
    holds_unfolded,
    unfold,
)

LIBRARY = Path(__file__).resolve().parents[2] / "lean" / "Feasibility" / "Basic.lean"
_OPS = {"<=": "≤", "<": "<", "=": "="}


@given(st.sampled_from(sorted(PREDICATES)), st.lists(st.integers(-10**15, 10**15), min_size=3, max_size=3))
def test_fast_evaluation_is_the_unfolded_meaning(head: str, values: list[int]) -> None:
    arity = len(PREDICATES[head][0])
    pred = Pred(head, tuple(values[:arity]))
    assert holds(pred) == holds_unfolded(pred)


def test_products_and_connectives() -> None:
    band = Pred("WithinBand", (1980000000000, Mul((1246266, 1604793)), 2020000000000))
    assert holds(band)
    assert not holds(Pred("WithinBand", (1980000000000, Mul((1406276, 1604793)), 2020000000000)))
    assert holds(Either((Cmp("=", 1, 0), Cmp("=", 1, 1))))
    assert not holds(Both((Cmp("<=", 0, 1), Cmp("<", 1, 1))))


def _text(prop: Prop, names: dict[int, str]) -> str:
    def term(t: Term) -> str:
        return names[t] if isinstance(t, int) else " * ".join(names[f] for f in t.factors)

    if isinstance(prop, Cmp):
        return f"{term(prop.lhs)} {_OPS[prop.op]} {term(prop.rhs)}"
    if isinstance(prop, Both):
        return " ∧ ".join(_text(p, names) for p in prop.parts)
    assert not isinstance(prop, Either | Pred)
    raise AssertionError(prop)


def test_python_meaning_matches_the_lean_definitions() -> None:
    source = LIBRARY.read_text(encoding="utf-8")
    lean = {m.group(1): (m.group(2).split(), m.group(3).strip())
            for m in re.finditer(r"abbrev (\w+) (?:\[[^\]]*\] )*\(([\w ]+) : α\) : Prop := (.+)", source)}
    assert set(lean) == set(PREDICATES), "every Python predicate has exactly one Lean abbrev"
    for head, (params, _) in PREDICATES.items():
        lean_params, lean_body = lean[head]
        assert lean_params == list(params), head
        symbols = {-(i + 1) * 7919: name for i, name in enumerate(params)} | {0: "0"}
        body = unfold(Pred(head, tuple(symbols)[: len(params)]))
        assert _text(body, symbols) == lean_body, head
