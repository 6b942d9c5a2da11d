"""The one reading of an artifact's value as a number: what the scorer scores, the gates check.

Called by the scorer (``anchorage.scoring.values.to_number``: the float it rewards) and by the gate
and obligation checkers (``anchorage.invariants``: the exact ``Decimal``/``int`` they compare, through
``exact.to_scaled``/``to_fraction`` and the compiled gates). Because both read through
:func:`read`, a value is a number for both or for neither — an answer cannot be scored as a number
while its gates see "missing evidence" (which is only a warning), and the reverse.

The rule (docs/design-notes.md, "Scoring", *Value rule*):

* a JSON number (``int``, ``float``, or ``Decimal`` from an exact parse; not a boolean) is a number;
* a string holding a plain decimal (optional sign, digits, optional fraction and exponent, whitespace
  around it ignored: ``" 0.37 "``, ``"1.25e3"``) is the same number, with a note that it was coerced —
  the paper's reference scorer applied ``float()`` to strings, so the default keeps reading them, and
  the gates read them too; any other string (``"nan"``, ``"inf"``, ``"1,000"``, ``"12%"``) is not;
* ``null`` or an absent field is *missing*; booleans, objects, arrays, NaN and ±Infinity are *not
  numeric*;
* numbers are bounded **before** any exact arithmetic: at most :data:`MAX_DIGITS` significant digits,
  a decimal exponent within ±:data:`MAX_EXPONENT` and a magnitude a float can hold — so a 247-byte
  ``1E+999999999`` is ``non_numeric`` ("exponent ... beyond ±400"), never a 10⁹-digit integer. The
  JSON decoders' hooks :func:`parse_decimal` / :func:`parse_int` apply the bounds while parsing: a
  number past them is kept as an :class:`Unreadable` (its text and the reason), so no huge ``Decimal``
  or ``int`` is ever built, the rest of the artifact stays gradable, and every ``Decimal`` they make is
  within the bounds (the gates' fast path relies on it).

Pure and standard library only.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

MAX_DIGITS = 100
"""Significant digits a number may have (trailing zeros not counted)."""

MAX_EXPONENT = 400
"""Bound on a number's decimal exponent (the position of its leading digit), both ways."""

MAX_STRING = 400
"""Longest string that is looked at as a possible number."""

_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_FLOAT_MAX = Decimal(sys.float_info.max)
_FLOAT_EXPONENT = _FLOAT_MAX.adjusted()  # 308
_FLOAT_MAX_INT = int(sys.float_info.max)
_INT_BITS = int(MAX_DIGITS * math.log2(10))
_EXP_BITS = int((MAX_EXPONENT + 1) * math.log2(10)) + 1


class Unreadable(str):
    """A JSON number past the bounds, kept as its text (at most :data:`MAX_STRING` characters shown)."""

    reason: str

    @classmethod
    def of(cls, text: str, reason: str) -> Unreadable:
        shown = cls(text if len(text) <= 60 else text[:57] + "...")
        shown.reason = reason
        return shown


def parse_decimal(text: str) -> Decimal | Unreadable:
    """``parse_float`` hook of the exact JSON decoder: a ``Decimal`` within the bounds, else :class:`Unreadable`."""
    if len(text) > MAX_STRING:
        return Unreadable.of(text, f"a number written with {len(text)} characters, more than {MAX_STRING}")
    value = Decimal(text)
    reason = _out_of_bounds(value, "the number") if len(text) > MAX_DIGITS or "e" in text or "E" in text else None
    return value if reason is None else Unreadable.of(text, reason)


def parse_int(text: str) -> int | Unreadable:
    """``parse_int`` hook: an ``int`` within the bounds, else :class:`Unreadable` (no 4300-digit refusal of
    the whole artifact by Python's int parser)."""
    if len(text) > MAX_DIGITS + 1:
        return Unreadable.of(text, _integer_reason(len(text.lstrip("-").rstrip("0")), len(text.lstrip("-"))))
    return int(text)


Kind = Literal["number", "missing", "non_numeric"]


@dataclass(frozen=True, slots=True)
class Reading:
    """How a value reads: ``exact`` and ``number`` (its float) when it is a number, else ``reason``."""

    kind: Kind
    exact: Decimal | int | None = None
    number: float | None = None
    reason: str | None = None
    note: str | None = None


MISSING = Reading("missing", reason="the value is null")


def _bad(reason: str) -> Reading:
    return Reading("non_numeric", reason=reason)


def read(value: Any) -> Reading:
    """The reading of one artifact leaf (see the module docstring for the rule)."""
    kind = type(value)
    if kind is Decimal:
        return _decimal(value)
    if kind is float:
        if not math.isfinite(value):
            return _bad(f"{value} is not finite")
        return Reading("number", Decimal(repr(value)), value)
    if kind is int:
        return _integer(value)
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return _bad(f"boolean {str(value).lower()} where a number belongs")
    if isinstance(value, Unreadable):
        return _bad(value.reason)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return _integer(int(value))
    if isinstance(value, Decimal):
        return _decimal(value)
    return _bad(f"{_type_name(value)} where a number belongs")


def exact(value: Any) -> Decimal | int | None:
    """The exact number of a leaf, or None when :func:`read` says it is not one (fast for plain leaves)."""
    kind = type(value)
    if kind is int and -(1 << _INT_BITS) < value < (1 << _INT_BITS):
        return value  # type: ignore[no-any-return]
    return read(value).exact


def _integer_reason(significant: int, digits: int) -> str:
    if digits > MAX_EXPONENT + 1:
        return f"an integer with {digits} digits, more than {MAX_EXPONENT + 1}"
    return f"an integer with {significant} significant digits, more than {MAX_DIGITS}"


def _integer(value: int) -> Reading:
    if value.bit_length() > _INT_BITS:  # more than ~100 digits: look closer, without a huge str()
        if value.bit_length() > _EXP_BITS:
            return _bad(f"an integer with more than {MAX_EXPONENT + 1} digits")
        text = str(abs(value))
        if len(text.rstrip("0")) > MAX_DIGITS:
            return _bad(_integer_reason(len(text.rstrip("0")), len(text)))
    if abs(value) > _FLOAT_MAX_INT:
        return _bad("integer too large for a float")
    return Reading("number", value, float(value))


def in_range(value: Decimal) -> bool:
    """The exponent bound and a magnitude a float holds, for a finite ``Decimal`` (cheap: no digits looked at).

    The gates' fast path uses this on the ``Decimal`` leaves of an exact parse (whose digits
    :func:`parse_decimal` has bounded already); :func:`read` applies the same test.
    """
    adjusted = value.adjusted()
    if adjusted < _FLOAT_EXPONENT:
        return adjusted >= -MAX_EXPONENT or not value
    return adjusted == _FLOAT_EXPONENT and value.copy_abs() <= _FLOAT_MAX


def _out_of_bounds(value: Decimal, what: str) -> str | None:
    """Why a finite ``Decimal`` is past the bounds (exponent first: that check costs nothing), or None."""
    if not value:
        return None
    adjusted = value.adjusted()
    if not -MAX_EXPONENT <= adjusted <= MAX_EXPONENT:
        return f"{what} has a decimal exponent of {adjusted}, beyond ±{MAX_EXPONENT}"
    if not in_range(value):
        return f"{what} overflows a float" if what != "the number" else "the number is too large for a float"
    if len(str(value)) <= MAX_DIGITS:  # the text bounds the digits: the common case ends here
        return None
    digits = value.as_tuple().digits
    significant = len(digits)
    while significant > 1 and digits[significant - 1] == 0:
        significant -= 1
    if significant > MAX_DIGITS:
        return f"{what} has {significant} significant digits, more than {MAX_DIGITS}"
    return None


def _decimal(value: Decimal, note: str | None = None, shown: str | None = None) -> Reading:
    what = f"string {shown!r}" if shown is not None else "the number"
    if not value.is_finite():
        return _bad(f"{what if shown is not None else value} is not finite")
    reason = _out_of_bounds(value, what)
    if reason is not None:
        return _bad(reason)
    return Reading("number", value, float(value), note=note)


def _string(text: str) -> Reading:
    shown = text if len(text) <= 40 else text[:37] + "..."
    stripped = text.strip()
    if len(text) > MAX_STRING or not _DECIMAL.fullmatch(stripped):
        return _bad(f"string {shown!r} is not a plain decimal number")
    try:
        value = Decimal(stripped)
    except InvalidOperation:
        return _bad(f"string {shown!r} is not a plain decimal number")
    return _decimal(value, note=f"coerced from the string {shown!r}", shown=shown)


def _type_name(value: Any) -> str:
    if isinstance(value, dict):
        return f"an object with {len(value)} keys"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    return type(value).__name__
