"""Replay check for MCM 2025 B (Juneau tourism): invalid acceptance/sustainability units (seed G.4, the Juneau class).

Declared as ``juneau_units`` (``CHECK``) and named in the task's ``tests/invariants.yaml``; run by
:func:`anchorage.invariants.gates.check`. It reads the two indices of the final answer,
``experiment_result.resident_acceptance_index`` and ``experiment_result.sustainability_score``.

``juneau_<field>_units`` (hard; the seed's class, ``paper``): the value's units are invalid when

* it is not finite or negative (no scale has it);
* the artifact declares a scale for the field (``<field>_scale`` beside it, a ``scales``/``units`` map: see
  :func:`anchorage.invariants.units.declared_scale`) and the value lies outside it — a scale the artifact
  contradicts;
* the artifact restates the field in ``dynamic_programming.optimal_terminal_policy`` on the other scale (0.758
  there, 75.8 in the answer) — again a scale the artifact contradicts;
* it fits no scale an answer may use: the task's unit scale (acceptance [0, 1]; sustainability [0, 1.1], the
  pinned range that admits the anchor's 1.007) or the 0–100 scale of a percentage or a "multiattribute
  utility". Seed F.1: an answer on a 0–100 scale under a schema that does not pin the range "is not wrong" —
  so v4 pro's published 75.8 / 68.6 pass, and Kimi K3's 232.2 (the answer the seed penalised, with an
  acceptance of 1.5) fails.

``juneau_report_<field>_units`` (hard; the ``tbmm-report-2026-09`` profile's Juneau gate, what the published
report applied by hand): after the report's unit rule (a value in (10, 100] read as a percentage,
:func:`anchorage.invariants.units.report_percent_reading`) the acceptance must lie in [0, 1] and the
sustainability score on the report's unit scale [0, 1.5]. Kimi K3's 1.5 and 232.2 fail it; 75.8 → 0.758 passes.

Absent, null or non-numeric values are missing evidence (a warning), never a violation. Under ``strict`` the
task's own range invariants (``acceptance_index_range``, ``sustainability_scale_range``: the pinned unit scale)
also penalise, so a 0–100 answer is a hard error there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from anchorage import numbers
from anchorage.invariants.replays import ReplayCheck
from anchorage.invariants.results import GateResult
from anchorage.invariants.units import (
    PERCENT_SCALE,
    REPORT_UNIT_SCALE_MAX,
    Scale,
    declared_scale,
    non_finite,
    report_percent_reading,
)

ANSWER = "experiment_result"
RESTATED = "dynamic_programming.optimal_terminal_policy"


class Field(NamedTuple):
    name: str           # the result names' middle part
    key: str            # the key under experiment_result
    unit: Scale         # the task's unit scale (tests/.../output_schema.json $scored_fields range)
    report: Scale       # where the published report's unit gate wants it after its percentage reading


FIELDS = (
    Field("acceptance", "resident_acceptance_index", (0.0, 1.0), (0.0, 1.0)),
    Field("sustainability", "sustainability_score", (0.0, 1.1), (0.0, REPORT_UNIT_SCALE_MAX)),
)


def _node(data: Mapping[str, Any], path: str) -> Any:
    node: Any = data
    for key in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _value(raw: Any) -> tuple[float | None, bool]:
    """(the number, or None; whether it is a non-finite one such as NaN, ±Infinity or "inf")."""
    reading = numbers.read(raw)
    if reading.kind == "number":
        return reading.number, False
    return None, reading.kind == "non_numeric" and non_finite(raw)


def _inside(value: float, scale: Scale) -> bool:
    return scale[0] <= value <= scale[1]


def _span(scale: Scale) -> str:
    return f"{scale[0]:g}–{scale[1]:g}"


def _result(name: str, path: str, problem: str | None, passed: str, shown: str) -> GateResult:
    if problem is None:
        return GateResult(name=name, form="replay", paths=(path,), status="passed", severity="hard", message=passed,
                          values={path: shown})
    return GateResult(name=name, form="replay", paths=(path,), status="failed", severity="hard",
                      message=f"invalid units: {path} = {shown}: {problem} (seed G.4)", values={path: shown})


def _missing(name: str, path: str, raw: Any) -> GateResult:
    why = "not reported" if raw is None else numbers.read(raw).reason
    return GateResult(name=name, form="replay", paths=(path,), status="missing", severity="warning",
                      message=f"missing evidence: {path}: {why}")


def _seed_units(data: Mapping[str, Any], field: Field) -> GateResult:
    name, path = f"juneau_{field.name}_units", f"{ANSWER}.{field.key}"
    container = _node(data, ANSWER)
    raw = container.get(field.key) if isinstance(container, Mapping) else None
    value, non_finite = _value(raw)
    if value is None and not non_finite:
        return _missing(name, path, raw)
    shown = str(raw) if value is None else f"{value:g}"
    if value is None:
        return _result(name, path, "not finite: it fits no scale", "", shown)
    if value < 0:
        return _result(name, path, "negative: below every scale", "", shown)
    assert isinstance(container, Mapping)
    declared = declared_scale(data, container, field.key, path)
    if declared is not None and not _inside(value, declared[0]):
        return _result(name, path, f"outside the {_span(declared[0])} scale the artifact declares ({declared[1]})",
                       "", shown)
    scale = _scale_of(value, field)
    restated, _ = _value(_node(data, f"{RESTATED}.{field.key}"))
    if scale is not None and restated is not None and restated >= 0:
        other = _scale_of(restated, field)
        if other is not None and other != scale and max(value, restated) >= 10 * min(value, restated):
            return _result(name, path, f"the artifact restates it as {restated:g} ({RESTATED}.{field.key}): "
                                       f"the {scale} scale here, the {other} scale there", "", shown)
    if scale is None:
        return _result(name, path, f"it fits no scale: neither the task's unit scale {_span(field.unit)} nor a "
                                   f"0–100 scale", "", shown)
    how = (f"declared {_span(declared[0])} ({declared[1]})" if declared is not None else
           "the unit scale" if scale == "unit" else
           "a 0–100 scale (a percentage or utility: not wrong under a schema that does not pin the range, seed F.1)")
    return _result(name, path, None, f"{path} = {value:g} fits {how}", shown)


def _scale_of(value: float, field: Field) -> str | None:
    if _inside(value, field.unit):
        return "unit"
    if _inside(value, PERCENT_SCALE):
        return "0–100"
    return None


def _report_units(data: Mapping[str, Any], field: Field) -> GateResult:
    name, path = f"juneau_report_{field.name}_units", f"{ANSWER}.{field.key}"
    raw = _node(data, path)
    value, non_finite = _value(raw)
    if value is None and not non_finite:
        return _missing(name, path, raw)
    if value is None:
        return _result(name, path, "not finite", "", str(raw))
    read = report_percent_reading(value)
    shown = f"{value:g}" + (f" (read as {read:g})" if read != value else "")
    if not _inside(read, field.report):
        return _result(name, path, f"outside {_span(field.report)} after the report's percentage reading "
                                   "(the unit gate of reports/full-report.md at 4a3807d)", "", shown)
    return _result(name, path, None, f"{path} = {shown}: within {_span(field.report)} (the report's unit gate)",
                   shown)


def juneau_units(data: Mapping[str, Any]) -> list[GateResult]:
    """The seed's unit check and the report's, per index (see the module docstring)."""
    return [*(_seed_units(data, f) for f in FIELDS), *(_report_units(data, f) for f in FIELDS)]


CHECK = ReplayCheck("juneau_units", juneau_units)
