"""F from a baseline artifact / score record / value, the hard-gate penalty, and artifact recovery."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from anchorage.errors import InputError
from anchorage.invariants.results import GateResult
from anchorage.scoring import score_artifact, scorer

from .conftest import TaskFactory

METRICS = [{"path": "v", "oracle_value": 10.0, "direction": "higher_is_better"},
           {"path": "w", "oracle_value": 1.0, "direction": "target_value", "weight": 3.0}]
EXPECTED = {"v": 10.0, "w": 1.0}


@pytest.fixture
def task(make_task: TaskFactory) -> Path:
    return make_task(METRICS, EXPECTED, baseline_endpoint={"panel_score": 0.25})


def test_record_is_recomputable_by_hand(task: Path, write_json: Callable[..., Path]) -> None:
    record = score_artifact(task, write_json({"v": 8.8, "w": 1.12}))
    # v: 1/(1 + 1.2/1.2) = 0.5 (weight 1); w: 1/(1 + 0.12/0.12) = 0.5 (weight 3) -> R = 0.5
    assert [m.reward for m in record.metrics] == [pytest.approx(0.5), pytest.approx(0.5)]
    assert record.raw == pytest.approx(0.5)
    assert (record.oracle_raw, record.baseline_raw, record.baseline_source) == \
        (1.0, 0.25, "config:baseline_endpoint.panel_score")
    assert record.o_eval == pytest.approx(0.5)
    assert record.bo_eval == pytest.approx((0.5 - 0.25) / 0.75) and record.bo_branch == "normalized"
    d = record.to_dict()
    for key in ("raw", "oracle_raw", "baseline_raw", "baseline_source", "o_eval", "bo_eval", "gradable",
                "scorer_version", "recovered_from", "metrics", "gates", "obligations", "error"):
        assert key in d
    assert d["obligations"] == {} and d["gates"] == []
    m = d["metrics"][1]
    assert (m["path"], m["value"], m["anchor"], m["weight"], m["rel_scale"], m["abs_scale"], m["mode"]) == \
        ("w", 1.12, 1.0, 3.0, 0.12, 1e-6, "legacy_target_distance_to_outstanding")


def test_baseline_from_artifact(task: Path, write_json: Callable[..., Path]) -> None:
    base = write_json({"v": 8.8, "w": 1.0}, "base.json")      # R = (0.5 + 3) / 4 = 0.875
    record = score_artifact(task, write_json(EXPECTED), baseline=base)
    assert record.baseline_raw == pytest.approx(0.875)
    assert record.baseline_source == f"artifact:{base}"
    assert record.bo_branch == "normalized" and record.bo_eval == pytest.approx(1.0)


def test_baseline_with_small_gap_uses_the_clipped_difference(task: Path, write_json: Callable[..., Path]) -> None:
    base = write_json({"v": 10.0, "w": 1.0}, "base.json")      # F = 1.0 = O
    record = score_artifact(task, write_json({"v": 8.8, "w": 1.0}), baseline=base)
    assert record.bo_branch == "small_gap" and record.bo_eval == pytest.approx(-0.10)


def test_baseline_from_score_record(task: Path, write_json: Callable[..., Path], tmp_path: Path) -> None:
    base_record = score_artifact(task, write_json({"v": 8.8, "w": 1.12}, "b.json"))
    path = tmp_path / "score.json"
    path.write_text(json.dumps(base_record.to_dict()))
    record = score_artifact(task, write_json(EXPECTED), baseline=path)
    assert record.baseline_raw == pytest.approx(0.5) and record.baseline_source == f"score_record:{path}"
    assert score_artifact(task, write_json(EXPECTED), baseline=base_record).baseline_raw == pytest.approx(0.5)
    assert score_artifact(task, write_json(EXPECTED), baseline=0.4).baseline_source == "value"


def test_baseline_errors(task: Path, write_json: Callable[..., Path], tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        score_artifact(task, write_json(EXPECTED), baseline=tmp_path / "nope.json")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"task": "another-task", "raw": 0.3, "scorer_version": "x"}))
    with pytest.raises(InputError, match="another-task"):
        score_artifact(task, write_json(EXPECTED), baseline=other)


def test_ungradable_baseline_artifact_counts_as_zero(task: Path, write_json: Callable[..., Path]) -> None:
    bad = write_json("[1]", "bad.json")
    record = score_artifact(task, write_json(EXPECTED), baseline=bad)
    assert record.baseline_raw == 0.0 and "ungradable" in record.baseline_source


def _fake_gates(results: list[GateResult]) -> Callable[[], Callable[[Path, Any], list[GateResult]]]:
    return lambda: (lambda root, data: results)


def test_hard_gate_penalty(task: Path, write_json: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    hard = GateResult(name="speed_pos", form="sign", paths=("v",), status="failed", message="v > 0 violated")
    monkeypatch.setattr(scorer, "_gate_checker", _fake_gates([hard]))
    record = score_artifact(task, write_json(EXPECTED), profile="strict")
    assert (record.raw, record.raw_before_gates, record.o_eval, record.bo_eval) == (0.0, 1.0, 0.0, -1.0)
    assert record.hard_gate_failed and "speed_pos" in record.penalty and record.profile == "strict"
    assert record.to_dict()["gates"][0]["hard_error"] is True
    skipped = score_artifact(task, write_json(EXPECTED), gates=False, profile="strict")
    assert skipped.raw == 1.0 and skipped.gates == []


def test_project_gate_is_a_reported_warning_under_paper(task: Path, write_json: Callable[..., Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A hard gate outside the seed's classes (no gates.paper entry) does not penalise under paper."""
    hard = GateResult(name="speed_pos", form="sign", paths=("v",), status="failed", message="v > 0 violated")
    monkeypatch.setattr(scorer, "_gate_checker", _fake_gates([hard]))
    record = score_artifact(task, write_json(EXPECTED))
    assert record.profile == "paper" and record.raw == 1.0 and not record.hard_gate_failed
    [gate] = record.gates
    assert gate.status == "failed" and gate.severity == "warning" and "hard gate under strict" in gate.message


def test_seed_class_gate_penalises_under_paper(task: Path, write_json: Callable[..., Path],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    (task / "tests" / "profiles.yaml").write_text(
        "anchors: {paper: {source: published, evidence: test}}\n"
        "gates: {paper: [{gate: 'speed_*', class: heliostat_infeasibility, reason: test}]}\n")
    hard = GateResult(name="speed_pos", form="sign", paths=("v",), status="failed", message="v > 0 violated")
    monkeypatch.setattr(scorer, "_gate_checker", _fake_gates([hard]))
    record = score_artifact(task, write_json(EXPECTED))
    assert record.hard_gate_failed and record.o_eval == 0.0 and record.bo_eval == -1.0


@pytest.mark.parametrize(
    "gate",
    [GateResult(name="w", form="range", paths=("w",), status="failed", severity="warning"),
     GateResult(name="m", form="range", paths=("w",), status="missing", severity="warning"),
     GateResult(name="p", form="range", paths=("w",), status="passed")],
)
def test_non_hard_gates_do_not_penalise(task: Path, write_json: Callable[..., Path],
                                        monkeypatch: pytest.MonkeyPatch, gate: GateResult) -> None:
    monkeypatch.setattr(scorer, "_gate_checker", _fake_gates([gate]))
    record = score_artifact(task, write_json(EXPECTED))
    assert record.raw == 1.0 and not record.hard_gate_failed and len(record.gates) == 1


def test_crashing_gate_checker_is_a_warning(task: Path, write_json: Callable[..., Path],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(root: Path, data: Any) -> list[GateResult]:
        raise ZeroDivisionError("oops")

    monkeypatch.setattr(scorer, "_gate_checker", lambda: boom)
    record = score_artifact(task, write_json(EXPECTED))
    assert record.raw == 1.0 and record.gates[0].severity == "warning" and "ZeroDivisionError" in record.gates[0].message


@pytest.mark.skipif(importlib.util.find_spec("anchorage.invariants.gates") is None,
                    reason="anchorage.invariants.gates not written yet: the scorer runs without gates")
def test_real_gate_module_is_used(make_task: TaskFactory, write_json: Callable[..., Path]) -> None:
    invariants = "namespace: T\ninvariants:\n  - {name: v_pos, form: sign, path: v, op: \">\"}\n"
    root = make_task(METRICS, EXPECTED, invariants=invariants)
    good = score_artifact(root, write_json(EXPECTED))
    assert not good.hard_gate_failed and [g.name.startswith("v_pos") for g in good.gates] == [True]
    bad = score_artifact(root, write_json({"v": -1.0, "w": 1.0}), profile="strict")
    assert bad.hard_gate_failed and bad.raw == 0.0 and bad.bo_eval == -1.0
    empty = score_artifact(root, write_json({}))
    assert not empty.hard_gate_failed   # missing evidence is a warning, never a hard error


@pytest.mark.parametrize(
    ("names", "chosen"),
    [(["{slug}-result.json"], "{slug}-result.json"),
     (["{SLUG}_RESULT.json"], "{SLUG}_RESULT.json"),
     (["result.json"], "result.json"),
     (["{slug}_results.json", "result.json"], "{slug}_results.json"),
     (["notes.json", "{slug} result.json"], "{slug} result.json")],
)
def test_near_miss_names_are_recovered_and_recorded(task: Path, tmp_path: Path, names: list[str],
                                                    chosen: str) -> None:
    results = tmp_path / "results"
    results.mkdir()
    slug = task.name
    for name in names:
        (results / name.format(slug=slug, SLUG=slug.upper())).write_text(json.dumps(EXPECTED))
    record = score_artifact(task, results)
    expected_name = chosen.format(slug=slug, SLUG=slug.upper())
    assert record.gradable and record.raw == 1.0
    assert record.recovered_from == expected_name
    assert expected_name in record.recovery_note and f"{slug}_result.json" in record.recovery_note


def test_exact_name_needs_no_recovery(task: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / f"{task.name}_result.json").write_text(json.dumps(EXPECTED))
    (results / "result.json").write_text("{}")
    record = score_artifact(task, results)
    assert record.recovered_from is None and record.raw == 1.0
    missing_file = score_artifact(task, results / f"{task.name}-result.json")   # a wrong name given explicitly
    assert missing_file.gradable and missing_file.recovered_from == f"{task.name}_result.json"


def test_unrelated_files_are_not_recovered(task: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "summary.json").write_text(json.dumps(EXPECTED))
    record = score_artifact(task, results)
    assert not record.gradable and record.recovered_from is None


def test_broken_gate_module_is_an_infrastructure_error(task: Path, write_json: Callable[..., Path],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from anchorage.errors import InfrastructureError

    def broken(name: str) -> Any:
        raise SyntaxError("unterminated string literal")

    monkeypatch.setattr("anchorage.scoring.scorer.importlib.import_module", broken)
    with pytest.raises(InfrastructureError, match="cannot be imported") as info:
        score_artifact(task, write_json(EXPECTED))
    assert "--no-gates" in (info.value.hint or "")
    assert score_artifact(task, write_json(EXPECTED), gates=False).raw == 1.0


def test_absent_gate_module_means_no_gates(task: Path, write_json: Callable[..., Path],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    def absent(name: str) -> Any:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    monkeypatch.setattr("anchorage.scoring.scorer.importlib.import_module", absent)
    record = score_artifact(task, write_json(EXPECTED))
    assert record.gates == [] and record.raw == 1.0


def test_record_round_trips_through_json(task: Path, write_json: Callable[..., Path],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from anchorage.scoring import ScoreRecord

    gate = GateResult(name="g", form="range", paths=("w",), status="failed", values={"w": 1.0})
    monkeypatch.setattr(scorer, "_gate_checker", _fake_gates([gate]))
    record = score_artifact(task, write_json({"v": 8.8, "w": "1.12"}), profile="strict")
    text = json.dumps(record.to_dict(), allow_nan=False)
    again = ScoreRecord.from_dict(json.loads(text))
    assert again.to_dict() == record.to_dict()
    assert again.gates[0].hard_error and again.metrics[1].reason.startswith("coerced")
    assert again.profile == "strict" and again.profile_ref == "strict@1"


def test_gate_entries_match_gate_result_to_dict(task: Path, write_json: Callable[..., Path],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    gate = GateResult(name="g", form="identity", paths=("v", "w"), status="passed", message="ok",
                      values={"v": "10", "w": 1.0})
    monkeypatch.setattr(scorer, "_gate_checker", _fake_gates([gate]))
    assert score_artifact(task, write_json(EXPECTED), profile="strict").to_dict()["gates"] == [gate.to_dict()]


def test_oracle_falls_back_to_the_outstanding_endpoint(make_task: TaskFactory, write_json: Callable[..., Path]) -> None:
    root = make_task(METRICS)                       # no expected_result.json
    record = score_artifact(root, write_json({"v": 8.8, "w": 1.0}))
    assert record.oracle_raw == 1.0 and "expected_result not usable" in record.oracle_source
    assert record.o_eval == pytest.approx(0.875)


def test_oracle_that_scores_zero_gives_o_eval_zero(make_task: TaskFactory, write_json: Callable[..., Path]) -> None:
    root = make_task(METRICS, {"v": "n/a"})         # the oracle's own panel is 0: nothing to scale by
    record = score_artifact(root, write_json(EXPECTED))
    assert record.oracle_raw == pytest.approx(0.0) and record.raw == 1.0 and record.o_eval == 0.0


def test_score_data_in_memory(task: Path) -> None:
    from anchorage.scoring import score_data

    record = score_data(task, {"v": 8.8, "w": 1.0}, baseline=0.5)
    assert record.artifact is None and record.raw == pytest.approx(0.875) and record.baseline_source == "value"
    assert record.bo_eval == pytest.approx((0.875 - 0.5) / 0.5)
    bad = score_data(task, [1, 2])
    assert not bad.gradable and bad.bo_eval == -1.0 and "array" in (bad.error or "")
