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
from typing import Any

from anchorage.invariants.exact import (
    MISSING,
    WILDCARD,
    Scaled,
    Segment,
    _step,
    format_path,
    parse_path,
    resolve,
    to_scaled,
)
from anchorage.invariants.expr import Obligation
from anchorage.invariants.forms import FORMS, Built
from anchorage.invariants.spec import Invariant, InvariantsFile

Generator = Callable[[Any], list[Obligation]]


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


def _show(raw: Any) -> str:
    text = repr(raw)
    return text if len(text) <= 40 else text[:37] + "..."


class Pattern:
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


def get_segments(node: Any, segments: tuple[Segment, ...]) -> Any:
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


class TheoremNames:
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
    patterns = [Pattern(s) for s in segments]
    simple = all(s.count(WILDCARD) <= 1 for s in segments) and (patterns[0].wild or not any(p.wild for p in patterns))
    plain_name = f"{inv.name}_{inv.form}"
    names = TheoremNames(inv)
    texts = tuple(p.text for p in patterns)
    first, rest = patterns[0], patterns[1:]

    def expand(data: Any) -> list[Item]:
        if not simple:
            return _expand_general(inv, segments, data)
        if not first.wild:
            return [(plain_name, texts, [get_segments(data, p.segments) for p in patterns])]
        container = get_segments(data, first.head)
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
            return [(names[index], (element_path(key),), [get_segments(_element(container, key), tail)])
                    for index, key in enumerate(keys)]
        others = [(p, get_segments(data, p.head) if p.wild else get_segments(data, p.segments)) for p in rest]
        out: list[Item] = []
        for index, key in enumerate(keys):
            paths_list = [element_path(key)]
            raws = [get_segments(_element(container, key), tail)]
            for pattern, base in others:
                if pattern.wild:
                    paths_list.append(pattern.element_path(key))
                    raws.append(get_segments(_element(base, key), pattern.tail))
                else:
                    paths_list.append(pattern.text)
                    raws.append(base)
            out.append((names[index], tuple(paths_list), raws))
        return out

    return expand


def compile_invariant(inv: Invariant) -> Generator:
    """The obligation generator of one invariant (exact: scaled integers, one proposition tree each)."""
    expand = compile_expansion(inv)
    build = FORMS[inv.form].build
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
    return _obligation(inv, name, paths, raws, FORMS[inv.form].build, inv.measure == "length")
