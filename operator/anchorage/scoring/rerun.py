"""A reproduction's fresh run against its committed result, within numerical tolerances declared per field.

A task's reproduction (``solution/solve.sh``) is rerun by the tests on whatever machine runs them, and its
artifact is compared with the committed ``solution/reproduced_result.json``. Numbers agree when
``|ours − committed| ≤ max(abs, rel·|committed|)``: :data:`DEFAULT` (1e-6 relative) for every field not
declared, or the tolerance ``solution/comparison.json`` declares for it under ``tolerances`` — one entry per
path, beside the ``volatile`` paths (not compared at all), each with the reason the method allows that
spread (an optimiser's tolerance, a solver's conditioning, the rounding of the written figure, ...)::

    "tolerances": [{"path": "single_angle_fits[*].initial_thickness_um", "rel": 0, "abs": 0.0002,
                    "why": "..."}]

A path is dotted keys and ``[i]`` (``[*]``: every element); its tolerance covers every number beneath
the node it names, the nearest declared node winning. :func:`declared` validates a declaration against the
committed artifact (a path that names no number, a negative or missing tolerance, a path declared twice:
one :class:`~anchorage.errors.InputError` listing them all).

:func:`band_flips` is the guarantee the tolerances must keep: the scorer's discrete verdict on the committed
artifact (gradable, every metric's status, within its anchor's tolerance or beyond it, every gate's status,
the comparison's verdict, under every profile) is the same anywhere in the band of every panel metric and of
every declared number a gate reads — so a machine whose digits differ within tolerance can never change what
is scored. A number left at the default is deterministic by declaration and held (:func:`variants`). Used by
``tests/anchors/test_reproductions.py`` and ``tools/anchor_table.py --check``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from anchorage.errors import InputError
from anchorage.invariants.exact import MISSING, WILDCARD, Segment, format_path, parse_path, resolve

Node = tuple[Segment, ...]
Number = int | float
FIELDS = ("path", "rel", "abs", "why")
BAND_POINTS = 9
"""Points tried across each moving number's band (its two ends included): a verdict that changes inside the
band but not at its ends (a window narrower than the band) is found too."""
GATE_COMBINATIONS = 4
"""A gate reading at most this many numbers is tried at every combination of their band ends."""


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How far a fresh run's number may land from the committed one: ``max(abs, rel·|committed|)``."""

    rel: float
    abs: float
    path: str = ""
    why: str = ""

    def allowed(self, committed: Number) -> float:
        return max(self.abs, self.rel * abs(committed))

    def band(self, committed: Number) -> tuple[Number, Number]:
        """The lowest and highest value a run may give; an integer's band holds only integers."""
        spread = self.allowed(committed)
        if isinstance(committed, int):
            return math.ceil(committed - spread - 1e-9), math.floor(committed + spread + 1e-9)
        return committed - spread, committed + spread

    def describe(self) -> str:
        return f"rel {self.rel:g}, abs {self.abs:g}" + (f" ({self.path})" if self.path else " (default)")


DEFAULT = Tolerance(rel=1e-6, abs=1e-9)
"""Fields not declared: a deterministic computation gives the same digits anywhere (1e-6 covers the last
digit of a figure printed with 7 significant digits)."""


@dataclass(frozen=True, slots=True)
class Difference:
    """One place where a run differs from the committed result beyond its tolerance (or in kind)."""

    path: str
    ours: Any
    committed: Any
    tolerance: Tolerance | None = None
    what: str = ""

    def __str__(self) -> str:
        if self.what:
            return f"{self.path}: {self.what}"
        if self.tolerance is None:
            return f"{self.path}: {self.ours!r} != {self.committed!r}"
        gap = abs(self.ours - self.committed)
        return (f"{self.path}: {self.ours!r} != {self.committed!r} (differs by {gap:.3g}, allowed "
                f"{self.tolerance.allowed(self.committed):.3g}: {self.tolerance.describe()})")


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class RunTolerances:
    """The tolerances of one reproduction, resolved on its committed artifact's nodes."""

    by_node: Mapping[Node, Tolerance]
    volatile: frozenset[Node]

    def tolerance_at(self, node: Node) -> Tolerance:
        """The declared tolerance of the nearest node at or above ``node``, else :data:`DEFAULT`."""
        for depth in range(len(node), -1, -1):
            found = self.by_node.get(node[:depth])
            if found is not None:
                return found
        return DEFAULT

    def differences(self, ours: Any, committed: Any) -> list[Difference]:
        """Where ``ours`` (a fresh run's artifact) differs from ``committed`` beyond the tolerances."""
        out: list[Difference] = []
        self._compare(ours, committed, (), DEFAULT, out)
        return out

    def _compare(self, ours: Any, committed: Any, node: Node, tolerance: Tolerance, out: list[Difference]) -> None:
        if node in self.volatile:
            return
        tolerance = self.by_node.get(node, tolerance)
        where = "$" + ("." + format_path(node) if node else "")
        if isinstance(committed, dict):
            if not isinstance(ours, dict) or set(ours) != set(committed):
                extra = sorted(set(ours) - set(committed)) if isinstance(ours, dict) else None
                missing = sorted(set(committed) - set(ours)) if isinstance(ours, dict) else None
                out.append(Difference(where, ours, committed, what=f"keys differ (new {extra}, missing {missing})"
                                      if isinstance(ours, dict) else f"an object was expected, got {type(ours).__name__}"))
                return
            for key, value in committed.items():
                self._compare(ours[key], value, (*node, key), tolerance, out)
        elif isinstance(committed, list):
            if not isinstance(ours, list) or len(ours) != len(committed):
                out.append(Difference(where, ours, committed, what=f"lengths differ ({len(ours)} != {len(committed)})"
                                      if isinstance(ours, list) else f"a list was expected, got {type(ours).__name__}"))
                return
            for index, (mine, theirs) in enumerate(zip(ours, committed, strict=True)):
                self._compare(mine, theirs, (*node, index), tolerance, out)
        elif is_number(committed) and is_number(ours):
            if committed != committed:  # NaN
                if ours == ours:
                    out.append(Difference(where, ours, committed))
            elif not abs(ours - committed) <= tolerance.allowed(committed):
                out.append(Difference(where, ours, committed, tolerance))
        elif ours != committed or type(ours) is not type(committed):
            out.append(Difference(where, ours, committed))

    def leaves(self, committed: Any) -> Iterator[tuple[Node, Number, Tolerance]]:
        """Every finite number of ``committed`` outside the volatile paths, with its tolerance."""
        yield from self._leaves(committed, (), DEFAULT)

    def _leaves(self, value: Any, node: Node, tolerance: Tolerance) -> Iterator[tuple[Node, Number, Tolerance]]:
        if node in self.volatile:
            return
        tolerance = self.by_node.get(node, tolerance)
        if isinstance(value, dict):
            for key, child in value.items():
                yield from self._leaves(child, (*node, key), tolerance)
        elif isinstance(value, list):
            for index, child in enumerate(value):
                yield from self._leaves(child, (*node, index), tolerance)
        elif is_number(value) and math.isfinite(value):
            yield node, value, tolerance


def _numbers_under(value: Any) -> int:
    if isinstance(value, dict):
        return sum(_numbers_under(v) for v in value.values())
    if isinstance(value, list):
        return sum(_numbers_under(v) for v in value)
    return 1 if is_number(value) else 0


def _tolerance_value(entry: Mapping[str, Any], key: str) -> tuple[float | None, str | None]:
    value: Any = entry.get(key)
    if not is_number(value) or not math.isfinite(value):
        return None, f"'{key}' must be a finite number ≥ 0 (got {value!r})"
    if value < 0:
        return None, f"'{key}' is negative ({value!r}): a tolerance is a distance, ≥ 0"
    return float(value), None


def declared(comparison: Mapping[str, Any], committed: Any, source: str = "comparison.json") -> RunTolerances:
    """The ``tolerances`` and ``volatile`` paths of a comparison, checked against the ``committed`` artifact.

    Raises :class:`InputError` listing every problem: not a list, an entry with missing or unknown keys, a
    negative or non-numeric tolerance, an empty reason, a malformed path, a path that names no number of the
    committed artifact, a node two entries cover.
    """
    problems: list[str] = []
    by_node: dict[Node, Tolerance] = {}
    raw = comparison.get("tolerances", [])
    if not isinstance(raw, list):
        raise InputError(f"{source}: 'tolerances' must be a list of {{path, rel, abs, why}} objects",
                         hint='write "tolerances": [{"path": "a.b[*].c", "rel": 0, "abs": 1e-4, "why": "..."}]')
    for index, entry in enumerate(raw):
        where = f"tolerances[{index}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: an object {{path, rel, abs, why}} was expected, got {type(entry).__name__}")
            continue
        where += f" ({entry.get('path')!r})"
        unknown, missing = sorted(set(entry) - set(FIELDS)), [k for k in FIELDS if k not in entry]
        if unknown or missing:
            problems.append(f"{where}: " + "; ".join(
                ([f"unknown key(s) {', '.join(unknown)}"] if unknown else [])
                + ([f"missing key(s) {', '.join(missing)}"] if missing else [])))
            continue
        rel, rel_problem = _tolerance_value(entry, "rel")
        abs_, abs_problem = _tolerance_value(entry, "abs")
        problems += [f"{where}: {p}" for p in (rel_problem, abs_problem) if p]
        if not isinstance(entry["why"], str) or not entry["why"].strip():
            problems.append(f"{where}: 'why' is empty: say what in the method allows this spread")
        nodes = _nodes(entry["path"], committed, where, problems)
        if rel is None or abs_ is None or nodes is None:
            continue
        tolerance = Tolerance(rel, abs_, str(entry["path"]), str(entry["why"]))
        for node in nodes:
            if node in by_node:
                problems.append(f"{where}: {format_path(node)} is already covered by {by_node[node].path!r}")
            by_node[node] = tolerance
    volatile: set[Node] = set()
    raw_volatile = comparison.get("volatile", [])
    if not isinstance(raw_volatile, list):
        problems.append(f"'volatile' must be a list of paths, got {type(raw_volatile).__name__}")
        raw_volatile = []
    for index, path in enumerate(raw_volatile):
        found = _nodes(path, committed, f"volatile[{index}] ({path!r})", problems, numbers=False)
        volatile.update(found or ())
    if problems:
        raise InputError(f"{source}: its tolerances do not fit the committed result:\n"
                         + "\n".join(f"  {p}" for p in problems),
                         hint="paths are dotted keys and [i] ([*]: every element) of solution/reproduced_result.json;"
                              " rel and abs are ≥ 0; 'why' gives the method's reason")
    return RunTolerances(by_node, frozenset(volatile))


def _nodes(path: Any, committed: Any, where: str, problems: list[str], *, numbers: bool = True) -> list[Node] | None:
    """The committed artifact's nodes ``path`` names (None, with a problem, when it names none)."""
    if not isinstance(path, str) or not path.strip():
        problems.append(f"{where}: 'path' must be a non-empty string")
        return None
    try:
        segments = parse_path(path)
    except InputError as exc:
        problems.append(f"{where}: {exc.message}")
        return None
    found = [(node, value) for node, value in resolve(committed, segments)
             if value is not MISSING and WILDCARD not in node]
    if not found:
        problems.append(f"{where}: names nothing in the committed result")
        return None
    if numbers and not any(_numbers_under(value) for _, value in found):
        problems.append(f"{where}: names no number in the committed result (only {type(found[0][1]).__name__})")
        return None
    return [node for node, _ in found]


# --- the scorer's verdict across the bands -------------------------------------------------------------

Outcome = dict[str, Any]
Scorer = Callable[[Any], Outcome]


def _set(data: Any, node: Node, value: Any) -> Any:
    """Put ``value`` at ``node`` of ``data`` (in place); return what was there."""
    for segment in node[:-1]:
        data = data[segment]
    old = data[node[-1]]
    data[node[-1]] = value
    return old


def _points(low: Number, high: Number, count: int) -> list[Number]:
    """``count`` points from ``low`` to ``high`` (an integer band: its integers, at most ``count`` of them)."""
    if isinstance(low, int) and isinstance(high, int):
        return sorted({low + (high - low) * i // (count - 1) for i in range(count)})
    return [low + (high - low) * i / (count - 1) for i in range(count)]


def variants(committed: Any, tolerances: RunTolerances, metrics: Sequence[tuple[str, float | None]],
             gates: Sequence[tuple[str, Sequence[str]]]) -> Iterator[tuple[str, dict[Node, Number]]]:
    """Assignments of band values to the numbers the scorer reads, each with a description.

    ``metrics``: the panel metrics' paths and anchors; ``gates``: each gate's name and the paths it reads.
    What moves: every panel metric (within its declared tolerance, else :data:`DEFAULT`) and every number a
    gate reads that has a declared tolerance. A number left at the default is deterministic — the same
    digits on any machine (constants of the statement, counts, values pinned at a bound such as a p-value of
    0 or an accuracy of 1, an optimum equal to its bound) — and held where it is: a gate at such a boundary
    is not a machine's choice. Every moving number moves across its band together (:data:`BAND_POINTS`
    points from the low end to the high end: a metric's reward, a one-number gate depend on that number alone,
    so this tries each at every point); then the metrics all towards their anchors and all away (the panel's
    O-Eval is monotone in each distance); then each gate reading several numbers at every combination of their
    band ends (at most :data:`GATE_COMBINATIONS` numbers, else each end of each number alone).
    """
    bands = {node: tolerance.band(value) for node, value, tolerance in tolerances.leaves(committed)}
    declared_nodes = {node for node, _, tolerance in tolerances.leaves(committed) if tolerance is not DEFAULT}

    def read(paths: Sequence[str], among: Collection[Node]) -> list[Node]:
        out: list[Node] = []
        for path in paths:
            for node, _ in resolve(committed, parse_path(path)):
                out += [n for n in among if n[:len(node)] == node]
        return list(dict.fromkeys(out))

    metric_nodes = [(node, anchor) for path, anchor in metrics for node in read([path], bands)]
    gate_nodes = [(name, read(paths, declared_nodes | {n for n, _ in metric_nodes})) for name, paths in gates]
    moving = dict.fromkeys([n for n, _ in metric_nodes] + [n for _, nodes in gate_nodes for n in nodes])
    points = {node: _points(*bands[node], BAND_POINTS) for node in moving}
    for step in range(BAND_POINTS):
        yield (f"every moving number at {step}/{BAND_POINTS - 1} of its band",
               {n: p[round(step * (len(p) - 1) / (BAND_POINTS - 1))] for n, p in points.items()})
    towards: dict[Node, Number] = {}
    away: dict[Node, Number] = {}
    for node, anchor in metric_nodes:
        if anchor is not None:
            low, high = bands[node]
            towards[node], away[node] = (low, high) if abs(low - anchor) <= abs(high - anchor) else (high, low)
    if towards:
        yield "every panel metric at the end of its band nearest its anchor", towards
        yield "every panel metric at the end of its band farthest from its anchor", away
    for name, nodes in gate_nodes:
        if len(nodes) < 2:
            continue
        if len(nodes) <= GATE_COMBINATIONS:
            for ends in itertools.product((0, 1), repeat=len(nodes)):
                if 0 < sum(ends) < len(nodes):
                    yield (f"gate {name}: " + ", ".join(f"{format_path(n)} at its {'high' if e else 'low'} end"
                                                       for n, e in zip(nodes, ends, strict=True)),
                           {n: bands[n][e] for n, e in zip(nodes, ends, strict=True)})
        else:
            for node in nodes:
                for end in (0, 1):
                    yield (f"gate {name}: {format_path(node)} at its {'high' if end else 'low'} end",
                           {node: bands[node][end]})


def band_flips(committed: Any, tolerances: RunTolerances, score: Scorer,
               reads: tuple[Sequence[tuple[str, float | None]], Sequence[tuple[str, Sequence[str]]]],
               *, limit: int = 10) -> list[str]:
    """Where a value inside the declared bands would change ``score``'s verdict on ``committed``.

    ``score`` maps an artifact to its discrete outcome (see :func:`anchorage.scoring.reproduction.outcome`);
    ``reads`` are the scored metrics (path, anchor) and the gates (name, paths) of :func:`variants`. A
    volatile path the scorer reads is a flip too: its value is never compared, so it could change anything.
    """
    metrics, gates = reads
    problems = [f"{path} is read by the scorer but declared volatile (never compared): a run could change "
                "its score" for path in sorted({p for p, _ in metrics} | {p for _, ps in gates for p in ps})
                if any(node[:len(v)] == v for v in tolerances.volatile
                       for node, _ in resolve(committed, parse_path(path)))]
    expected = score(committed)
    for description, assignment in variants(committed, tolerances, metrics, gates):
        saved = {node: _set(committed, node, value) for node, value in assignment.items()}
        try:
            got = score(committed)
        finally:
            for node, value in saved.items():
                _set(committed, node, value)
        if got != expected:
            changed = sorted(k for k in expected.keys() | got.keys() if expected.get(k) != got.get(k))
            problems.append(f"{description}: " + "; ".join(f"{k} {expected.get(k)!r} -> {got.get(k)!r}"
                                                           for k in changed[:4]))
            if len(problems) >= limit:
                break
    return problems
