"""The programmatic gate checker: a task's invariants and replay checks over one artifact.

Called by the scorer (``anchorage.scoring``) as ``check(task_root, data)``; a result that is a hard
error (``status == "failed"`` and ``severity == "hard"``) triggers the hard-gate penalty (SPEC §4,
G.4). Missing fields are *missing evidence*: status ``missing``, severity ``warning`` — an empty
artifact never hard-fails. Every invariant is evaluated exactly (decimals from the JSON text, see
:mod:`anchorage.invariants.exact`).

``data`` may be the JSON text (``str``/``bytes``, parsed exactly here), data parsed with
``parse_float=Decimal`` (what the scorer passes: one parse serves the metrics and the gates), or data
parsed with plain floats (read through their shortest ``repr``).

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
from decimal import Decimal
from pathlib import Path
from typing import Any

from anchorage.invariants import replays
from anchorage.invariants.compiler import compile_expansion, exact_obligation, obligations
from anchorage.invariants.exact import loads_exact
from anchorage.invariants.expr import Obligation
from anchorage.invariants.results import GateResult, GateStatus, Severity
from anchorage.invariants.spec import INVARIANTS_FILE, Invariant, InvariantsFile, load_invariants

Check = Callable[[Any, list[GateResult]], None]
"""A compiled invariant: appends the gate result of every field it expands to."""

Verdict = Callable[[list[Any]], bool]


def check(task_root: Path, data: Any) -> list[GateResult]:
    """All gate results of the task's ``tests/invariants.yaml`` on ``data``; ``[]`` without the file."""
    compiled = compiled_checks(Path(task_root))
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
    if spec.replay:
        plain = _float_view(exact)
        for name in spec.replay:
            results.extend(run_replay(name, plain))
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
        check_fn = replays.get(name)
    except KeyError as exc:
        return [GateResult(name=name, form="replay", paths=(), status="missing", severity="warning", message=str(exc))]
    if not isinstance(data, Mapping):
        return [GateResult(name=name, form="replay", paths=(), status="missing", severity="warning",
                           message=f"artifact is not a JSON object (got {type(data).__name__})")]
    try:
        return list(check_fn(data))
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


def _float_view(data: Any) -> Any:
    """Replay checks get plain Python numbers (Decimals become floats)."""
    kind = type(data)
    if kind is dict:
        return {key: _float_view(value) for key, value in data.items()}
    if kind is list:
        return [_float_view(value) for value in data]
    if kind is Decimal or isinstance(data, Decimal):
        return float(data)
    if isinstance(data, Mapping):
        return {key: _float_view(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_float_view(value) for value in data]
    return data


def hard_errors(results: list[GateResult]) -> list[GateResult]:
    """The results that trigger the hard-gate penalty."""
    return [r for r in results if r.hard_error]


# --- the compiled (fast) checker -------------------------------------------------------------------

_CHECKS: dict[str, tuple[tuple[int, int], InvariantsFile, list[Check]]] = {}


def compiled_checks(task_root: Path) -> tuple[InvariantsFile, list[Check]] | None:
    """The task's parsed invariants and their compiled checks (one ``stat`` per call when cached)."""
    path = os.path.join(task_root, INVARIANTS_FILE)
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    stamp = (info.st_mtime_ns, info.st_size)
    hit = _CHECKS.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1], hit[2]
    spec = load_invariants(task_root)
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
            inv, raws = state["_source"]
            exact = to_gate_result(exact_obligation(inv, self.name, self.paths, raws))
            detail = state["_cached"] = (exact.message, exact.values)
        return detail

    def __reduce__(self) -> tuple[Any, ...]:
        return (GateResult, (self.name, self.form, self.paths, self.status, self.severity, self.message,
                             dict(self.values)))


def _lazy(name: str, form: str, paths: tuple[str, ...], status: GateStatus, severity: Severity,
          source: tuple[Invariant, list[Any]]) -> LazyGate:
    gate: LazyGate = object.__new__(LazyGate)
    state = gate.__dict__  # the dataclass is frozen: fill its fields directly
    state["name"], state["form"], state["paths"] = name, form, paths
    state["status"], state["severity"], state["_source"] = status, severity, source
    return gate


def _number(raw: Any) -> Any:
    """An exactly comparable number (``Decimal``/``int``) for a JSON number, else None (→ reference path).

    Floats are read through their shortest ``repr``, as the reference evaluation reads them.
    """
    kind = type(raw)
    if kind is Decimal:
        return raw if raw.is_finite() else None
    if kind is int:
        return raw
    if kind is float:
        return Decimal(repr(raw)) if raw - raw == 0.0 else None
    return None  # strings, booleans, null, containers, MISSING, subclasses: the reference path decides


def _length(raw: Any) -> Any:
    kind = type(raw)
    return len(raw) if kind is list or kind is dict else None


def _verdict(inv: Invariant) -> Verdict | None:
    """Exact comparison of the numbers read, as the obligation's predicate states it; None = identity."""
    form = inv.form
    if form == "range":
        lo, hi = inv.lo, inv.hi
        if lo is not None and hi is not None:
            return lambda xs: lo <= xs[0] <= hi
        if lo is not None:
            return lambda xs: lo <= xs[0]
        return lambda xs: xs[0] <= hi
    if form == "ordering":
        if inv.op == "<":
            return lambda xs: xs[0] < xs[1]
        return lambda xs: xs[0] <= xs[1]
    if form == "sign":
        if inv.op == ">":
            return lambda xs: xs[0] > 0
        return lambda xs: xs[0] >= 0
    if form == "interval":
        return lambda xs: xs[0] <= xs[1]
    if form == "finite_domain":
        allowed = frozenset(inv.values or ())  # equal numbers hash alike: Decimal("1.0") in {1}
        return lambda xs: xs[0] in allowed
    return None  # identity: products and tolerance bands go through the reference evaluation


def compile_check(inv: Invariant) -> Check:
    """The compiled check of one invariant (see the module docstring)."""
    expand = compile_expansion(inv)
    verdict = _verdict(inv)
    form, severity = inv.form, inv.severity
    convert = _length if inv.measure == "length" else _number

    def run(data: Any, out: list[GateResult]) -> None:
        for name, paths, raws in expand(data):
            if raws is not None and verdict is not None:
                numbers = [convert(raw) for raw in raws]
                if None not in numbers:
                    status: GateStatus = "passed" if verdict(numbers) else "failed"
                    out.append(_lazy(name, form, paths, status, severity, (inv, raws)))
                    continue
            out.append(to_gate_result(exact_obligation(inv, name, paths, raws)))

    return run
