"""The obligation expression tree: one source of truth for both checkers.

An :class:`Obligation` holds a proposition over *integer literals* (decimals already scaled to a
common power of ten by ``anchorage.invariants.compiler``). The same tree is evaluated exactly in
Python here (:func:`holds`) and rendered to Lean 4 by ``anchorage.lean.render``, so the two checkers
cannot disagree about what is claimed. The named predicates (:data:`PREDICATES`) mirror the
``abbrev`` definitions of the ``Feasibility`` Lean library (``lean/Feasibility/Basic.lean``); a test
compares the two texts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from anchorage.invariants.exact import Scaled

CmpOp = Literal["<=", "<", "="]


@dataclass(slots=True)
class Mul:
    """A product of integer literals (each at the factor scale; the product at the sum of scales)."""

    factors: tuple[int, ...]


Term = int | Mul  # an integer literal (a decimal scaled by 10**scale of its obligation) or a product


@dataclass(slots=True)
class Cmp:
    op: CmpOp
    lhs: Term
    rhs: Term


@dataclass(slots=True)
class Both:
    """Conjunction (Lean ``∧``)."""

    parts: tuple[Prop, ...]


@dataclass(slots=True)
class Either:
    """Disjunction (Lean ``∨``)."""

    parts: tuple[Prop, ...]


@dataclass(slots=True)
class Pred:
    """A named predicate of the Feasibility library applied to terms."""

    head: str
    args: tuple[Term, ...]


Prop = Cmp | Both | Either | Pred

ZERO = 0


def _in_range(a: tuple[Term, ...]) -> Prop:
    return Both((Cmp("<=", a[0], a[1]), Cmp("<=", a[1], a[2])))


# head -> (parameter names, unfolding). The Lean library defines each as
# ``abbrev <head> {α : Type} [LE α] [LT α] [OfNat α 0] (<params> : α) : Prop := <body>``.
PREDICATES: dict[str, tuple[tuple[str, ...], Callable[[tuple[Term, ...]], Prop]]] = {
    "InRange": (("lo", "x", "hi"), _in_range),
    "AtLeast": (("lo", "x"), lambda a: Cmp("<=", a[0], a[1])),
    "AtMost": (("x", "hi"), lambda a: Cmp("<=", a[0], a[1])),
    "Ordered": (("x", "y"), lambda a: Cmp("<=", a[0], a[1])),
    "StrictlyOrdered": (("x", "y"), lambda a: Cmp("<", a[0], a[1])),
    "Pos": (("x",), lambda a: Cmp("<", ZERO, a[0])),
    "NonNeg": (("x",), lambda a: Cmp("<=", ZERO, a[0])),
    "WithinBand": (("lo", "v", "hi"), _in_range),
    "WellFormed": (("lo", "hi"), lambda a: Cmp("<=", a[0], a[1])),
}


def unfold(pred: Pred) -> Prop:
    params, body = PREDICATES[pred.head]
    if len(pred.args) != len(params):
        raise ValueError(f"{pred.head} takes {len(params)} arguments, got {len(pred.args)}")
    return body(pred.args)


def value(term: Term) -> int:
    if type(term) is int:
        return term
    assert isinstance(term, Mul)
    product = 1
    for factor in term.factors:
        product *= factor
    return product


# Direct evaluation of each predicate over its argument values: the same meaning as unfolding it
# (a property test checks the two agree), without building the unfolded tree on every call.
_FAST: dict[str, Callable[..., bool]] = {
    "InRange": lambda lo, x, hi: lo <= x <= hi,
    "AtLeast": lambda lo, x: lo <= x,
    "AtMost": lambda x, hi: x <= hi,
    "Ordered": lambda x, y: x <= y,
    "StrictlyOrdered": lambda x, y: x < y,
    "Pos": lambda x: x > 0,
    "NonNeg": lambda x: x >= 0,
    "WithinBand": lambda lo, v, hi: lo <= v <= hi,
    "WellFormed": lambda lo, hi: lo <= hi,
}


def holds(prop: Prop) -> bool:
    """Exact evaluation of the proposition (integers only)."""
    if type(prop) is Pred:
        return _FAST[prop.head](*[a if type(a) is int else value(a) for a in prop.args])
    return holds_unfolded(prop)


def holds_unfolded(prop: Prop) -> bool:
    """Evaluation by unfolding every predicate to comparisons (the reference semantics)."""
    if isinstance(prop, Cmp):
        left, right = value(prop.lhs), value(prop.rhs)
        if prop.op == "<=":
            return left <= right
        if prop.op == "<":
            return left < right
        return left == right
    if isinstance(prop, Both):
        return all(holds_unfolded(part) for part in prop.parts)
    if isinstance(prop, Either):
        return any(holds_unfolded(part) for part in prop.parts)
    return holds_unfolded(unfold(prop))


def literals(prop: Prop) -> list[int]:
    """Every integer literal in the proposition (to choose Nat or Int)."""
    if isinstance(prop, Cmp):
        return [*_term_literals(prop.lhs), *_term_literals(prop.rhs)]
    if isinstance(prop, Both | Either):
        return [lit for part in prop.parts for lit in literals(part)]
    return [lit for arg in prop.args for lit in _term_literals(arg)]


def _term_literals(term: Term) -> tuple[int, ...]:
    return (term,) if isinstance(term, int) else term.factors


@dataclass(slots=True)
class Obligation:
    """One checkable claim about one field of an artifact (or a skipped one: ``prop is None``)."""

    name: str                       # theorem name inside the task namespace: <field>_<form>
    invariant: str                  # the invariant (YAML ``name``) it comes from
    form: str
    paths: tuple[str, ...]          # concrete JSON paths read
    prop: Prop | None               # None = skipped (missing evidence)
    scale: int = 0                  # compared quantities are multiplied by 10**scale
    severity: Literal["hard", "warning"] = "hard"
    reason: str = ""                # why it was skipped
    source: str = ""
    numbers: tuple[Scaled, ...] = ()  # the exact values read, one per path
    describe: Callable[[], str] | None = None  # the claim in decimals, built only when shown

    @property
    def claim(self) -> str:
        return self.describe() if self.describe is not None else ""

    @property
    def values(self) -> dict[str, str]:
        return {path: str(number) for path, number in zip(self.paths, self.numbers, strict=False)}

    @property
    def skipped(self) -> bool:
        return self.prop is None

    @property
    def lean_type(self) -> str:
        """``Nat`` when every literal is non-negative, else ``Int``."""
        if self.prop is None:
            return "Nat"
        return "Nat" if all(lit >= 0 for lit in literals(self.prop)) else "Int"

    def holds(self) -> bool:
        if self.prop is None:
            raise ValueError(f"obligation {self.name} was skipped: {self.reason}")
        return holds(self.prop)
