"""Exact numbers and JSON paths for the invariant checkers.

Every number an invariant reads is turned into a *scaled integer*: a pair ``(n, k)`` meaning
``n / 10**k``, taken from the decimal text of the JSON (or YAML) source, never through binary
floating point. ``anchorage.invariants.compiler`` and ``anchorage.lean`` call this module; so do
replay checks that need exact arithmetic.

Artifacts should be parsed with :func:`loads_exact` (``parse_float=Decimal``). Data that was parsed
with ordinary floats is still read exactly as the float's shortest decimal representation
(``repr``), which is the JSON text for every artifact written by Python's ``json`` module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, NamedTuple

from anchorage import numbers
from anchorage.errors import InputError


class Scaled(NamedTuple):
    """The exact decimal ``n / 10**k`` (``k >= 0``); normalised: no trailing zero digit when k > 0."""

    n: int
    k: int

    def at(self, k: int) -> int:
        """The integer ``self * 10**k``; ``k`` must be at least ``self.k``."""
        if k < self.k:
            raise ValueError(f"cannot express {self} with {k} decimal digits")
        scaled: int = self.n * 10 ** (k - self.k)
        return scaled

    def to_fraction(self) -> Fraction:
        return Fraction(self.n, 10**self.k)

    def to_decimal(self) -> Decimal:
        return Decimal(self.n).scaleb(-self.k)

    def __str__(self) -> str:
        if self.k == 0:
            return str(self.n)
        digits = str(abs(self.n)).rjust(self.k + 1, "0")
        sign = "-" if self.n < 0 else ""
        return f"{sign}{digits[:-self.k]}.{digits[-self.k:]}"


def _normalise(n: int, k: int) -> Scaled:
    """Drop trailing zero digits so 2.000 and 2 scale alike (fewer digits in the Lean text)."""
    while k > 0 and n % 10 == 0:
        n //= 10
        k -= 1
    return Scaled(n, k)


def scaled_from_text(text: str) -> Scaled | None:
    """A plain decimal literal (``-12.340``) as a scaled integer; None for other spellings."""
    if "e" in text or "E" in text or "n" in text or "N" in text:
        return None
    point = text.find(".")
    try:
        if point < 0:
            return Scaled(int(text), 0)
        return _normalise(int(text[:point] + text[point + 1:]), len(text) - point - 1)
    except ValueError:
        return None


def scaled_from_decimal(value: Decimal) -> Scaled | None:
    """``value`` as a scaled integer, or None when it is NaN or infinite."""
    if not value.is_finite():
        return None
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    mantissa = int("".join(map(str, digits)) or "0")
    if sign:
        mantissa = -mantissa
    if exponent >= 0:
        return Scaled(mantissa * 10**exponent, 0)
    return _normalise(mantissa, -exponent)


# powers of five -> exponent: a Decimal's reduced denominator 2^a 5^b gives the scale max(a, b)
_LOG5 = {5**b: b for b in range(80)}
_POW10 = [10**k for k in range(80)]


def pow10(k: int) -> int:
    """10**k for k ≥ 0, from a table for the usual scales (reads are bounded, so k stays within a few hundred)."""
    return _POW10[k] if k < 80 else int(10**k)


def _scaled_from_ratio(value: Decimal) -> Scaled | None:
    try:
        n, d = value.as_integer_ratio()
    except (ValueError, OverflowError):  # NaN, Infinity
        return None
    if d == 1:
        return Scaled(n, 0)
    twos = (d & -d).bit_length() - 1
    fives = _LOG5.get(d >> twos)
    if fives is None:
        return scaled_from_decimal(value)
    k = twos if twos > fives else fives
    return Scaled(n * (pow10(k) // d), k)


def to_scaled(value: Any) -> Scaled | None:
    """The exact value of a JSON number, or None for anything that is not one.

    Artifact leaves are read by :func:`anchorage.numbers.read`, the rule the scorer uses too (quoted
    decimals are numbers; booleans, NaN and numbers past the digit/exponent bounds are not), bounded
    before any arithmetic here.
    """
    if isinstance(value, Scaled):
        return value
    number = numbers.exact(value)
    if number is None:
        return None
    if type(number) is int:
        return Scaled(number, 0)
    return _scaled_from_ratio(number)  # type: ignore[arg-type]


def to_fraction(value: Any) -> Fraction | None:
    """The exact value of a JSON number as a Fraction (None when :func:`to_scaled` says it is not one)."""
    number = numbers.exact(value)
    if number is None:
        return None
    return Fraction(number) if type(number) is int else Fraction(*number.as_integer_ratio())


def loads_exact(text: str | bytes | bytearray) -> Any:
    """Parse JSON text keeping every decimal exactly (``Decimal``; see :func:`anchorage.numbers.parse_decimal`)."""
    return json.loads(text, parse_float=numbers.parse_decimal, parse_int=numbers.parse_int)


def load_exact(path: Path) -> Any:
    """Read and parse a JSON artifact exactly; InputError says what is wrong with the file."""
    try:
        return loads_exact(path.read_bytes())
    except FileNotFoundError:
        raise InputError(f"artifact {path} does not exist", hint="pass the path of the result JSON") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"artifact {path} is not valid JSON: {exc}", hint="fix the JSON syntax") from None


# ---------------------------------------------------------------------------------------------
# JSON paths: dots and [i]; [*] expands to every element (of a list) or value (of a mapping).

WILDCARD = "*"
_TOKEN = re.compile(r"\[(\*|-?\d+)\]|([^.\[\]]+)")

Segment = str | int


def parse_path(path: str) -> tuple[Segment, ...]:
    """``"a.b[2].c[*]"`` → ``("a", "b", 2, "c", "*")``; InputError on malformed paths."""
    segments: list[Segment] = []
    position = 0
    text = path.strip()
    while position < len(text):
        if text[position] == ".":
            position += 1
            continue
        match = _TOKEN.match(text, position)
        if match is None:
            raise InputError(f"malformed JSON path {path!r} at character {position}", hint="use a.b[0].c or a[*].b")
        index, key = match.groups()
        if index is None:
            segments.append(key)
        else:
            segments.append(WILDCARD if index == WILDCARD else int(index))
        position = match.end()
    if not segments:
        raise InputError(f"empty JSON path {path!r}", hint="give a path such as experiment_result.q1.value")
    return tuple(segments)


def format_path(segments: Sequence[Segment]) -> str:
    out = ""
    for segment in segments:
        if isinstance(segment, int) or (segment == WILDCARD and out):
            out += f"[{segment}]"
        else:
            out += f".{segment}" if out else str(segment)
    return out


class _Missing:
    """Marker for a path that does not resolve."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def resolve(data: Any, segments: Sequence[Segment]) -> list[tuple[tuple[Segment, ...], Any]]:
    """Every concrete path the pattern names, with its value (MISSING where a step is absent).

    A wildcard over an empty list or mapping yields no entries (an *empty scenario*).
    """
    results: list[tuple[tuple[Segment, ...], Any]] = []
    _walk(data, tuple(segments), (), results)
    return results


def _walk(node: Any, rest: tuple[Segment, ...], done: tuple[Segment, ...], out: list[tuple[tuple[Segment, ...], Any]]) -> None:
    if not rest:
        out.append((done, node))
        return
    head, tail = rest[0], rest[1:]
    if head == WILDCARD:
        if isinstance(node, Mapping):
            for key, value in node.items():
                _walk(value, tail, (*done, str(key)), out)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                _walk(value, tail, (*done, index), out)
        else:
            out.append(((*done, head, *tail), MISSING))
        return
    _walk(_step(node, head), tail, (*done, head), out)


def _step(node: Any, segment: Segment) -> Any:
    if node is MISSING:
        return MISSING
    if isinstance(segment, int):
        if isinstance(node, list) and -len(node) <= segment < len(node):
            return node[segment]
        return MISSING
    if isinstance(node, Mapping):
        return node.get(segment, MISSING)
    return MISSING


def get_path(data: Any, path: str) -> Any:
    """The value at a concrete path (no wildcard), or MISSING."""
    node = data
    for segment in parse_path(path):
        node = _step(node, segment)
    return node
