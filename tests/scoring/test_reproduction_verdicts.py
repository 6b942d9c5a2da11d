"""Reproduction verdicts: a reproduction that beats a one-sided anchor beyond its tolerance is not "close".

The one-sided reward caps at 1 (SPEC G.2), so O-Eval cannot tell a reproduction that finds the published
value from one that finds a different, better one; the verdict does: ``exceeds_anchor`` (a disagreement, with
its explanation), never ``reproduces`` or ``close``. Multibeam lines, crop planting and the smoke screen are
the three (each with its erratum or "not reproduced" note).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anchorage.scoring.reproduction import Comparison, MetricComparison, check_disagreement, compare

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def metric(reproduced: float, anchor: float, reward: float, tolerance: float = 1.0) -> MetricComparison:
    return MetricComparison("a.x", reproduced, anchor, reward, 1.0, "scored", tolerance)


def verdict(metrics: list[MetricComparison], o_eval: float, gates: list[str] | None = None) -> str:
    return Comparison("t", metrics, o_eval, 1.0, o_eval, gates or []).verdict


WITHIN, BEYOND, SHORT = metric(10.2, 10.0, 0.9), metric(15.0, 10.0, 1.0), metric(8.5, 10.0, 0.4)


@pytest.mark.parametrize(("metrics", "o_eval", "gates", "expected"), [
    ([WITHIN, WITHIN], 0.95, [], "reproduces"),
    ([WITHIN, BEYOND], 0.95, [], "exceeds_anchor"),          # the multibeam and smoke-screen case
    ([BEYOND, BEYOND], 1.0, [], "exceeds_anchor"),           # crop planting: O-Eval 1.0, values not reproduced
    ([WITHIN, SHORT], 0.92, [], "close"),                    # near the anchor, short of it
    ([BEYOND, SHORT], 0.95, [], "disagrees"),                # beyond on one, short on another: never close
    ([WITHIN, BEYOND], 0.95, ["g"], "disagrees"),            # a hard gate fails: not a better answer
    ([SHORT, SHORT], 0.4, [], "disagrees"),
], ids=["reproduces", "beyond-one", "beyond-all", "close", "beyond-and-short", "gated", "far"])
def test_verdict(metrics: list[MetricComparison], o_eval: float, gates: list[str], expected: str) -> None:
    assert verdict(metrics, o_eval, gates) == expected


def test_a_metric_beyond_the_anchor_is_marked() -> None:
    assert BEYOND.exceeds_anchor and not BEYOND.within_tolerance
    assert not WITHIN.exceeds_anchor and not SHORT.exceeds_anchor


def test_exceeds_anchor_must_explain_the_disagreement() -> None:
    assert check_disagreement({"verdict": "exceeds_anchor"}) == [
        "verdict 'exceeds_anchor' needs a 'disagreement' object (kind erratum | not_reproduced, reason)"]
    explained = {"verdict": "exceeds_anchor", "disagreement": {"kind": "not_reproduced", "reason": "a better optimum"}}
    assert check_disagreement(explained) == []
    assert check_disagreement({"verdict": "close", "disagreement": {"kind": "erratum"}})


@pytest.mark.parametrize("slug", ["cumcm-2023-b-multibeam-lines", "cumcm-2024-c-crop-planting",
                                  "cumcm-2025-a-smoke-screen"])
def test_the_three_reproductions_beyond_their_anchor_say_so(slug: str) -> None:
    solution = TASKS / slug / "solution"
    now = compare(str(TASKS / slug), json.loads((solution / "reproduced_result.json").read_text(encoding="utf-8")))
    assert now.verdict == "exceeds_anchor" and now.o_eval >= 0.9
    assert any(m.exceeds_anchor for m in now.metrics)
    committed = json.loads((solution / "comparison.json").read_text(encoding="utf-8"))
    assert committed["verdict"] == "exceeds_anchor" and not check_disagreement(committed)
    assert committed["disagreement"]["kind"] in ("erratum", "not_reproduced")
    assert committed["notes"].startswith("Verdict 'exceeds_anchor'")
