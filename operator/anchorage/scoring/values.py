"""Reading a metric's value out of an artifact: the path walk and the value rule.

Called by :mod:`anchorage.scoring.scorer` for every metric of every artifact (and of the oracle's
expected result). The walk is iterative, so depth never matters here. The value rule (documented in
docs/design-notes.md "Scoring"):

* a JSON number (int or float, not a boolean) that is finite → that number;
* a string holding a plain decimal number (optional sign, digits, optional fraction and exponent,
  surrounding whitespace ignored, e.g. ``" 1.25e3 "``) → that number, with a note that it was coerced;
  any other string (``"nan"``, ``"inf"``, ``"1,000"``, ``"12%"``, ``"0x10"``) → non-numeric;
* NaN, ``Infinity`` and ``-Infinity`` (Python's json accepts those tokens) → non-numeric ("not finite");
* ``true`` / ``false`` → non-numeric (a boolean is a decision, not a measurement);
* ``null`` or an absent key/index → missing;
* an object or array where a number belongs → non-numeric;
* an integer too large for a float → non-numeric.

Missing and non-numeric values get r = 0 (SPEC §4).
"""

from __future__ import annotations

import math
import re
from typing import Any

_DECIMAL = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*")
_MISSING = object()


def lookup(data: Any, tokens: tuple[str | int, ...]) -> tuple[Any, str | None]:
    """Walk ``tokens`` into ``data``; return (value, None) or (None, why it is missing)."""
    current = data
    for depth, token in enumerate(tokens):
        if isinstance(token, int):
            if not isinstance(current, list) or token >= len(current):
                return None, _where(tokens, depth, "no index", current)
            current = current[token]
        else:
            if not isinstance(current, dict):
                return None, _where(tokens, depth, "no key", current)
            current = current.get(token, _MISSING)
            if current is _MISSING:
                return None, _where(tokens, depth, "no key", None)
    if current is None:
        return None, "the value is null"
    return current, None


def _where(tokens: tuple[str | int, ...], depth: int, what: str, container: Any) -> str:
    prefix = _join(tokens[:depth]) or "(top level)"
    token = tokens[depth]
    if container is not None and not isinstance(container, dict | list):
        return f"{prefix} is {type_name(container)}, not a container"
    shown = f"[{token}]" if isinstance(token, int) else repr(token)
    return f"{what} {shown} under {prefix}"


def _join(tokens: tuple[str | int, ...]) -> str:
    out = ""
    for token in tokens:
        out += f"[{token}]" if isinstance(token, int) else (f".{token}" if out else token)
    return out


def to_number(value: Any) -> tuple[float | None, str | None, str | None]:
    """Apply the value rule: (number, None, note) or (None, reason it is not a number, None)."""
    if isinstance(value, bool):
        return None, f"boolean {str(value).lower()} where a number belongs", None
    if isinstance(value, float):
        return (value, None, None) if math.isfinite(value) else (None, f"{value} is not finite", None)
    if isinstance(value, int):
        try:
            return float(value), None, None
        except OverflowError:
            return None, "integer too large for a float", None
    if isinstance(value, str):
        return _from_string(value)
    return None, f"{type_name(value)} where a number belongs", None


def _from_string(text: str) -> tuple[float | None, str | None, str | None]:
    shown = text if len(text) <= 40 else text[:37] + "..."
    if len(text) > 400 or not _DECIMAL.fullmatch(text):
        return None, f"string {shown!r} is not a plain decimal number", None
    number = float(text)
    if not math.isfinite(number):
        return None, f"string {shown!r} overflows a float", None
    return number, None, f"coerced from the string {shown!r}"


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return f"an object with {len(value)} keys"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    if isinstance(value, str):
        return "a string"
    return "a number" if isinstance(value, int | float) else type(value).__name__


def summarise(value: Any) -> Any:
    """The value as read, safe to put in a JSON record (containers and long strings summarised)."""
    if isinstance(value, dict | list):
        return f"<{type_name(value)}>"
    if isinstance(value, str) and len(value) > 200:
        return value[:197] + "..."
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "nan" / "inf": JSON has no literal for them
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**63:
        return f"<integer with {len(str(abs(value)))} digits>"
    return value
