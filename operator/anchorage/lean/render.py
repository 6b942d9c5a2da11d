"""Render obligation trees (``anchorage.invariants.expr``) as Lean 4 source.

Each checkable obligation becomes one named theorem proved ``by decide`` in core Lean 4, using the
``Feasibility`` library's definitions; skipped obligations are listed in a trailing comment as
missing evidence (never as theorems). Called by :mod:`anchorage.lean.generation`.

Decidability of large literals: ``Nat.decLe``/``Nat.decEq`` reduce through ``Nat.ble``/``Nat.beq``
and ``Nat.mul``, which the Lean kernel evaluates with GMP arithmetic, so 10¹²-scaled products are
cheap; ``Int`` comparisons reduce to the same ``Nat`` operations.
"""

from __future__ import annotations

from dataclasses import dataclass

from anchorage.invariants.expr import Both, Cmp, Either, Mul, Obligation, Pred, Prop, Term

_OPS = {"<=": "≤", "<": "<", "=": "="}


def render_term(term: Term, atom: bool = True) -> str:
    """A literal or a product; ``atom`` parenthesises what is not a single token."""
    if isinstance(term, int):
        return f"({term})" if atom and term < 0 else str(term)
    assert isinstance(term, Mul)
    inner = " * ".join(f"({f})" if f < 0 else str(f) for f in term.factors)
    return f"({inner})" if atom else inner


def render_prop(prop: Prop, lean_type: str) -> str:
    """The Lean proposition of an obligation tree over ``Nat`` or ``Int``."""
    if isinstance(prop, Cmp):
        lhs = render_term(prop.lhs, atom=False)
        return f"({lhs} : {lean_type}) {_OPS[prop.op]} {render_term(prop.rhs)}"
    if isinstance(prop, Both | Either):
        joiner = " ∧ " if isinstance(prop, Both) else " ∨ "
        return joiner.join(f"({render_prop(part, lean_type)})" for part in prop.parts)
    assert isinstance(prop, Pred)
    args = " ".join(render_term(arg) for arg in prop.args)
    return f"Feasibility.{prop.head} (α := {lean_type}) {args}"


def _doc(ob: Obligation) -> str:
    paths = ", ".join(f"`{p}`" for p in ob.paths)
    text = f"{ob.form} · {paths}: {ob.claim} (decimals scaled by 10^{ob.scale})"
    if ob.source:
        text += f". Source: {ob.source}"
    return comment_safe(text)


def comment_safe(text: str) -> str:
    """Text that cannot open or close a Lean block comment (Lean's block comments nest)."""
    return text.replace("-/", "- /").replace("/-", "/ -")


@dataclass(frozen=True)
class RenderedTheorem:
    obligation: Obligation
    full_name: str
    first_line: int      # 1-based line of the doc comment
    last_line: int       # 1-based line of ``:= by decide``


def render_module(namespace: str, obligations: list[Obligation], header: str) -> tuple[str, list[RenderedTheorem]]:
    """The text of one Lean module and where each theorem sits in it."""
    lines = ["import Feasibility", "", "/-!", *comment_safe(header).splitlines(), "-/", "", f"namespace {namespace}", ""]
    placed: list[RenderedTheorem] = []
    for ob in obligations:
        if ob.prop is None:
            continue
        first = len(lines) + 1
        lines.append(f"/-- {_doc(ob)} -/")
        lines.append(f"theorem {ob.name} :")
        lines.append(f"    {render_prop(ob.prop, ob.lean_type)} := by decide")
        placed.append(RenderedTheorem(ob, f"{namespace}.{ob.name}", first, len(lines)))
        lines.append("")
    lines += [f"end {namespace}", ""]
    skipped = [ob for ob in obligations if ob.prop is None]
    if skipped:
        lines += ["/-! ## Skipped obligations: missing evidence, NOT proved", ""]
        for ob in skipped:
            lines.append(comment_safe(f"* `{namespace}.{ob.name}` ({', '.join(ob.paths)}): {ob.reason}"))
        lines += ["-/", ""]
    return "\n".join(lines), placed
