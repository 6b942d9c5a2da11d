"""``sign``: a field positive (``op: >``) or non-negative (``op: >=``)."""

from __future__ import annotations

from anchorage.invariants.exact import Scaled
from anchorage.invariants.expr import Pred
from anchorage.invariants.forms import Built, Claim, InvariantForm, Verdict
from anchorage.invariants.spec import Invariant


def build(inv: Invariant, xs: list[Scaled]) -> Built:
    x = xs[0]
    if inv.op == ">":
        return Pred("Pos", (x.n,)), x.k, lambda: f"0 < {x}"
    return Pred("NonNeg", (x.n,)), x.k, lambda: f"0 ≤ {x}"


def claim(inv: Invariant) -> Claim:
    op = "<" if inv.op == ">" else "≤"
    return lambda xs: f"0 {op} {xs[0]}"


def verdict(inv: Invariant) -> Verdict:
    if inv.op == ">":
        return lambda x: x > 0
    return lambda x: x >= 0


FORM = InvariantForm("sign", build, verdict, claim)
