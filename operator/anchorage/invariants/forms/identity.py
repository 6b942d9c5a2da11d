"""``identity``: a field (or the product of ``product``'s fields) equal to ``target`` (a number or a path) within
``rel_tol`` / ``abs_tol``."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from anchorage.invariants.exact import Scaled
from anchorage.invariants.expr import Mul, Pred, Term
from anchorage.invariants.forms import EXACT, Built, InvariantForm, Verdict, const, scaled_from_fraction
from anchorage.invariants.spec import Invariant


def build(inv: Invariant, xs: list[Scaled]) -> Built:
    count = len(inv.product or [inv.path])
    factors, target_value = xs[:count], (xs[count] if isinstance(inv.target, str) else const(inv.target))
    target = target_value.to_fraction()
    tol = max(
        Fraction(0) if inv.abs_tol is None else const(inv.abs_tol).to_fraction(),
        Fraction(0) if inv.rel_tol is None else const(inv.rel_tol).to_fraction() * abs(target),
    )
    lo, hi = scaled_from_fraction(target - tol), scaled_from_fraction(target + tol)
    k = max(max(f.k for f in factors), -(-max(lo.k, hi.k) // count))
    product_scale = k * count
    term: Term = Mul(tuple(f.at(k) for f in factors)) if count > 1 else factors[0].at(k)

    def claim() -> str:
        shown = " × ".join(str(f) for f in factors)
        return f"{lo} ≤ {shown} ≤ {hi} ({target_value} ± {scaled_from_fraction(tol)})"

    return Pred("WithinBand", (lo.at(product_scale), term, hi.at(product_scale))), product_scale, claim


def verdict(inv: Invariant) -> Verdict:
    """``target − tol ≤ Π factors ≤ target + tol`` with ``tol = max(abs_tol, rel_tol·|target|)``, exactly."""
    count = len(inv.product or [inv.path])
    fixed_target = None if isinstance(inv.target, str) else inv.target
    rel_tol, abs_tol = inv.rel_tol, inv.abs_tol
    multiply, add, subtract, magnitude = EXACT.multiply, EXACT.add, EXACT.subtract, EXACT.abs

    def decide(*xs: Any) -> bool:
        product = xs[0]
        for factor in xs[1:count]:
            product = multiply(product, factor)
        target = xs[count] if fixed_target is None else fixed_target
        tol = 0 if abs_tol is None else abs_tol
        if rel_tol is not None:
            tol = max(tol, multiply(rel_tol, magnitude(target)))
        return subtract(target, tol) <= product <= add(target, tol)  # type: ignore[no-any-return]

    return decide


FORM = InvariantForm("identity", build, verdict)  # its message is the reference's (the band it computes)
