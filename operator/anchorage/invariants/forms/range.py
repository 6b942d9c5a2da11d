"""``range``: a field within constant bounds (``lo`` and/or ``hi``)."""

from __future__ import annotations

from anchorage.invariants.exact import Scaled, pow10
from anchorage.invariants.expr import Pred
from anchorage.invariants.forms import Built, Claim, InvariantForm, Verdict, const, lits
from anchorage.invariants.spec import Invariant


def build(inv: Invariant, xs: list[Scaled]) -> Built:
    x = xs[0]
    lo = None if inv.lo is None else const(inv.lo)
    hi = None if inv.hi is None else const(inv.hi)
    k = x.k
    if lo is not None and lo.k > k:
        k = lo.k
    if hi is not None and hi.k > k:
        k = hi.k
    if lo is not None and hi is not None:
        return Pred("InRange", (lo.n * pow10(k - lo.k), x.n * pow10(k - x.k), hi.n * pow10(k - hi.k))), k, \
            lambda: f"{lo} ≤ {x} ≤ {hi}"
    if lo is not None:
        return Pred("AtLeast", tuple(lits(k, lo, x))), k, lambda: f"{lo} ≤ {x}"
    assert hi is not None
    return Pred("AtMost", tuple(lits(k, x, hi))), k, lambda: f"{x} ≤ {hi}"


def claim(inv: Invariant) -> Claim:
    lo = None if inv.lo is None else str(const(inv.lo))
    hi = None if inv.hi is None else str(const(inv.hi))
    if lo is not None and hi is not None:
        return lambda xs: f"{lo} ≤ {xs[0]} ≤ {hi}"
    if lo is not None:
        return lambda xs: f"{lo} ≤ {xs[0]}"
    return lambda xs: f"{xs[0]} ≤ {hi}"


def verdict(inv: Invariant) -> Verdict:
    lo, hi = inv.lo, inv.hi
    if lo is not None and hi is not None:
        return lambda x: lo <= x <= hi
    if lo is not None:
        return lambda x: lo <= x
    return lambda x: x <= hi


FORM = InvariantForm("range", build, verdict, claim)
