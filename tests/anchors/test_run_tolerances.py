"""The per-field run tolerances of the reproductions (``anchorage.scoring.rerun``) on the committed results.

A run whose numbers moved inside their tolerance (declared in ``solution/comparison.json``, else the 1e-6
relative default) agrees with the committed result; one number moved beyond its tolerance is reported, by path
and with the tolerance it broke; a declaration naming no number, or a negative or unexplained tolerance, is
refused with every problem listed; a tolerance wide enough to carry a value across an anchor's tolerance or a
gate is caught by the band check.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from anchorage.errors import InputError
from anchorage.scoring.reproduction import outcome, scorer_reads
from anchorage.scoring.rerun import DEFAULT, band_flips, declared

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"
SLUGS = sorted(p.parent.parent.name for p in TASKS.glob("*/solution/solve.sh"))
SIC = "cumcm-2025-b-sic-thickness"


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def committed_and_comparison(slug: str) -> tuple[Any, dict[str, Any]]:
    solution = TASKS / slug / "solution"
    return read_json(solution / "reproduced_result.json"), read_json(solution / "comparison.json")


def numbers(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], float]]:
    """Every finite float of ``data`` with its path (walked here, independently of the module under test)."""
    if isinstance(data, dict):
        return [n for key, value in data.items() for n in numbers(value, (*path, key))]
    if isinstance(data, list):
        return [n for index, value in enumerate(data) for n in numbers(value, (*path, index))]
    return [(path, data)] if isinstance(data, float) and math.isfinite(data) else []


def moved(data: Any, changes: dict[tuple[Any, ...], Any]) -> Any:
    out = json.loads(json.dumps(data))
    for path, value in changes.items():
        node = out
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return out


def dotted(path: tuple[Any, ...]) -> str:
    return "$" + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path)


@pytest.mark.parametrize("slug", SLUGS)
def test_every_number_moved_to_the_edge_of_its_tolerance_still_agrees(slug: str) -> None:
    committed, comparison = committed_and_comparison(slug)
    tolerances = declared(comparison, committed)
    changes: dict[tuple[Any, ...], float] = {}
    for index, (path, value) in enumerate(numbers(committed)):
        if any(path[:len(v)] == v for v in tolerances.volatile):
            continue
        tolerance = tolerances.tolerance_at(path)
        allowed = max(tolerance.abs, tolerance.rel * abs(value))
        changes[path] = value + (0.99 if index % 2 else -0.99) * allowed
    perturbed = moved(committed, changes)
    assert perturbed != committed
    assert tolerances.differences(perturbed, committed) == []


@pytest.mark.parametrize("slug", SLUGS)
def test_a_number_moved_beyond_its_tolerance_is_reported(slug: str) -> None:
    """A scored metric where there is one (else the first number), moved 1.5 times its tolerance."""
    committed, comparison = committed_and_comparison(slug)
    tolerances = declared(comparison, committed)
    scored = {m["path"] for m in comparison["metrics"] if m["weight"] > 0 and m["reproduced"] is not None}
    candidates = [(p, v) for p, v in numbers(committed) if not any(p[:len(n)] == n for n in tolerances.volatile)]
    path, value = next(((p, v) for p, v in candidates if dotted(p)[2:] in scored), candidates[0])
    tolerance = tolerances.tolerance_at(path)
    beyond = value + 1.5 * max(tolerance.abs, tolerance.rel * abs(value))
    if beyond == value:     # an exact field (tolerance 0): one unit in the last place is already beyond
        beyond = math.nextafter(value, math.inf)
    differences = tolerances.differences(moved(committed, {path: beyond}), committed)
    assert [d.path for d in differences] == [dotted(path)]
    assert f"{beyond!r} != {value!r}" in str(differences[0]) and "allowed" in str(differences[0])


def test_a_declared_tolerance_admits_what_the_default_refuses_and_no_more() -> None:
    """SiC's initial thickness (an ill-conditioned baseline solve, printed to 4 decimals): a flip of its last
    digit passes under its declaration, not under the default; three units do not pass."""
    committed, comparison = committed_and_comparison(SIC)
    tolerances = declared(comparison, committed)
    path = ("single_angle_fits", 0, "initial_thickness_um")
    value = committed["single_angle_fits"][0]["initial_thickness_um"]
    assert tolerances.tolerance_at(path) is not DEFAULT
    flipped = moved(committed, {path: round(value + 1e-4, 4)})
    assert tolerances.differences(flipped, committed) == []
    default_only = declared({}, committed)
    assert [d.path for d in default_only.differences(flipped, committed)] == [dotted(path)]
    far = tolerances.differences(moved(committed, {path: round(value + 3e-4, 4)}), committed)
    assert [d.path for d in far] == [dotted(path)]
    assert "single_angle_fits[*].initial_thickness_um" in str(far[0])


def test_what_is_not_a_number_must_be_equal() -> None:
    committed, comparison = committed_and_comparison(SIC)
    tolerances = declared(comparison, committed)
    changed = moved(committed, {("selected_model", "Si"): "two-beam"})
    changed["extra"] = 1
    del changed["experiment_result"]["multi_beam_samples"]
    reported = [str(d) for d in tolerances.differences(changed, committed)]
    assert any(r.startswith("$: keys differ") for r in reported)
    changed = moved(committed, {("selected_model", "Si"): "two-beam", ("experiment_result", "multi_beam_samples"): []})
    assert [d.path for d in tolerances.differences(changed, committed)] == \
        ["$.selected_model.Si", "$.experiment_result.multi_beam_samples"]


def test_volatile_paths_are_not_compared() -> None:
    committed, comparison = committed_and_comparison(SIC)
    assert "cpu_seconds" in comparison["volatile"]
    changed = moved(committed, {("cpu_seconds",): committed["cpu_seconds"] * 10})
    assert declared(comparison, committed).differences(changed, committed) == []
    assert [d.path for d in declared({}, committed).differences(changed, committed)] == ["$.cpu_seconds"]


@pytest.mark.parametrize(("entry", "problem"), [
    ({"path": "single_angle_fits[*].no_such_field", "rel": 0, "abs": 1e-4, "why": "x"}, "names nothing"),
    ({"path": "selected_model.Si", "rel": 0, "abs": 1e-4, "why": "x"}, "names no number"),
    ({"path": "cpu_seconds", "rel": -1e-3, "abs": 0, "why": "x"}, "'rel' is negative"),
    ({"path": "cpu_seconds", "rel": 0, "abs": "0.1", "why": "x"}, "'abs' must be a finite number"),
    ({"path": "cpu_seconds", "rel": 0, "abs": float("inf"), "why": "x"}, "'abs' must be a finite number"),
    ({"path": "cpu_seconds", "rel": 0, "abs": 0, "why": " "}, "'why' is empty"),
    ({"path": "cpu_seconds", "rel": 0, "why": "x"}, "missing key(s) abs"),
    ({"path": "cpu_seconds", "rel": 0, "abs": 0, "why": "x", "rtol": 1}, "unknown key(s) rtol"),
    ({"path": "a..b[", "rel": 0, "abs": 0, "why": "x"}, "malformed JSON path"),
    ("cpu_seconds", "an object {path, rel, abs, why} was expected"),
])
def test_a_bad_declaration_is_refused_saying_what_and_where(entry: Any, problem: str) -> None:
    committed, _ = committed_and_comparison(SIC)
    with pytest.raises(InputError) as caught:
        declared({"tolerances": [entry]}, committed, "tasks/x/solution/comparison.json")
    message = str(caught.value)
    assert "tasks/x/solution/comparison.json" in message and "tolerances[0]" in message and problem in message


def test_every_problem_of_a_declaration_is_listed_at_once() -> None:
    committed, _ = committed_and_comparison(SIC)
    declaration = {"tolerances": [
        {"path": "single_angle_fits[*].period_cm_minus_1", "rel": 1e-3, "abs": 0, "why": "x"},
        {"path": "single_angle_fits[0].period_cm_minus_1", "rel": 1e-3, "abs": 0, "why": "y"},
        {"path": "nothing.here", "rel": -1, "abs": 0, "why": "z"}], "volatile": ["no_such_timing"]}
    with pytest.raises(InputError) as caught:
        declared(declaration, committed)
    message = str(caught.value)
    assert "tolerances[1] ('single_angle_fits[0].period_cm_minus_1'): single_angle_fits[0].period_cm_minus_1 is " \
           "already covered by 'single_angle_fits[*].period_cm_minus_1'" in message
    assert "tolerances[2]" in message and "'rel' is negative" in message and "names nothing" in message
    assert "volatile[0] ('no_such_timing'): names nothing" in message
    with pytest.raises(InputError, match="'tolerances' must be a list"):
        declared({"tolerances": {"cpu_seconds": 1}}, committed)


def test_the_nearest_declared_node_wins() -> None:
    committed, _ = committed_and_comparison(SIC)
    tolerances = declared({"tolerances": [
        {"path": "single_angle_fits", "rel": 1e-2, "abs": 0, "why": "outer"},
        {"path": "single_angle_fits[1].period_cm_minus_1", "rel": 0, "abs": 0, "why": "inner"}]}, committed)
    assert tolerances.tolerance_at(("single_angle_fits", 1, "period_cm_minus_1")).why == "inner"
    assert tolerances.tolerance_at(("single_angle_fits", 0, "period_cm_minus_1")).why == "outer"
    assert tolerances.tolerance_at(("experiment_result", "si_recommended_thickness_um")) is DEFAULT


def flips_with(slug: str, extra: list[dict[str, Any]]) -> list[str]:
    committed, comparison = committed_and_comparison(slug)
    replaced = {e["path"] for e in extra}
    kept = [e for e in comparison.get("tolerances", []) if e["path"] not in replaced]
    comparison = {**comparison, "tolerances": [*kept, *extra]}
    task = str(TASKS / slug)
    return band_flips(committed, declared(comparison, committed), lambda data: outcome(task, data),
                      scorer_reads(task, committed))


def test_a_tolerance_that_reaches_past_the_anchors_tolerance_is_caught() -> None:
    """SiC's Si thickness is 3.5767 against the anchor 3.7899 (tolerance 12 %: 3.335-4.245): a 10 % band
    reaches below 3.335, where the metric is no longer reproduced and the verdict changes."""
    path = "experiment_result.si_recommended_thickness_um"
    flips = flips_with(SIC, [{"path": path, "rel": 0.10, "abs": 0, "why": "too wide"}])
    assert flips and any(f"metric {path} ('scored', True, False) -> ('scored', False, False)" in f for f in flips)
    assert any("verdict 'reproduces' -> 'close'" in f or "verdict 'reproduces' -> 'disagrees'" in f for f in flips)
    assert flips_with(SIC, [{"path": path, "rel": 0.05, "abs": 0, "why": "still inside"}]) == []


def test_a_tolerance_that_carries_a_gate_input_across_its_bound_is_caught() -> None:
    """Crop planting's MILP profit equals its dual bound (solved to optimality): one yuan of tolerance on the
    profit would let a run exceed the bound, which the strict profiles' hard gate refuses."""
    flips = flips_with("cumcm-2024-c-crop-planting", [
        {"path": "experiment_result.q1.discount_profit_yuan", "rel": 0, "abs": 1.0, "why": "too wide"}])
    assert any("gate q1_discount_bound_ordering 'passed' -> 'failed'" in f for f in flips)


def test_a_volatile_field_the_scorer_reads_is_caught() -> None:
    committed, comparison = committed_and_comparison(SIC)
    comparison = {**comparison, "volatile": [*comparison["volatile"], "experiment_result.sic_recommended_thickness_um"]}
    task = str(TASKS / SIC)
    flips = band_flips(committed, declared(comparison, committed), lambda data: outcome(task, data),
                       scorer_reads(task, committed))
    assert flips == ["experiment_result.sic_recommended_thickness_um is read by the scorer but declared volatile "
                     "(never compared): a run could change its score"]
