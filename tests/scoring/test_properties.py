"""Property tests (hypothesis) for the scoring contract of SPEC §4."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anchorage.scoring import bo_eval, o_eval, panel, score_artifact, score_metric
from anchorage.scoring.scoreconfig import Metric, MetricSpec, compile_metric

from .conftest import write_task

finite = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, allow_infinity=False)
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
directions = st.sampled_from(["higher_is_better", "lower_is_better", "target_value", "exact_value"])
one_sided = st.sampled_from(["higher_is_better", "lower_is_better"])
modes = st.sampled_from(["legacy_target_distance_to_outstanding", "baseline_to_outstanding_target_minmax"])
scales = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)
leaf = st.one_of(finite, st.none(), st.booleans(), st.text(max_size=8),
                 st.sampled_from([float("nan"), float("inf"), float("-inf")]), st.integers())


@st.composite
def metrics(draw: st.DrawFn, direction: st.SearchStrategy[str] = directions) -> Metric:
    d = draw(direction)
    mode = draw(modes)
    anchor = draw(finite)
    fields: dict[str, Any] = {"path": "x", "oracle_value": anchor, "direction": d, "normalization_mode": mode,
                              "rel_scale": draw(scales), "abs_scale": draw(scales)}
    if mode == "baseline_to_outstanding_target_minmax":
        fields["baseline_value"] = draw(finite.filter(lambda b: b != anchor))
        fields["normalization_direction"] = draw(st.sampled_from([d, "higher_is_better", "target_value"]))
    return compile_metric(0, MetricSpec.model_validate(fields))


@settings(deadline=None)  # timing is not the contract; the machine may be loaded
@given(metrics(), leaf)
def test_rewards_in_unit_interval(m: Metric, value: Any) -> None:
    result = score_metric(m, {"x": value})
    assert result.reward is not None and 0.0 <= result.reward <= 1.0


@settings(deadline=None)  # timing is not the contract; the machine may be loaded
@given(metrics(one_sided), st.floats(min_value=0.0, max_value=1e9, allow_nan=False))
def test_one_sided_reaching_or_beating_the_anchor_is_exactly_one(m: Metric, beyond: float) -> None:
    value = m.anchor + beyond if m.direction == "higher_is_better" else m.anchor - beyond
    result = score_metric(m, {"x": value})
    if m.endpoint_error is None:
        assert result.reward == 1.0
    else:  # a min-max metric whose outstanding endpoint is not better than its baseline scores 0
        assert result.reward == 0.0 and result.status == "endpoint_invalid"


@settings(deadline=None)  # timing is not the contract; the machine may be loaded
@given(metrics(st.sampled_from(["target_value", "exact_value"])), st.floats(min_value=1e-3, max_value=1e6))
def test_two_sided_metrics_penalise_overshoot(m: Metric, beyond: float) -> None:
    over = score_metric(m, {"x": m.anchor + beyond}).reward
    assert over is not None and over < 1.0


@settings(deadline=None)  # timing is not the contract; the machine may be loaded
@given(st.lists(st.tuples(st.floats(min_value=0.01, max_value=10), unit), min_size=1, max_size=8),
       st.data())
def test_panel_is_monotone_in_each_reward(pairs: list[tuple[float, float]], data: st.DataObject) -> None:
    i = data.draw(st.integers(min_value=0, max_value=len(pairs) - 1))
    higher = data.draw(st.floats(min_value=pairs[i][1], max_value=1.0))
    bumped = list(pairs)
    bumped[i] = (pairs[i][0], higher)
    assert panel(bumped) >= panel(pairs) - 1e-12
    assert 0.0 <= panel(pairs) <= 1.0


@settings(deadline=None)  # timing is not the contract; the machine may be loaded
@given(unit, unit)
def test_o_eval_in_unit_interval(raw: float, oracle: float) -> None:
    assert 0.0 <= o_eval(raw, oracle) <= 1.0


@settings(deadline=None)  # timing is not the contract; the machine may be loaded
@given(unit, unit, unit)
def test_bo_eval_in_range_and_small_gap_branch(raw: float, oracle: float, baseline: float) -> None:
    value, branch = bo_eval(raw, oracle, baseline)
    assert -1.0 <= value <= 1.0
    if oracle - baseline < 0.10 - 1e-9:
        assert branch == "small_gap" and -0.10 <= value <= 0.10
        assert value == max(-0.10, min(0.10, raw - baseline))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=64))
def test_unreadable_or_missing_artifact_is_minus_one(tmp_path_factory: Any, blob: bytes) -> None:
    root = tmp_path_factory.mktemp("prop")
    task = write_task(root / "t", [{"path": "x", "oracle_value": 1.0}], {"x": 1.0})
    artifact = root / "a.json"
    artifact.write_bytes(blob)
    record = score_artifact(task, artifact)
    parsed = _parses_to_object(blob)
    assert record.gradable == parsed
    if not parsed:
        assert record.bo_eval == -1.0 and record.o_eval == 0.0 and record.error
    missing = score_artifact(task, root / "absent.json")
    assert missing.bo_eval == -1.0 and not missing.gradable


def _parses_to_object(blob: bytes) -> bool:
    try:
        return isinstance(json.loads(blob.decode("utf-8-sig")), dict)
    except (ValueError, RecursionError):
        return False


def test_write_task_helper_writes_a_scorable_task(tmp_path: Path) -> None:
    task = write_task(tmp_path / "t", [{"path": "x", "oracle_value": 1.0}], {"x": 1.0})
    assert score_artifact(task, task / "tests" / "expected_result.json").raw == 1.0
