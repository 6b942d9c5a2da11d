"""Reading a metric's value out of an artifact: the path walk, and the value rule applied for the scorer.

Called by :mod:`anchorage.scoring.scorer` for every metric of every artifact (and of the oracle's
expected result). The walk is iterative, so depth never matters here. The value rule itself — which
leaves are numbers, including quoted decimals, and the bounds on digits and exponents — lives in
:mod:`anchorage.numbers`, shared with the gates (docs/design-notes.md "Scoring", *Value rule*): what
the scorer scores as a number, the gates check as one. Missing and non-numeric values get r = 0
(SPEC §4).
"""

from __future__ import annotations

import math
from typing import Any

from anchorage import numbers

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
    """Apply the value rule (:func:`anchorage.numbers.read`): (number, None, note) or (None, why not, None)."""
    reading = numbers.read(value)
    if reading.number is None:
        return None, reading.reason, None
    return reading.number, None, reading.note


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
