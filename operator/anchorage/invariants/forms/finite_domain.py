"""``finite_domain``: a field equal to one of the listed ``values``."""

from __future__ import annotations

from anchorage.invariants.exact import Scaled
from anchorage.invariants.expr import Cmp, Either, Prop
from anchorage.invariants.forms import Built, Claim, InvariantForm, Verdict, const
from anchorage.invariants.spec import Invariant


def build(inv: Invariant, xs: list[Scaled]) -> Built:
    x = xs[0]
    allowed = [const(v) for v in inv.values or []]
    k = max(n.k for n in (x, *allowed))
    lx = x.at(k)
    parts = tuple(Cmp("=", lx, v.at(k)) for v in allowed)
    prop: Prop = parts[0] if len(parts) == 1 else Either(parts)
    return prop, k, lambda: f"{x} ∈ {{{', '.join(str(v) for v in allowed)}}}"


def claim(inv: Invariant) -> Claim:
    allowed = "{" + ", ".join(str(const(v)) for v in inv.values or []) + "}"
    return lambda xs: f"{xs[0]} ∈ {allowed}"


def verdict(inv: Invariant) -> Verdict:
    allowed = frozenset(inv.values or ())  # equal numbers hash alike: Decimal("1.0") in {1}
    return lambda x: x in allowed


FORM = InvariantForm("finite_domain", build, verdict, claim)
