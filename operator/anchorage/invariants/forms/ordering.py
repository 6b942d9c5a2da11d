"""``ordering``: one field at most (``op: <=``) or below (``op: <``) another."""

from __future__ import annotations

from anchorage.invariants.exact import Scaled
from anchorage.invariants.expr import Pred
from anchorage.invariants.forms import Built, Claim, InvariantForm, Verdict, lits
from anchorage.invariants.spec import Invariant


def build(inv: Invariant, xs: list[Scaled]) -> Built:
    k = max(xs[0].k, xs[1].k)
    strict = inv.op == "<"
    head = "StrictlyOrdered" if strict else "Ordered"
    return Pred(head, tuple(lits(k, xs[0], xs[1]))), k, lambda: f"{xs[0]} {'<' if strict else '≤'} {xs[1]}"


def claim(inv: Invariant) -> Claim:
    op = "<" if inv.op == "<" else "≤"
    return lambda xs: f"{xs[0]} {op} {xs[1]}"


def verdict(inv: Invariant) -> Verdict:
    if inv.op == "<":
        return lambda x, y: x < y
    return lambda x, y: x <= y


FORM = InvariantForm("ordering", build, verdict, claim)
