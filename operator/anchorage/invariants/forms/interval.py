"""``interval``: an interval's two end fields well formed (``lo`` ≤ ``hi``, both paths)."""

from __future__ import annotations

from anchorage.invariants.exact import Scaled
from anchorage.invariants.expr import Pred
from anchorage.invariants.forms import Built, Claim, InvariantForm, Verdict, lits
from anchorage.invariants.spec import Invariant


def build(inv: Invariant, xs: list[Scaled]) -> Built:
    k = max(xs[0].k, xs[1].k)
    return Pred("WellFormed", tuple(lits(k, xs[0], xs[1]))), k, lambda: f"{xs[0]} ≤ {xs[1]}"


def claim(inv: Invariant) -> Claim:
    return lambda xs: f"{xs[0]} ≤ {xs[1]}"


def verdict(inv: Invariant) -> Verdict:
    return lambda x, y: x <= y


FORM = InvariantForm("interval", build, verdict, claim)
