"""Gate contracts (SPEC §5): coverage 18/18, every anchor passes its own checks, synthetic violations
are rejected for the right reason, and no check hard-fails an empty artifact."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anchorage.invariants import replays
from anchorage.invariants.gates import check, hard_errors
from anchorage.invariants.replays import ReplayCheck
from anchorage.invariants.results import GateResult
from anchorage.invariants.spec import load_invariants
from anchorage.tasks.profiles import load_profiles

from .anchors import SLUGS, TASKS, anchor, anchor_path


@pytest.mark.parametrize("slug", SLUGS)
def test_coverage_every_task_has_invariants(slug: str) -> None:
    spec = load_invariants(TASKS / slug)
    assert spec is not None, f"tasks/{slug}/tests/invariants.yaml is missing"
    assert spec.invariants, f"{slug} declares no invariants"


# Warnings an anchor is known to trip, each a documented caveat of the task (never a hard error).
KNOWN_ANCHOR_WARNINGS: set[tuple[str, str]] = {
    ("cumcm-2025-a-smoke-screen", "smoke_q5_whole_target_replay"),  # the published FY3 clouds hide the whole
    # target for 0.8-1.2 s of their claimed 3.4-3.5 s (erratum); the seed's coverage replay passes them
}
# Project gates (hard under the strict and errata profiles only) that a published anchor fails: each is the
# reason of an erratum in the task's tests/profiles.yaml (the paper profile reports them as warnings).
KNOWN_STRICT_DIFFERENCES: set[tuple[str, str]] = {("cumcm-2025-a-smoke-screen", "smoke_q5_one_heading")}


@pytest.mark.parametrize("slug", SLUGS)
def test_every_anchor_passes_its_own_checks(slug: str) -> None:
    if not anchor_path(slug).is_file():
        pytest.skip(f"no anchor for {slug} (neither tasks/ nor the reference pack)")
    results = check(TASKS / slug, anchor(slug))
    assert results, slug
    declared = load_profiles(TASKS / slug)
    seed_class = [f"{r.name}: {r.message}" for r in hard_errors(results) if declared.paper_gate(r.name)]
    assert not seed_class, seed_class
    project = {(slug, r.name) for r in hard_errors(results) if not declared.paper_gate(r.name)}
    assert project <= KNOWN_STRICT_DIFFERENCES, project - KNOWN_STRICT_DIFFERENCES
    for _, name in project:
        assert name in (declared.anchors.errata[0].check if declared.anchors.errata else ""), name
    warned = {(slug, r.name) for r in results if r.status == "failed" and r.severity == "warning"}
    assert warned <= KNOWN_ANCHOR_WARNINGS, warned - KNOWN_ANCHOR_WARNINGS
    assert sum(r.status == "passed" for r in results) >= len(results) // 2


@pytest.mark.parametrize("empty", [{}, [], None, "", "not json", {"experiment_result": {}}], ids=repr)
@pytest.mark.parametrize("slug", SLUGS)
def test_no_check_hard_fails_an_empty_artifact(slug: str, empty: Any) -> None:
    results = check(TASKS / slug, empty)
    assert results
    assert not hard_errors(results)
    assert all(r.status == "missing" and r.severity == "warning" for r in results), [
        r for r in results if r.status != "missing"]


def test_no_invariants_file_means_no_gates(tmp_path: Path) -> None:
    assert check(tmp_path, {"x": 1}) == []


def _task(tmp_path: Path, invariants: str) -> Path:
    (tmp_path / "tests").mkdir(parents=True, exist_ok=True)
    (tmp_path / "tests" / "invariants.yaml").write_text(invariants, encoding="utf-8")
    return tmp_path


SYNTHETIC = """namespace: Synthetic
invariants:
  - {name: p, form: range, path: "probs[*]", lo: 0, hi: 1}
  - {name: order, form: ordering, lhs: "rows[*].mean", rhs: "rows[*].q95"}
  - {name: ratio, form: identity, product: [head, ratio], target: 2, rel_tol: 0.01}
  - {name: bit, form: finite_domain, path: "bits[*]", values: [0, 1]}
  - {name: thick, form: sign, path: thickness, op: ">"}
  - {name: ci, form: interval, lo: ci.lo, hi: ci.hi}
  - {name: soft, form: sign, path: soft, op: ">=", severity: warning}
"""

GOOD: dict[str, Any] = {"probs": [0, 0.5, 1], "rows": [{"mean": 0.1, "q95": 0.2}], "head": 1.246266,
                        "ratio": 1.604793, "bits": [0, 1], "thickness": 3.79, "ci": {"lo": -1, "hi": 2}, "soft": 1}


@pytest.mark.parametrize(("change", "rejected_by", "path"), [
    ({"probs": [0, 1.0000001]}, "p_1_range", "probs[1]"),
    ({"rows": [{"mean": 0.2, "q95": 0.1}]}, "order_0_ordering", "rows[0].q95"),
    ({"head": 1.406276}, "ratio_identity", "head"),
    ({"ratio": 1.422195}, "ratio_identity", "ratio"),
    ({"bits": [0, 2]}, "bit_1_finite_domain", "bits[1]"),
    ({"thickness": 0}, "thick_sign", "thickness"),
    ({"ci": {"lo": 3, "hi": 2}}, "ci_interval", "ci.hi"),
], ids=["range", "ordering", "identity-head", "identity-ratio", "finite-domain", "sign", "interval"])
def test_synthetic_violations_are_rejected_for_the_right_reason(
        tmp_path: Path, change: dict[str, Any], rejected_by: str, path: str) -> None:
    task = _task(tmp_path, SYNTHETIC)
    assert not hard_errors(check(task, GOOD))
    errors = hard_errors(check(task, {**GOOD, **change}))
    assert [e.name for e in errors] == [rejected_by]
    assert path in errors[0].paths
    assert "violated" in errors[0].message


def test_warning_severity_never_hard_fails_and_missing_is_a_warning(tmp_path: Path) -> None:
    task = _task(tmp_path, SYNTHETIC)
    results = {r.name: r for r in check(task, {**GOOD, "soft": -1, "thickness": "3.79 mm"})}
    assert results["soft_sign"].status == "failed" and not results["soft_sign"].hard_error
    assert results["thick_sign"].status == "missing" and results["thick_sign"].severity == "warning"
    assert "not a finite number" in results["thick_sign"].message
    quoted = {r.name: r for r in check(task, {**GOOD, "thickness": "-3.79"})}  # quoted: a number, checked
    assert quoted["thick_sign"].status == "failed"


def test_empty_scenario_is_missing_evidence(tmp_path: Path) -> None:
    task = _task(tmp_path, SYNTHETIC)
    results = {r.name: r for r in check(task, {**GOOD, "bits": []})}
    assert results["bit_finite_domain"].status == "missing"
    assert "empty scenario" in results["bit_finite_domain"].message


def test_text_decimal_and_float_inputs_agree(tmp_path: Path) -> None:
    task = _task(tmp_path, SYNTHETIC)
    text = json.dumps({**GOOD, "probs": [0.1, 1.0000000000000002]})
    by_text = [r.to_dict() for r in check(task, text)]
    by_float = [r.to_dict() for r in check(task, json.loads(text))]
    by_decimal = [r.to_dict() for r in check(task, json.loads(text, parse_float=Decimal))]
    assert by_text == by_float == by_decimal
    assert any(r["name"] == "p_1_range" and r["status"] == "failed" for r in by_text)


def test_exactness_at_the_boundary(tmp_path: Path) -> None:
    """1.98 exactly is inside the 2 ± 1 % band; one unit in the 12th digit below is outside."""
    task = _task(tmp_path, SYNTHETIC)
    on_edge = check(task, '{"head": 1.98, "ratio": 1}')
    below = check(task, '{"head": 1.979999999999, "ratio": 1}')
    assert {r.name: r.status for r in on_edge}["ratio_identity"] == "passed"
    assert {r.name: r.status for r in below}["ratio_identity"] == "failed"


def _exploding(data: Any) -> list[GateResult]:
    raise ZeroDivisionError("boom")


def test_a_crashing_or_unknown_replay_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(replays.CHECKS, "test_exploding_replay", ReplayCheck("test_exploding_replay", _exploding))
    task = _task(tmp_path, "namespace: R\nreplay: [test_exploding_replay, no_such_replay]\n")
    results = check(task, {"a": 1})
    assert [r.status for r in results] == ["missing", "missing"]
    assert not hard_errors(results)
    assert "ZeroDivisionError" in results[0].message and "unknown replay check" in results[1].message


def test_dragon_identity_holds_for_the_corrected_anchor_and_rejects_the_paper_value() -> None:
    dragon = TASKS / "cumcm-2024-a-dragon-dance"
    corrected = {"experiment_result": {"q5": {"max_head_speed_mps": Decimal("1.246266"),
                                              "max_speed_ratio_when_head_1mps": Decimal("1.604793")}}}
    results = {r.name: r for r in check(dragon, corrected)}
    assert results["q5_head_ratio_identity"].status == "passed"
    paper = {"experiment_result": {"q5": {"max_head_speed_mps": Decimal("1.406276"),
                                          "max_speed_ratio_when_head_1mps": Decimal("1.604793")}}}
    failed = {r.name: r for r in check(dragon, paper)}["q5_head_ratio_identity"]
    assert failed.hard_error and "2.02" in failed.message


@pytest.mark.parametrize("slug", SLUGS)
def test_every_named_replay_check_is_declared(slug: str) -> None:
    spec = load_invariants(TASKS / slug)
    assert spec is not None
    for name in spec.replay:
        assert replays.get(name).name == name


def test_the_replay_checks_are_what_the_modules_declare() -> None:
    import importlib
    import pkgutil

    modules = [importlib.import_module(f"{replays.__name__}.{m.name}") for m in pkgutil.iter_modules(replays.__path__)]
    assert sorted(replays.CHECKS) == sorted(m.CHECK.name for m in modules)
    with pytest.raises(KeyError, match="unknown replay check 'nope'; known: crop_planting_revenue, dragon_dance_speed"):
        replays.get("nope")


def test_two_checks_of_one_name_are_an_error() -> None:
    from anchorage.registry import by_name

    twice = [ReplayCheck("twice", _exploding), ReplayCheck("twice", lambda data: [])]
    with pytest.raises(ValueError, match="replay check 'twice' is declared twice"):
        by_name(twice, "replay check")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["experiment_result", "q5", "q3", "q4", "decision_bits", "posterior_rows",
                         "max_head_speed_mps", "max_speed_ratio_when_head_1mps", "x"]), children, max_size=4),
    max_leaves=20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_JSON)
def test_arbitrary_json_never_crashes_the_gates(data: Any) -> None:
    for slug in ("cumcm-2024-a-dragon-dance", "cumcm-2024-b-production-decision"):
        for result in check(TASKS / slug, data):
            assert result.status in ("passed", "failed", "missing")
            if result.status == "missing":
                assert result.severity == "warning"
