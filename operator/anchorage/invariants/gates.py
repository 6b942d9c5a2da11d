"""The programmatic gate checker: a task's invariants and replay checks over one artifact.

Called by the scorer (``anchorage.scoring``) as ``check(task_root, data)``; a result that is a hard
error (``status == "failed"`` and ``severity == "hard"``) triggers the hard-gate penalty (SPEC §4,
G.4). Missing fields are *missing evidence*: status ``missing``, severity ``warning`` — an empty
artifact never hard-fails. Every invariant is evaluated exactly (decimals from the JSON text, see
:mod:`anchorage.invariants.exact`).

``data`` may be the JSON text (``str``/``bytes``, parsed exactly here), data parsed with
``parse_float=Decimal`` (what the scorer passes: one parse serves the metrics and the gates), or data
parsed with plain floats (read through their shortest ``repr``). Replay checks get that same data
(numbers ``Decimal``/``int``/``float``: they read them with ``exact.to_fraction``).

Speed (the scorer runs this on every artifact): each task's invariants are compiled once into
closures (cached by the file's path, mtime and size); a closure walks only the paths its invariant
names and decides each field with exact ``Decimal``/``int`` comparisons against the file's bounds
(no scaled-integer tree is built). The result's ``message`` and ``values`` — the only parts that need
the full obligation — are built on first access (:class:`LazyGate`) by the reference evaluation
(:func:`check_exact`: the obligation tree of :mod:`anchorage.invariants.compiler`, which the Lean
layer renders). Identities, non-numbers, missing fields and empty scenarios go through that
reference evaluation directly. ``tests/invariants/test_fast_gates.py`` checks the two agree on every
anchor, every discrimination mutation and random perturbations.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from decimal import Decimal, DecimalException
from pathlib import Path
from typing import Any

from anchorage import numbers
from anchorage.invariants import replays
from anchorage.invariants.compiler import (
    Expander,
    Pattern,
    TheoremNames,
    compile_expansion,
    exact_obligation,
    get_segments,
    obligations,
)
from anchorage.invariants.exact import MISSING, WILDCARD, loads_exact, parse_path, to_scaled
from anchorage.invariants.expr import Obligation
from anchorage.invariants.forms import EXACT, FORMS, Verdict
from anchorage.invariants.results import GateResult, GateStatus, Severity
from anchorage.invariants.spec import INVARIANTS_FILE, Invariant, InvariantsFile, load_invariants

Check = Callable[[Any, list[GateResult]], None]
"""A compiled invariant: appends the gate result of every field it expands to."""



def check(task_root: Path, data: Any) -> list[GateResult]:
    """All gate results of the task's ``tests/invariants.yaml`` on ``data``; ``[]`` without the file."""
    compiled = compiled_checks(task_root)
    if compiled is None:
        return []
    spec, checks = compiled
    exact = exact_view(data)
    results: list[GateResult] = []
    for run in checks:
        run(exact, results)
    return _with_replays(spec, exact, results)


def check_exact(task_root: Path, data: Any) -> list[GateResult]:
    """The reference evaluation: every obligation built as a tree and evaluated exactly.

    Same results as :func:`check` (a test compares them); slower, kept as the definition.
    """
    spec = load_invariants(Path(task_root))
    if spec is None:
        return []
    exact = exact_view(data)
    return _with_replays(spec, exact, [to_gate_result(ob) for ob in obligations(spec, exact)])


def _with_replays(spec: InvariantsFile, exact: Any, results: list[GateResult]) -> list[GateResult]:
    """Append the named replay checks' results; they get the same exact data (numbers ``Decimal``/int,
    read with :func:`~anchorage.invariants.exact.to_fraction`), not a float copy of the artifact."""
    for name in spec.replay:
        results.extend(run_replay(name, exact))
    return results


def to_gate_result(ob: Obligation) -> GateResult:
    """The gate record of one obligation (evaluated exactly, or missing when skipped)."""
    if ob.prop is None:
        return GateResult(
            name=ob.name, form=ob.form, paths=ob.paths, status="missing", severity="warning",
            message=f"missing evidence: {ob.reason}",
        )
    passed = ob.holds()
    verdict = "holds" if passed else "violated"
    return GateResult(
        name=ob.name, form=ob.form, paths=ob.paths, status="passed" if passed else "failed",
        severity=ob.severity, message=f"{ob.claim} {verdict}" + (f" ({ob.source})" if ob.source else ""),
        values=dict(ob.values),
    )


def run_replay(name: str, data: Any) -> list[GateResult]:
    """Run one named replay check; a crash on odd input is a warning, never a hard error."""
    try:
        replay = replays.get(name)
    except KeyError as exc:
        return [GateResult(name=name, form="replay", paths=(), status="missing", severity="warning", message=str(exc))]
    if not isinstance(data, Mapping):
        return [GateResult(name=name, form="replay", paths=(), status="missing", severity="warning",
                           message=f"artifact is not a JSON object (got {type(data).__name__})")]
    try:
        return list(replay.run(data))
    except Exception as exc:  # a replay must never turn malformed input into a hard error
        return [GateResult(name=name, form="replay", paths=(), status="missing", severity="warning",
                           message=f"replay check could not read the artifact: {type(exc).__name__}: {exc}")]


def exact_view(data: Any) -> Any:
    if isinstance(data, str | bytes | bytearray):
        try:
            return loads_exact(data)
        except json.JSONDecodeError:
            return None
    return data


def hard_errors(results: list[GateResult]) -> list[GateResult]:
    """The results that trigger the hard-gate penalty."""
    return [r for r in results if r.hard_error]


# --- the compiled (fast) checker -------------------------------------------------------------------

_CHECKS: dict[str, tuple[tuple[int, int], InvariantsFile, list[Check]]] = {}
_FILES: dict[Any, str] = {}
"""task root (as given: ``Path`` or ``str``) -> the path of its invariants file, joined once."""


def compiled_checks(task_root: Path | str) -> tuple[InvariantsFile, list[Check]] | None:
    """The task's parsed invariants and their compiled checks (one ``stat`` per call when cached)."""
    path = _FILES.get(task_root)
    if path is None:
        path = _FILES[task_root] = os.path.join(task_root, INVARIANTS_FILE)
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    stamp = (info.st_mtime_ns, info.st_size)
    hit = _CHECKS.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1], hit[2]
    spec = load_invariants(Path(task_root))
    if spec is None:
        return None
    checks = [compile_check(inv) for inv in spec.invariants]
    _CHECKS[path] = (stamp, spec, checks)
    return spec, checks


class LazyGate(GateResult):
    """A :class:`GateResult` whose verdict is known and whose ``message``/``values`` are built on demand.

    Built by the compiled checks only (``status`` passed/failed); the text comes from the reference
    evaluation of the same field, so it is exactly what :func:`check_exact` writes. Pickles and
    deep-copies as a plain :class:`GateResult`.
    """

    @property
    def message(self) -> str:
        return self._detail()[0]

    @property
    def values(self) -> dict[str, Any]:
        return self._detail()[1]

    def _detail(self) -> tuple[str, dict[str, Any]]:
        state = self.__dict__
        detail: tuple[str, dict[str, Any]] | None = state.get("_cached")
        if detail is None:
            describe, raws = state["_source"]
            detail = state["_cached"] = describe(self.name, self.paths, self.status, raws)
        return detail

    def __eq__(self, other: object) -> bool:  # equal to the plain GateResult with the same fields
        if not isinstance(other, GateResult):
            return NotImplemented
        return _fields(self) == _fields(other)

    __hash__ = GateResult.__hash__

    def __reduce__(self) -> tuple[Any, ...]:
        return (GateResult, (self.name, self.form, self.paths, self.status, self.severity, self.message,
                             dict(self.values)))


def with_severity(gate: GateResult, severity: Severity) -> GateResult:
    """``gate`` with another severity (a scoring profile's reading of it). A :class:`LazyGate` is relabelled
    in place — :func:`check` makes fresh ones on every call, owned by its caller — so its message stays
    unbuilt; any other result is copied."""
    if type(gate) is LazyGate:
        gate.__dict__["severity"] = severity
        return gate
    return GateResult(gate.name, gate.form, gate.paths, gate.status, severity, gate.message, dict(gate.values))


def _fields(gate: GateResult) -> tuple[Any, ...]:
    return (gate.name, gate.form, gate.paths, gate.status, gate.severity, gate.message, gate.values)


Describe = Callable[[str, tuple[str, ...], str, list[Any]], tuple[str, dict[str, Any]]]
"""(name, paths, status, raw values) -> the result's (message, values), as the reference writes them."""


def _describer(inv: Invariant) -> Describe:
    """The message and values of a decided field: the claim of the compiler's builders, in the same
    decimals (:func:`~anchorage.invariants.exact.to_scaled` text); identities ask the reference."""
    form, suffix = inv.form, f" ({inv.source})" if inv.source else ""

    def exact(name: str, paths: tuple[str, ...], status: str, raws: list[Any]) -> tuple[str, dict[str, Any]]:
        result = to_gate_result(exact_obligation(inv, name, paths, raws))
        return result.message, result.values

    made = FORMS[form].claim
    if made is None:
        return exact
    claim = made(inv)
    length = inv.measure == "length"

    def describe(name: str, paths: tuple[str, ...], status: str, raws: list[Any]) -> tuple[str, dict[str, Any]]:
        shown = [str(len(raw)) if length else _text(raw) for raw in raws]
        verdict = "holds" if status == "passed" else "violated"
        return f"{claim(shown)} {verdict}{suffix}", dict(zip(paths, shown, strict=False))

    return describe


def _text(raw: Any) -> str:
    """``str(to_scaled(raw))`` — the plain decimal text, trailing zeros dropped — without the detour."""
    kind = type(raw)
    if kind is Decimal:
        return format(EXACT.normalize(raw), "f") if raw else "0"
    if kind is int:
        return str(raw)
    return str(to_scaled(raw))


def _lazy(name: str, form: str, paths: tuple[str, ...], status: GateStatus, severity: Severity,
          source: tuple[Describe, list[Any]], new: Callable[[type[LazyGate]], LazyGate] = object.__new__,
          cls: type[LazyGate] = LazyGate) -> LazyGate:
    gate = new(cls)
    # the dataclass is frozen: fill its fields directly (one update is cheaper than six stores)
    gate.__dict__.update(name=name, form=form, paths=paths, status=status, severity=severity, _source=source)
    return gate


def _number(raw: Any) -> Any:
    """An exactly comparable number (``Decimal``/``int``) for a leaf, else None (→ reference path).

    The value rule is :func:`anchorage.numbers.read`'s (the scorer's): quoted decimals are numbers,
    numbers past the digit/exponent bounds are not. Floats are read through their shortest ``repr``.
    """
    kind = type(raw)
    if kind is int and -_SMALL < raw < _SMALL:
        return raw
    if kind is float:
        return Decimal(repr(raw)) if raw - raw == 0.0 else None
    return numbers.exact(raw)  # Decimals (bounded first), strings, booleans, null, containers, MISSING


_SMALL = 10**18


_inside = numbers.in_range
"""The bounds of :mod:`anchorage.numbers` for a finite ``Decimal`` leaf (an exact parse also bounds its digits)."""


def _length(raw: Any) -> Any:
    kind = type(raw)
    return len(raw) if kind is list or kind is dict else None


def _verdict(inv: Invariant) -> Verdict:
    """Exact comparison of the numbers read, as the obligation's predicate states it (the form's, :mod:`.forms`).

    One-path forms (range, sign, finite_domain) take ``x``; two-path forms (ordering, interval) ``x, y``.
    """
    return FORMS[inv.form].verdict(inv)


def _getter(segments: tuple[Any, ...]) -> Callable[[Any], Any]:
    """``get_segments(·, segments)`` unrolled for paths of 1–3 object keys (the common case); a step that
    is not a plain ``dict`` falls back to the general walk from the top, so the result is the same."""
    n = len(segments)
    if not 1 <= n <= 3 or any(type(key) is not str for key in segments):
        return lambda data: get_segments(data, segments)
    if n == 1:
        (a,) = segments

        def get1(data: Any) -> Any:
            return data.get(a, MISSING) if type(data) is dict else get_segments(data, segments)

        return get1
    if n == 2:
        a, b = segments

        def get2(data: Any) -> Any:
            if type(data) is dict:
                node = data.get(a, MISSING)
                if type(node) is dict:
                    return node.get(b, MISSING)
            return get_segments(data, segments)

        return get2
    a, b, c = segments

    def get3(data: Any) -> Any:
        if type(data) is dict:
            node = data.get(a, MISSING)
            if type(node) is dict:
                node = node.get(b, MISSING)
                if type(node) is dict:
                    return node.get(c, MISSING)
        return get_segments(data, segments)

    return get3


def _zipped_check(inv: Invariant, patterns: list[Pattern], verdict: Verdict, convert: Callable[[Any], Any],
                  general: Check) -> Check:
    """Two patterns with one ``[*]`` each, expanded together over a list (``rows[*].mean``/``rows[*].q95``)."""
    form, severity, describe = inv.form, inv.severity, _describer(inv)
    first, second = patterns
    names = TheoremNames(inv)
    labels: list[tuple[str, tuple[str, ...]]] = []

    def label(index: int) -> tuple[str, tuple[str, ...]]:
        while len(labels) <= index:
            at = len(labels)
            labels.append((names[at], (first.element_path(at), second.element_path(at))))
        return labels[index]

    first_head, second_head = _getter(first.head), _getter(second.head)

    def run(data: Any, out: list[GateResult]) -> None:
        container = first_head(data)
        other = second_head(data)
        if type(container) is not list or not container or type(other) is not list:
            general(data, out)
            return
        size = len(other)
        for index, element in enumerate(container):
            raws = [get_segments(element, first.tail),
                    get_segments(other[index], second.tail) if index < size else MISSING]
            name, paths = labels[index] if index < len(labels) else label(index)
            x, y = convert(raws[0]), convert(raws[1])
            if x is None or y is None:
                out.append(to_gate_result(exact_obligation(inv, name, paths, raws)))
            else:
                out.append(_lazy(name, form, paths, "passed" if verdict(x, y) else "failed", severity, (describe, raws)))

    return run


def compile_check(inv: Invariant) -> Check:
    """The compiled check of one invariant (see the module docstring).

    The common shapes get a dedicated closure (one path; two paths; one ``[*]`` over a list); the
    others walk :func:`~anchorage.invariants.compiler.compile_expansion` like the reference does.
    """
    expand = compile_expansion(inv)
    verdict = _verdict(inv)
    convert = _length if inv.measure == "length" else _number
    patterns = [Pattern(parse_path(p)) for p in inv.read_paths()]
    general = _general_check(inv, expand, verdict, convert)
    if inv.form == "identity" or len(patterns) > 2 or any(p.segments.count(WILDCARD) > 1 for p in patterns):
        return general
    if not any(p.wild for p in patterns):
        return _plain_check(inv, patterns, verdict, convert)
    if len(patterns) == 1:
        return _list_check(inv, patterns[0], verdict, convert, general)
    if patterns[0].wild and patterns[1].wild:
        return _zipped_check(inv, patterns, verdict, convert, general)
    return general


def _general_check(inv: Invariant, expand: Expander, verdict: Verdict, convert: Callable[[Any], Any]) -> Check:
    form, severity, describe = inv.form, inv.severity, _describer(inv)

    def run(data: Any, out: list[GateResult]) -> None:
        for name, paths, raws in expand(data):
            if raws is not None:
                numbers = [convert(raw) for raw in raws]
                if None not in numbers:
                    try:
                        status: GateStatus = "passed" if verdict(*numbers) else "failed"
                    except DecimalException:  # an inexact product (never with JSON decimals): the reference decides
                        pass
                    else:
                        out.append(_lazy(name, form, paths, status, severity, (describe, raws)))
                        continue
            out.append(to_gate_result(exact_obligation(inv, name, paths, raws)))

    return run


def _plain_check(inv: Invariant, patterns: list[Pattern], verdict: Verdict, convert: Callable[[Any], Any]) -> Check:
    """No wildcard: one obligation named ``<name>_<form>`` over one or two fixed paths."""
    form, severity, name, describe = inv.form, inv.severity, f"{inv.name}_{inv.form}", _describer(inv)
    paths = tuple(p.text for p in patterns)
    get_first = _getter(patterns[0].segments)
    numeric = convert is _number
    if len(patterns) == 1:
        def run_one(data: Any, out: list[GateResult], new: Callable[[type[LazyGate]], LazyGate] = object.__new__,
                    cls: type[LazyGate] = LazyGate, decimal: type[Decimal] = Decimal) -> None:
            raw = get_first(data)
            x = raw if numeric and type(raw) is decimal and raw.is_finite() and _inside(raw) else convert(raw)
            if x is None:
                out.append(to_gate_result(exact_obligation(inv, name, paths, [raw])))
            else:
                gate = new(cls)  # _lazy, inlined (runs for every plain invariant of every artifact)
                gate.__dict__.update(name=name, form=form, paths=paths, status="passed" if verdict(x) else "failed",
                                     severity=severity, _source=(describe, [raw]))
                out.append(gate)

        return run_one
    get_second = _getter(patterns[1].segments)

    def run_two(data: Any, out: list[GateResult]) -> None:
        raws = [get_first(data), get_second(data)]
        x, y = convert(raws[0]), convert(raws[1])
        if x is None or y is None:
            out.append(to_gate_result(exact_obligation(inv, name, paths, raws)))
        else:
            out.append(_lazy(name, form, paths, "passed" if verdict(x, y) else "failed", severity, (describe, raws)))

    return run_two


def _list_check(inv: Invariant, pattern: Pattern, verdict: Verdict, convert: Callable[[Any], Any],
                general: Check) -> Check:
    """One ``[*]`` over a list (``rows[*].x``): one obligation per element; maps and odd shapes → general."""
    form, severity, describe = inv.form, inv.severity, _describer(inv)
    head, tail = pattern.head, pattern.tail
    names = TheoremNames(inv)
    labels: list[tuple[str, tuple[str, ...]]] = []  # (theorem name, paths) per index, built once

    def label(index: int) -> tuple[str, tuple[str, ...]]:
        while len(labels) <= index:
            labels.append((names[len(labels)], (pattern.element_path(len(labels)),)))
        return labels[index]

    key = tail[0] if len(tail) == 1 and type(tail[0]) is str else None  # rows[*].x: one dict lookup each
    get_head = _getter(head)

    numeric = convert is _number  # a finite Decimal is its own exact number: no call for the common leaf

    def run(data: Any, out: list[GateResult], new: Callable[[type[LazyGate]], LazyGate] = object.__new__,
            cls: type[LazyGate] = LazyGate, decimal: type[Decimal] = Decimal) -> None:
        container = get_head(data)
        if type(container) is not list or not container:
            general(data, out)
            return
        if len(labels) < len(container):
            label(len(container) - 1)
        append = out.append
        for element, (name, paths) in zip(container, labels, strict=False):  # labels may be longer
            if key is not None and type(element) is dict:
                raw = element.get(key, MISSING)
            else:
                raw = get_segments(element, tail) if tail else element
            x = raw if numeric and type(raw) is decimal and raw.is_finite() and _inside(raw) else convert(raw)
            if x is None:
                append(to_gate_result(exact_obligation(inv, name, paths, [raw])))
            else:
                gate = new(cls)  # _lazy, inlined: this loop runs once per list element of every artifact
                gate.__dict__.update(name=name, form=form, paths=paths, status="passed" if verdict(x) else "failed",
                                     severity=severity, _source=(describe, [raw]))
                append(gate)

    return run
