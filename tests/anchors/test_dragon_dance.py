"""The runnable anchor of CUMCM 2024 A (bench dragon, Q1–Q5) and its replay check.

Runs ``tasks/cumcm-2024-a-dragon-dance/solution/solve.sh`` as a subprocess on the task's data and
checks: the printed and written Q5 anchor (max head speed 1.246266 m/s, continuous-time peak ratio
1.604793 near t = 14.48 s), the integer-second check (the paper's 1.406276 m/s drives a handle to
≈ 2.2568 m/s), the scored fields against the task's expected result within the scoring tolerance,
and that ``dragon_dance_speed`` accepts the anchor, rejects the paper's answer and never hard-fails
an empty artifact. The Q1–Q4 values are checked against the statement's geometry (well-known
published values of this contest problem) where the reference carries none we can trust.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from anchorage.invariants.replays import get
from anchorage.invariants.replays.dragon_dance import PEAK_RATIO

from .reproduction import run_reproduction, value_at

SLUG = "cumcm-2024-a-dragon-dance"
pytestmark = pytest.mark.slow   # the reproduction takes ~15–25 s on one core


@pytest.fixture(scope="module")
def task(tasks_dir: Path) -> Path:
    return tasks_dir / SLUG


@pytest.fixture(scope="module")
def run(task: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    return run_reproduction(task, tmp_path_factory.mktemp("results"))


def test_q5_prints_the_continuous_time_anchor(run: tuple[dict[str, Any], str]) -> None:
    _, out = run
    assert "Q5 max head speed: 1.246266 m/s" in out
    assert "Q5 peak handle/head speed ratio: 1.604793 at t = 14.48 s" in out
    assert "drives a handle to 2.2568 m/s" in out


def test_q5_artifact_fields(run: tuple[dict[str, Any], str]) -> None:
    q5 = run[0]["experiment_result"]["q5"]
    assert q5["max_head_speed_mps"] == pytest.approx(1.246266, abs=1e-6)
    assert q5["max_speed_ratio_when_head_1mps"] == pytest.approx(1.604793, abs=1e-6)
    assert q5["max_speed_time_s"] == pytest.approx(14.48, abs=0.01)
    assert q5["max_handle_speed_at_max_head_speed_mps"] == pytest.approx(2.0, abs=1e-5)
    check = q5["integer_second_check"]
    assert check["time_s"] == 14
    assert check["max_ratio_on_integer_seconds"] == pytest.approx(1.422195, abs=1e-6)
    assert check["head_speed_from_integer_seconds_mps"] == pytest.approx(1.406277, abs=1e-6)
    assert check["paper_max_handle_speed_mps"] == pytest.approx(2.2568, abs=5e-5)
    assert check["paper_feasible"] is False


def test_replay_constant_matches_the_reproduction(run: tuple[dict[str, Any], str]) -> None:
    ratio = run[0]["experiment_result"]["q5"]["max_speed_ratio_when_head_1mps"]
    assert Fraction(str(ratio)) == PEAK_RATIO


def test_q1_to_q4_geometry(run: tuple[dict[str, Any], str]) -> None:
    er = run[0]["experiment_result"]
    head60 = er["q1"]["snapshots"]["60s"]["head"]
    assert (head60["x"], head60["y"]) == pytest.approx((5.799209, -5.771092), abs=1e-6)
    assert er["q1"]["snapshots"]["0s"]["head"]["x"] == pytest.approx(8.8, abs=1e-9)
    assert er["q1"]["handles"] == 224 and er["q1"]["computed_seconds"] == 301
    assert er["q2"]["terminal_time_s"] == pytest.approx(412.4738, abs=1e-3)
    assert er["q3"]["minimum_pitch_m"] == pytest.approx(0.4503, abs=1e-3)
    assert er["q4"]["turn_length_m"] == pytest.approx(13.6212, abs=1e-3)
    assert er["q4"]["r1_m"] == pytest.approx(2 * er["q4"]["r2_m"], rel=1e-9)
    assert er["q4"]["length_independent_of_ratio"] is True


def test_scored_fields_match_the_expected_result(task: Path, run: tuple[dict[str, Any], str]) -> None:
    config = json.loads((task / "tests" / "score_config.json").read_text(encoding="utf-8"))
    for metric in config["metrics"]:
        if metric.get("weight", 1.0) == 0:
            continue
        ours, anchor = float(value_at(run[0], metric["path"])), float(metric["oracle_value"])
        scale = max(metric.get("abs_scale", 1e-6), metric.get("rel_scale", 0.12) * abs(anchor))
        assert abs(ours - anchor) <= scale, (metric["path"], ours, anchor)
        assert 1 / (1 + abs(ours - anchor) / scale) > 0.999, "the anchor should score ~1.0 against itself"


def test_replay_accepts_the_anchor(run: tuple[dict[str, Any], str]) -> None:
    results = get("dragon_dance_speed").run(run[0])
    assert all(r.status == "passed" for r in results), [r.message for r in results]


def test_replay_rejects_the_integer_second_answer() -> None:
    paper = {"experiment_result": {"q5": {"max_head_speed_mps": 1.406276, "max_speed_ratio_when_head_1mps": 1.422195}}}
    results = {r.name: r for r in get("dragon_dance_speed").run(paper)}
    limit = results["dragon_q5_handle_limit"]
    assert limit.hard_error and "2.2568 m/s" in limit.message and "EXCEEDS" in limit.message
    assert results["dragon_q5_ratio_replay"].status == "failed"
    assert not results["dragon_q5_ratio_replay"].hard_error          # flagged, the hard verdict is the limit
    assert results["dragon_q5_claimed_limit"].status == "passed"     # its own numbers multiply to 2 m/s


def test_replay_rejects_a_self_inconsistent_claim() -> None:
    claim = {"experiment_result": {"q5": {"max_head_speed_mps": 1.24, "max_speed_ratio_when_head_1mps": 1.9}}}
    results = {r.name: r for r in get("dragon_dance_speed").run(claim)}
    assert results["dragon_q5_claimed_limit"].hard_error
    assert not results["dragon_q5_handle_limit"].hard_error


def test_replay_never_hard_fails_an_empty_artifact() -> None:
    results = get("dragon_dance_speed").run({})
    assert results and all(r.status == "missing" and r.severity == "warning" for r in results)
    odd = {"experiment_result": {"q5": {"max_head_speed_mps": "fast"}}}
    assert not any(r.hard_error for r in get("dragon_dance_speed").run(odd))


def test_the_scorer_gives_the_reproduction_full_marks(task: Path, run: tuple[dict[str, Any], str], tmp_path: Path) -> None:
    from anchorage.scoring import score_artifact

    path = tmp_path / f"{SLUG}_result.json"
    path.write_text(json.dumps(run[0]), encoding="utf-8")
    record = score_artifact(task, path).to_dict()
    assert record["gradable"] and record["o_eval"] == pytest.approx(1.0)
    assert not [g["name"] for g in record["gates"] if g["hard_error"]]
