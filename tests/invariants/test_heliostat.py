"""The heliostat replay check: rated power, mirror sides, width ≥ height, installation height, area."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from anchorage.invariants.replays import get

from .anchors import anchor, anchor_path

SLUG = "cumcm-2023-a-heliostat-field"


def _run(data: Any) -> dict[str, Any]:
    return {r.name: r for r in get("heliostat_design").run(data)}


@pytest.fixture
def design() -> dict[str, Any]:
    if not anchor_path(SLUG).is_file():
        pytest.skip("heliostat anchor not found")
    return anchor(SLUG)


def test_anchor_passes(design: dict[str, Any]) -> None:
    results = _run(design)
    assert not [r for r in results.values() if r.status == "failed"]
    assert results["heliostat_design1_area"].status == "passed"
    assert results["heliostat_design2_mirror_width_m"].status == "missing"  # variable sizes: NaN


@pytest.mark.parametrize(("field", "value", "rejected_by"), [
    ("annual_thermal_power_mw", 59.9, "heliostat_design1_rated_power"),
    ("mirror_width_m", 1.5, "heliostat_design1_mirror_width_m"),
    ("mirror_height_m", 8.5, "heliostat_design1_mirror_height_m"),
    ("installation_height_m", 6.5, "heliostat_design1_installation_height"),
    ("mirror_area_m2", 100000, "heliostat_design1_area"),
], ids=["power", "width", "height", "installation", "area"])
def test_violations_are_rejected(design: dict[str, Any], field: str, value: Any, rejected_by: str) -> None:
    broken = copy.deepcopy(design)
    broken["reproduced"]["design_summary"][1][field] = value
    failed = {name for name, r in _run(broken).items() if r.hard_error}
    assert rejected_by in failed


def test_width_below_height_and_area_tolerance() -> None:
    row = {"question": "q2", "annual_thermal_power_mw": 61, "mirror_width_m": 4, "mirror_height_m": 5,
           "installation_height_m": 3, "mirror_count": 100, "mirror_area_m2": 2000.9}
    results = _run({"reproduced": {"design_summary": [row]}})
    assert results["heliostat_design0_width_ge_height"].hard_error
    assert results["heliostat_design0_area"].status == "passed"  # |2000.9 - 2000| ≤ max(1, 20)
    tiny = dict(row, mirror_width_m=5, mirror_count=1, mirror_area_m2=26.5)  # 25 ± max(1, 0.25)
    assert _run({"reproduced": {"design_summary": [tiny]}})["heliostat_design0_area"].hard_error


def test_empty_artifact_is_missing_evidence_only() -> None:
    for data in ({}, {"reproduced": {"design_summary": []}}, {"reproduced": "x"}):
        results = get("heliostat_design").run(data)
        assert results and all(r.status == "missing" and r.severity == "warning" for r in results)
