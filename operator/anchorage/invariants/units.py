"""Scales of unit-scale indices: the ones the seed accepts, the one an artifact declares, the report's reading.

Used by the Juneau gate (:mod:`anchorage.invariants.replays.juneau_tourism`, seed G.4's "invalid
acceptance/sustainability units") and by the published report's arithmetic
(:mod:`anchorage.scoring.tbmm_report`, which reads percentages the same way as its unit gate does).

* :data:`PERCENT_SCALE` — the 0–100 scale (a percentage, or the "multiattribute utility" of seed F.1): an
  answer on it is not wrong while the schema does not pin the field's range (F.1), so the seed's class
  accepts it beside the task's unit scale;
* :func:`declared_scale` — the scale an artifact states for a field, from the ways an answer writes one
  (``<field>_scale``/``_unit``/``_units``/``_range`` beside it, or a ``scales``/``units``/``ranges`` map);
* :func:`non_finite` — a leaf that is a number but not a finite one (NaN, ±Infinity, 1e400): no scale has it;
* :func:`report_percent_reading` — the report's unit rule: a unit-scale value reported in (10, 100] is read as a
  percentage (divided by 100); :data:`REPORT_UNIT_SCALE_MAX` — its test for a unit-scale metric (every endpoint
  at most 1.5 in magnitude).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from anchorage import numbers

Scale = tuple[float, float]

PERCENT_SCALE: Scale = (0.0, 100.0)
REPORT_PERCENT_RANGE = (10.0, 100.0)   # (exclusive, inclusive]
REPORT_UNIT_SCALE_MAX = 1.5

DECLARATION_SUFFIXES = ("_scale", "_unit", "_units", "_range")
DECLARATION_MAPS = ("scales", "units", "ranges", "scale")
_RANGE = re.compile(r"(-?\d+(?:\.\d+)?)\s*(?:-|–|—|to|~|\.\.)\s*(-?\d+(?:\.\d+)?)")
_UNIT_WORDS = re.compile(r"\b(unit interval|fraction|proportion|share)\b", re.IGNORECASE)
_PERCENT_WORDS = re.compile(r"%|\bpercent(age)?\b", re.IGNORECASE)
_NON_FINITE = re.compile(r"\s*[+-]?(nan|inf|infinity)\s*", re.IGNORECASE)
_FLOAT_MAX = Decimal(sys.float_info.max)


def non_finite(raw: Any) -> bool:
    """NaN or ±Infinity (a JSON constant, a ``Decimal`` or a string such as ``"inf"``), or a number no float can
    hold (``1e400``, as a JSON number or a string). Such a leaf is not a number to :mod:`anchorage.numbers`
    (not missing either): a gate that must reject it, rather than call it missing evidence, asks here."""
    if isinstance(raw, float):
        return not math.isfinite(raw)
    if isinstance(raw, Decimal):
        return not raw.is_finite()
    if not isinstance(raw, str):
        return False
    if _NON_FINITE.fullmatch(raw):
        return True
    try:
        return abs(Decimal(raw.strip())) > _FLOAT_MAX
    except ArithmeticError:
        return False


def report_percent_reading(value: float) -> float:
    """The report's unit rule: a value in (10, 100] (in magnitude) is a percentage of the unit scale."""
    low, high = REPORT_PERCENT_RANGE
    return value / 100.0 if low < abs(value) <= high else value


def parse_scale(declared: Any) -> Scale | None:
    """A declared scale as (lo, hi): ``[lo, hi]``, ``{"min": lo, "max": hi}`` (or lo/hi, range), or text such as
    ``"0-100 multiattribute utility"``, ``"percent"``, ``"share (unit interval)"``; None when it states none."""
    if isinstance(declared, Mapping):
        for low, high in (("min", "max"), ("lo", "hi"), ("low", "high")):
            pair = [numbers.read(declared.get(low)).number, numbers.read(declared.get(high)).number]
            if None not in pair:
                return _ordered(pair[0], pair[1])
        return parse_scale(declared.get("range"))
    if isinstance(declared, list | tuple) and len(declared) == 2:
        pair = [numbers.read(v).number for v in declared]
        return None if None in pair else _ordered(pair[0], pair[1])
    if not isinstance(declared, str):
        return None
    found = _RANGE.search(declared)
    if found:
        return _ordered(float(found.group(1)), float(found.group(2)))
    if _PERCENT_WORDS.search(declared):
        return PERCENT_SCALE
    if _UNIT_WORDS.search(declared):
        return (0.0, 1.0)
    return None


def _ordered(a: float | None, b: float | None) -> Scale | None:
    if a is None or b is None:
        return None
    return (min(a, b), max(a, b))


def declared_scale(data: Mapping[str, Any], container: Mapping[str, Any], key: str, path: str) -> tuple[Scale, str] | None:
    """The scale the artifact declares for the field ``key`` of ``container`` (at ``path``), and where it says so:
    a sibling ``<key>_scale`` (``_unit``, ``_units``, ``_range``), or an entry ``key`` (or ``path``) of a
    ``scales``/``units``/``ranges``/``scale`` map beside the field or at the top level."""
    parent = path.rsplit(".", 1)[0] if "." in path else ""
    for suffix in DECLARATION_SUFFIXES:
        scale = parse_scale(container.get(key + suffix))
        if scale is not None:
            return scale, f"{parent}.{key}{suffix}" if parent else key + suffix
    for where, holder in ((parent, container), ("", data)):
        for name in DECLARATION_MAPS:
            table = holder.get(name)
            if not isinstance(table, Mapping):
                continue
            for entry in (key, path):
                scale = parse_scale(table.get(entry))
                if scale is not None:
                    return scale, f"{where + '.' if where else ''}{name}.{entry}"
    return None
