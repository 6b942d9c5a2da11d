"""Replay check for CUMCM 2023 A (heliostat field): the design constraints of the statement.

Declared as ``heliostat_design`` (``CHECK``) and named in the task's ``tests/invariants.yaml``; run by
:func:`anchorage.invariants.gates.check`. For every designed field (rows of
``reproduced.design_summary`` for q2 and q3, and the paper targets of q2/q3) it checks, exactly:

* rated power: annual mean thermal output ≥ 60 MW (the statement's rated power);
* mirror sides in [2, 8] m, width ≥ height;
* installation height in [2, 6] m and at least half the mirror height (the mirror must clear the
  ground when it turns about its horizontal axis);
* total mirror area = count × width × height within max(1 m², 1 %).

A field that is absent or not a finite number (the variable-size q3 design reports NaN sides) is
missing evidence, never a violation.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from anchorage.invariants.exact import to_fraction
from anchorage.invariants.replays import ReplayCheck
from anchorage.invariants.results import GateResult

RATED_POWER_MW = Fraction(60)
SIDE_RANGE = (Fraction(2), Fraction(8))
HEIGHT_RANGE = (Fraction(2), Fraction(6))
AREA_ABS_TOL, AREA_REL_TOL = Fraction(1), Fraction(1, 100)
_DESIGN_QUESTIONS = ("q2", "q3")


def _designs(data: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(JSON path prefix, record) of every designed field in the artifact."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    rows = data.get("reproduced", {}).get("design_summary") if isinstance(data.get("reproduced"), Mapping) else None
    if isinstance(rows, list):
        for index, row in enumerate(rows):
            if isinstance(row, Mapping) and row.get("question") in _DESIGN_QUESTIONS:
                found.append((f"reproduced.design_summary[{index}]", row))
    targets = data.get("paper_targets")
    if isinstance(targets, Mapping):
        for question in _DESIGN_QUESTIONS:
            if isinstance(targets.get(question), Mapping):
                found.append((f"paper_targets.{question}", targets[question]))
    return found


def _result(name: str, paths: list[str], ok: bool | None, message: str, values: dict[str, Any]) -> GateResult:
    if ok is None:
        return GateResult(name=name, form="replay", paths=tuple(paths), status="missing", severity="warning",
                          message=f"missing evidence: {message}")
    return GateResult(name=name, form="replay", paths=tuple(paths), status="passed" if ok else "failed",
                      message=message, values=values)


def _read(record: Mapping[str, Any], key: str) -> Fraction | None:
    return to_fraction(record.get(key))


def _check_record(prefix: str, record: Mapping[str, Any], tag: str) -> list[GateResult]:
    p = {key: f"{prefix}.{key}" for key in ("annual_thermal_power_mw", "mirror_width_m", "mirror_height_m",
                                             "installation_height_m", "mirror_count", "mirror_area_m2")}
    power = _read(record, "annual_thermal_power_mw")
    width, height = _read(record, "mirror_width_m"), _read(record, "mirror_height_m")
    install = _read(record, "installation_height_m")
    count, area = _read(record, "mirror_count"), _read(record, "mirror_area_m2")
    out: list[GateResult] = []
    out.append(_result(f"heliostat_{tag}_rated_power", [p["annual_thermal_power_mw"]],
                       None if power is None else power >= RATED_POWER_MW,
                       _msg(power, f"annual thermal power {_f(power)} MW ≥ 60 MW (rated power)", p["annual_thermal_power_mw"]),
                       {"annual_thermal_power_mw": _f(power)}))
    for key, side in (("mirror_width_m", width), ("mirror_height_m", height)):
        out.append(_result(f"heliostat_{tag}_{key}", [p[key]],
                           None if side is None else SIDE_RANGE[0] <= side <= SIDE_RANGE[1],
                           _msg(side, f"mirror side {_f(side)} m in [2, 8] m", p[key]), {key: _f(side)}))
    both = width is not None and height is not None
    out.append(_result(f"heliostat_{tag}_width_ge_height", [p["mirror_width_m"], p["mirror_height_m"]],
                       (width >= height) if both else None,  # type: ignore[operator]
                       f"mirror width {_f(width)} m ≥ height {_f(height)} m" if both else "mirror width or height not reported",
                       {"mirror_width_m": _f(width), "mirror_height_m": _f(height)}))
    out.append(_result(f"heliostat_{tag}_installation_height", [p["installation_height_m"]],
                       None if install is None else HEIGHT_RANGE[0] <= install <= HEIGHT_RANGE[1],
                       _msg(install, f"installation height {_f(install)} m in [2, 6] m", p["installation_height_m"]),
                       {"installation_height_m": _f(install)}))
    clear = install is not None and height is not None
    out.append(_result(f"heliostat_{tag}_ground_clearance", [p["installation_height_m"], p["mirror_height_m"]],
                       (2 * install >= height) if clear else None,  # type: ignore[operator]
                       f"installation height {_f(install)} m ≥ half the mirror height {_f(height)} m" if clear
                       else "installation height or mirror height not reported",
                       {"installation_height_m": _f(install), "mirror_height_m": _f(height)}))
    out.append(_area(tag, p, count, width, height, area))
    return out


def _area(tag: str, p: dict[str, str], count: Fraction | None, width: Fraction | None, height: Fraction | None,
          area: Fraction | None) -> GateResult:
    paths = [p["mirror_count"], p["mirror_width_m"], p["mirror_height_m"], p["mirror_area_m2"]]
    if count is None or width is None or height is None or area is None:
        return _result(f"heliostat_{tag}_area", paths, None, "mirror count, sides or total area not reported", {})
    computed = count * width * height
    tol = max(AREA_ABS_TOL, AREA_REL_TOL * abs(computed))
    ok = abs(area - computed) <= tol
    return _result(f"heliostat_{tag}_area", paths, ok,
                   f"total mirror area {_f(area)} m² = count × width × height = {_f(computed)} m² within {_f(tol)} m²",
                   {"mirror_area_m2": _f(area), "count_x_width_x_height": _f(computed)})


def _msg(value: Fraction | None, claim: str, path: str) -> str:
    return claim if value is not None else f"{path} not reported as a finite number"


def _f(value: Fraction | None) -> str | None:
    if value is None:
        return None
    return str(value.numerator) if value.denominator == 1 else f"{float(value):.10g}"


def heliostat_design(data: Mapping[str, Any]) -> list[GateResult]:
    """Design constraints of every q2/q3 heliostat field in the artifact."""
    designs = _designs(data)
    if not designs:
        return [_result("heliostat_design", ["reproduced.design_summary"], None, "no q2/q3 design reported", {})]
    out: list[GateResult] = []
    for prefix, record in designs:
        tag = prefix.replace("reproduced.design_summary", "design").replace("paper_targets.", "target_")
        tag = tag.replace("[", "").replace("]", "").replace(".", "_")
        results = _check_record(prefix, record, tag)
        if prefix.startswith("paper_targets"):  # targets list only some fields: check those present
            results = [r for r in results if r.status != "missing" or any(q.rsplit(".", 1)[1] in record for q in r.paths)]
        out.extend(results)
    return out


CHECK = ReplayCheck("heliostat_design", heliostat_design)
