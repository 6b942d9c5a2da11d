"""The invariant forms: one module each, declaring its ``FORM`` (:class:`InvariantForm`) — how the form's claim is
built as an obligation for both checkers (:mod:`anchorage.invariants.compiler`: the exact reference and Lean), how
the gates' fast path decides it (:mod:`anchorage.invariants.gates`) and how its message reads.

The shape of each form's fields (which fields it needs, which paths it reads) is the invariants file's model's
(:mod:`anchorage.invariants.spec`, below this package). Adding a form: its fields in ``spec.py``, a module here, and
a mutation that only it rejects (:mod:`anchorage.lean.discrimination`) — docs/architecture.md, "Add an invariant
form".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, Inexact, InvalidOperation, Rounded
from fractions import Fraction
from typing import Any

from anchorage.invariants.exact import Scaled, pow10, to_scaled
from anchorage.invariants.expr import Prop
from anchorage.invariants.spec import Invariant
from anchorage.registry import by_name, declared

Built = tuple[Prop, int, Callable[[], str]]
"""A form's obligation: the proposition over scaled integer literals, its scale, and the claim's text (lazily)."""
Verdict = Callable[..., bool]
"""The gates' exact comparison of the numbers read (one per path the form reads, in order)."""
Claim = Callable[[list[str]], str]
"""The claim's text over the decimals read, as the reference's :data:`Built` claim writes it."""

EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[Inexact, Rounded, InvalidOperation])
"""Decimal arithmetic without rounding (a rounding would raise, and the reference evaluation decides)."""


@dataclass(frozen=True)
class InvariantForm:
    """One invariant form (``form:`` in invariants.yaml)."""

    name: str
    #: The obligation of one expanded field from its exact values (the reference and Lean's source).
    build: Callable[[Invariant, list[Scaled]], Built]
    #: The gates' fast comparison for an invariant of this form.
    verdict: Callable[[Invariant], Verdict]
    #: The claim's text for the gates' messages; None: the gates ask the reference (:attr:`build`) for it.
    claim: Callable[[Invariant], Claim] | None = None


_CONSTANTS: dict[int | Decimal, Scaled] = {}


def const(number: Any) -> Scaled:
    """A bound from the invariants file as a scaled integer (memoised: bounds repeat)."""
    cached = _CONSTANTS.get(number)
    if cached is None:
        scaled = to_scaled(number)
        assert scaled is not None, "bounds are validated as finite numbers"
        cached = _CONSTANTS[number] = scaled
    return cached


def lits(scale: int, *numbers: Scaled) -> list[int]:
    """The numbers as integer literals at ``scale``."""
    return [n.n * pow10(scale - n.k) for n in numbers]


def scaled_from_fraction(value: Fraction) -> Scaled:
    """A terminating decimal fraction as a scaled integer (ValueError otherwise)."""
    k = 0
    while (value * 10**k).denominator != 1:
        k += 1
        if k > 400:
            raise ValueError(f"{value} is not a terminating decimal")
    return Scaled(int(value * 10**k), k)


#: Every form, by name: what this package's modules declare as ``FORM`` (:mod:`anchorage.registry`).
FORMS: dict[str, InvariantForm] = by_name(declared(__name__, __path__, "FORM", InvariantForm), "invariant form")
