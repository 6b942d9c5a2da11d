"""Compile declared invariants into obligation generators (closures), once per file.

``compile_file(spec)`` turns each :class:`~anchorage.invariants.spec.Invariant` into a function
``data -> list[Obligation]``: it resolves the JSON paths (``[*]`` expands, and several paths of one
invariant expand *together*, position by position), reads every number exactly, scales all numbers
of one obligation to a common power of ten, and builds the proposition tree of
:mod:`anchorage.invariants.expr`. Missing fields, non-numbers and empty expansions give *skipped*
obligations (missing evidence). Used by :mod:`anchorage.invariants.gates` and :mod:`anchorage.lean`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

from anchorage.invariants.exact import (
    MISSING,
    WILDCARD,
    Scaled,
    Segment,
    _step,
    format_path,
    parse_path,
    pow10,
    resolve,
    to_scaled,
)
from anchorage.invariants.expr import Cmp, Either, Mul, Obligation, Pred, Prop, Term
from anchorage.invariants.spec import Invariant, InvariantsFile

Generator = Callable[[Any], list[Obligation]]


def scaled_from_fraction(value: Fraction) -> Scaled:
    """A terminating decimal fraction as a scaled integer (ValueError otherwise)."""
    k = 0
    while (value * 10**k).denominator != 1:
        k += 1
        if k > 400:
            raise ValueError(f"{value} is not a terminating decimal")
    return Scaled(int(value * 10**k), k)


_CONSTANTS: dict[int | Decimal, Scaled] = {}


def _const(number: int | Decimal) -> Scaled:
    """A bound from the invariants file as a scaled integer (memoised: bounds repeat)."""
    cached = _CONSTANTS.get(number)
    if cached is None:
        scaled = to_scaled(number)
        assert scaled is not None, "bounds are validated as finite numbers"
        cached = _CONSTANTS[number] = scaled
    return cached


# ---------------------------------------------------------------------------------------------
# Expansion of path patterns (zipped over the first pattern's wildcards)

Binding = list[tuple[str, Any]]  # (concrete path, raw value) per pattern


def _substitute(pattern: tuple[Segment, ...], bindings: Sequence[Segment]) -> tuple[Segment, ...]:
    fills = iter(bindings)
    return tuple(next(fills, WILDCARD) if seg == WILDCARD else seg for seg in pattern)


def _lookup(data: Any, segments: tuple[Segment, ...]) -> Any:
    node = data
    for segment in segments:
        if segment == WILDCARD:
            return MISSING
        node = _step(node, segment)
    return node


def _expand(data: Any, patterns: list[tuple[Segment, ...]]) -> list[Binding] | None:
    """One binding per expansion of the first pattern; None when a wildcard ran over nothing."""
    first = patterns[0]
    wild = [i for i, seg in enumerate(first) if seg == WILDCARD]
    if not wild:
        return [[(format_path(p), _lookup(data, p)) for p in patterns]]
    entries = resolve(data, first)
    if not entries:
        return None
    out: list[Binding] = []
    for concrete, raw in entries:
        if WILDCARD in concrete:  # the wildcard's parent is not a container
            out.append([(format_path(first), MISSING), *[(format_path(p), MISSING) for p in patterns[1:]]])
            continue
        fills = [concrete[i] for i in wild]
        rest = [_substitute(p, fills) for p in patterns[1:]]
        out.append([(format_path(concrete), raw), *[(format_path(p), _lookup(data, p)) for p in rest]])
    return out


# ---------------------------------------------------------------------------------------------
# Per-form builders: (invariant, exact values) -> (proposition, scale, claim)

Built = tuple[Prop, int, Callable[[], str]]


def _lits(scale: int, *numbers: Scaled) -> list[int]:
    return [n.n * pow10(scale - n.k) for n in numbers]


def _build_range(inv: Invariant, xs: list[Scaled]) -> Built:
    x = xs[0]
    lo = None if inv.lo is None else _const(inv.lo)  # type: ignore[arg-type]
    hi = None if inv.hi is None else _const(inv.hi)  # type: ignore[arg-type]
    k = x.k
    if lo is not None and lo.k > k:
        k = lo.k
    if hi is not None and hi.k > k:
        k = hi.k
    if lo is not None and hi is not None:
        return Pred("InRange", (lo.n * pow10(k - lo.k), x.n * pow10(k - x.k), hi.n * pow10(k - hi.k))), k, \
            lambda: f"{lo} ≤ {x} ≤ {hi}"
    if lo is not None:
        return Pred("AtLeast", tuple(_lits(k, lo, x))), k, lambda: f"{lo} ≤ {x}"
    assert hi is not None
    return Pred("AtMost", tuple(_lits(k, x, hi))), k, lambda: f"{x} ≤ {hi}"


def _build_ordering(inv: Invariant, xs: list[Scaled]) -> Built:
    k = max(xs[0].k, xs[1].k)
    strict = inv.op == "<"
    head = "StrictlyOrdered" if strict else "Ordered"
    return Pred(head, tuple(_lits(k, xs[0], xs[1]))), k, lambda: f"{xs[0]} {'<' if strict else '≤'} {xs[1]}"


def _build_sign(inv: Invariant, xs: list[Scaled]) -> Built:
    x = xs[0]
    if inv.op == ">":
        return Pred("Pos", (x.n,)), x.k, lambda: f"0 < {x}"
    return Pred("NonNeg", (x.n,)), x.k, lambda: f"0 ≤ {x}"


def _build_interval(inv: Invariant, xs: list[Scaled]) -> Built:
    k = max(xs[0].k, xs[1].k)
    return Pred("WellFormed", tuple(_lits(k, xs[0], xs[1]))), k, lambda: f"{xs[0]} ≤ {xs[1]}"


def _build_finite_domain(inv: Invariant, xs: list[Scaled]) -> Built:
    x = xs[0]
    allowed = [_const(v) for v in inv.values or []]
    k = max(n.k for n in (x, *allowed))
    lx = x.at(k)
    parts = tuple(Cmp("=", lx, v.at(k)) for v in allowed)
    prop: Prop = parts[0] if len(parts) == 1 else Either(parts)
    return prop, k, lambda: f"{x} ∈ {{{', '.join(str(v) for v in allowed)}}}"


def _build_identity(inv: Invariant, xs: list[Scaled]) -> Built:
    count = len(inv.product or [inv.path])
    factors, target_value = xs[:count], (xs[count] if isinstance(inv.target, str) else _const(inv.target))  # type: ignore[arg-type]
    target = target_value.to_fraction()
    tol = max(
        Fraction(0) if inv.abs_tol is None else _const(inv.abs_tol).to_fraction(),
        Fraction(0) if inv.rel_tol is None else _const(inv.rel_tol).to_fraction() * abs(target),
    )
    lo, hi = scaled_from_fraction(target - tol), scaled_from_fraction(target + tol)
    k = max(max(f.k for f in factors), -(-max(lo.k, hi.k) // count))
    product_scale = k * count
    term: Term = Mul(tuple(f.at(k) for f in factors)) if count > 1 else factors[0].at(k)
    def claim() -> str:
        shown = " × ".join(str(f) for f in factors)
        return f"{lo} ≤ {shown} ≤ {hi} ({target_value} ± {scaled_from_fraction(tol)})"

    return Pred("WithinBand", (lo.at(product_scale), term, hi.at(product_scale))), product_scale, claim


_BUILDERS: dict[str, Callable[[Invariant, list[Scaled]], Built]] = {
    "range": _build_range,
    "ordering": _build_ordering,
    "sign": _build_sign,
    "interval": _build_interval,
    "finite_domain": _build_finite_domain,
    "identity": _build_identity,
}


# ---------------------------------------------------------------------------------------------


def _show(raw: Any) -> str:
    text = repr(raw)
    return text if len(text) <= 40 else text[:37] + "..."


class _Pattern:
    """A compiled path pattern with at most one ``[*]``: direct lookups, path text built once per key."""

    __slots__ = ("_texts", "head", "head_text", "segments", "tail", "tail_text", "text", "wild")

    def __init__(self, segments: tuple[Segment, ...]) -> None:
        self.segments = segments
        self.text = format_path(segments)
        self.wild = WILDCARD in segments
        cut = segments.index(WILDCARD) if self.wild else len(segments)
        self.head, self.tail = segments[:cut], segments[cut + 1:]
        self.head_text = format_path(self.head) if self.head else ""
        self.tail_text = "".join(f"[{seg}]" if isinstance(seg, int) else f".{seg}" for seg in self.tail)
        self._texts: dict[Segment, str] = {}

    def element_path(self, key: Segment) -> str:
        """The concrete path of one element (memoised: tasks' artifacts share their shape)."""
        text = self._texts.get(key)
        if text is None:
            if isinstance(key, int):
                text = f"{self.head_text}[{key}]{self.tail_text}"
            else:
                text = f"{self.head_text}.{key}{self.tail_text}" if self.head_text else f"{key}{self.tail_text}"
            if len(self._texts) < 10_000:
                self._texts[key] = text
        return text


def _get(node: Any, segments: tuple[Segment, ...]) -> Any:
    """The value at concrete segments, or MISSING (fast path for plain dicts and lists)."""
    for segment in segments:
        kind = type(node)
        if kind is dict:
            node = node.get(segment, MISSING) if type(segment) is str else MISSING
        elif kind is list:
            if type(segment) is not int or not -len(node) <= segment < len(node):
                return MISSING
            node = node[segment]
        else:
            node = _step(node, segment)
        if node is MISSING:
            return MISSING
    return node


def _element(container: Any, key: Segment) -> Any:
    if type(container) is list and type(key) is int:
        return container[key] if key < len(container) else MISSING
    if isinstance(container, dict) and type(key) is str:
        return container.get(key, MISSING)
    return MISSING


class _Names:
    """Theorem names ``<name>_<i>_<form>`` by index, built once."""

    __slots__ = ("_names", "form", "name")

    def __init__(self, inv: Invariant) -> None:
        self.name, self.form = inv.name, inv.form
        self._names: list[str] = []

    def __getitem__(self, index: int) -> str:
        names = self._names
        while len(names) <= index:
            names.append(f"{self.name}_{len(names)}_{self.form}")
        return names[index]


Item = tuple[str, tuple[str, ...], list[Any] | None]
"""One expanded field of an invariant: (theorem name, concrete paths, raw values; None = empty scenario)."""
Expander = Callable[[Any], list[Item]]
EMPTY_SCENARIO = "empty scenario: the list or map has no elements"


def compile_expansion(inv: Invariant) -> Expander:
    """The path expansion of one invariant: ``data -> [(name, paths, raw values)]`` (shared by checkers)."""
    segments = [parse_path(p) for p in inv.read_paths()]
    patterns = [_Pattern(s) for s in segments]
    simple = all(s.count(WILDCARD) <= 1 for s in segments) and (patterns[0].wild or not any(p.wild for p in patterns))
    plain_name = f"{inv.name}_{inv.form}"
    names = _Names(inv)
    texts = tuple(p.text for p in patterns)
    first, rest = patterns[0], patterns[1:]

    def expand(data: Any) -> list[Item]:
        if not simple:
            return _expand_general(inv, segments, data)
        if not first.wild:
            return [(plain_name, texts, [_get(data, p.segments) for p in patterns])]
        container = _get(data, first.head)
        if type(container) is list:
            keys: Any = range(len(container))
        elif isinstance(container, dict):
            keys = list(container)
        else:
            return [(plain_name, texts, [MISSING] * len(patterns))]
        if not keys:
            return [(plain_name, texts, None)]
        tail, element_path = first.tail, first.element_path
        if not rest:
            return [(names[index], (element_path(key),), [_get(_element(container, key), tail)])
                    for index, key in enumerate(keys)]
        others = [(p, _get(data, p.head) if p.wild else _get(data, p.segments)) for p in rest]
        out: list[Item] = []
        for index, key in enumerate(keys):
            paths_list = [element_path(key)]
            raws = [_get(_element(container, key), tail)]
            for pattern, base in others:
                if pattern.wild:
                    paths_list.append(pattern.element_path(key))
                    raws.append(_get(_element(base, key), pattern.tail))
                else:
                    paths_list.append(pattern.text)
                    raws.append(base)
            out.append((names[index], tuple(paths_list), raws))
        return out

    return expand


def compile_invariant(inv: Invariant) -> Generator:
    """The obligation generator of one invariant (exact: scaled integers, one proposition tree each)."""
    expand = compile_expansion(inv)
    build = _BUILDERS[inv.form]
    length = inv.measure == "length"

    def generate(data: Any) -> list[Obligation]:
        return [_skipped(inv, name, paths, EMPTY_SCENARIO) if raws is None
                else _obligation(inv, name, paths, raws, build, length)
                for name, paths, raws in expand(data)]

    return generate


def _expand_general(inv: Invariant, patterns: list[tuple[Segment, ...]], data: Any) -> list[Item]:
    """Patterns with several wildcards: full expansion, zipped over the first pattern's wildcards."""
    expansions = _expand(data, patterns)
    if expansions is None:
        return [(f"{inv.name}_{inv.form}", tuple(inv.read_paths()), None)]
    out: list[Item] = []
    for index, binding in enumerate(expansions):
        expanded = WILDCARD not in binding[0][0]
        name = f"{inv.name}_{index}_{inv.form}" if expanded else f"{inv.name}_{inv.form}"
        out.append((name, tuple(p for p, _ in binding), [raw for _, raw in binding]))
    return out


def _obligation(inv: Invariant, name: str, paths: tuple[str, ...], raws: list[Any],
                build: Callable[[Invariant, list[Scaled]], Built], length: bool) -> Obligation:
    if length:
        numbers = [Scaled(len(raw), 0) if isinstance(raw, list | dict) else None for raw in raws]
    else:
        numbers = [to_scaled(raw) for raw in raws]
    if None in numbers:
        problems = [f"{path} {_why(inv, raw)}" for path, raw, n in zip(paths, raws, numbers, strict=True) if n is None]
        return _skipped(inv, name, paths, "; ".join(problems))
    exact: list[Scaled] = numbers  # type: ignore[assignment]
    prop, scale, claim = build(inv, exact)
    return Obligation(name, inv.name, inv.form, paths, prop, scale, inv.severity, "", inv.source, tuple(exact), claim)


def _why(inv: Invariant, raw: Any) -> str:
    if raw is MISSING:
        return "not present"
    if inv.measure == "length":
        return f"is not a list (got {type(raw).__name__})"
    return f"is not a finite number (got {_show(raw)})"


def _skipped(inv: Invariant, name: str, paths: tuple[str, ...], reason: str) -> Obligation:
    return Obligation(name, inv.name, inv.form, paths, None, 0, inv.severity, reason, inv.source)


_COMPILED: dict[int, tuple[InvariantsFile, list[Generator]]] = {}


def compile_file(spec: InvariantsFile) -> list[Generator]:
    """Compiled generators of a parsed file (memoised per parsed-file object)."""
    hit = _COMPILED.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    generators = [compile_invariant(inv) for inv in spec.invariants]
    _COMPILED[id(spec)] = (spec, generators)
    return generators


def obligations(spec: InvariantsFile, data: Any) -> list[Obligation]:
    """Every obligation (checkable or skipped) the file generates for one artifact."""
    return [ob for generate in compile_file(spec) for ob in generate(data)]


def exact_obligation(inv: Invariant, name: str, paths: tuple[str, ...], raws: list[Any] | None) -> Obligation:
    """The exact obligation of one expanded field (an :data:`Item` of :func:`compile_expansion`)."""
    if raws is None:
        return _skipped(inv, name, paths, EMPTY_SCENARIO)
    return _obligation(inv, name, paths, raws, _BUILDERS[inv.form], inv.measure == "length")
