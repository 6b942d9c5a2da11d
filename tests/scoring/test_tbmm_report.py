"""The ``tbmm-report-2026-09`` profile reproduces the published leaderboard's per-task cells of one entry.

The published answers of the "v4 pro" entry (``tests/scoring/published/``, each value with file, commit and
line) are rebuilt into artifacts and rescored under the profile; the report's cells (``report@4a3807d``:
direction-aware raw to 6 decimals, O-Eval and Robust BO-Eval as percentages to 2 decimals) must come out to
the published digits. The cells that cannot be reproduced are named here, with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from anchorage.scoring import score_data
from anchorage.scoring.rebuild import artifact_from_values

PUBLISHED = Path(__file__).parent / "published"
TASKS = Path(__file__).resolve().parents[2] / "tasks"
ANSWERS: dict[str, dict[str, Any]] = json.loads((PUBLISHED / "v4-pro-answers.json").read_text())["v4 pro"]
SCORES: dict[str, dict[str, Any]] = json.loads((PUBLISHED / "v4-pro-scores.json").read_text())["v4 pro"]
VIEW = "report@4a3807d"

NOT_REPRODUCIBLE: dict[str, str] = {
    "cumcm-2024-c-crop-planting": (
        "the report scored crop planting's Q1 panel (waste and discount profit, raw 1.448533), but the published "
        "answers hold only the waste profit (39,893,151 yuan, from the report's feasibility audit) and the "
        "values of the q2_q3 panel the report retired (CVaR profit, Spearman correlation); the discount profit "
        "v4 pro reported is not published, so its reward (1.994857 by the report's arithmetic, i.e. about "
        "70.7 M yuan against 58,718,967.38) cannot be checked"),
}


def published(slug: str) -> dict[str, Any]:
    cells: dict[str, Any] = SCORES[slug]["views"][VIEW]
    return cells


def rescored(slug: str, profile: str = "tbmm-report-2026-09") -> Any:
    return score_data(TASKS / slug, artifact_from_values(ANSWERS[slug]), profile=profile)


@pytest.mark.parametrize("slug", sorted(set(SCORES) - set(NOT_REPRODUCIBLE)))
def test_published_cells_are_reproduced(slug: str) -> None:
    cells, record = published(slug), rescored(slug)
    assert record.profile == "tbmm-report-2026-09" and record.baseline_source.startswith("profile:tbmm-report")
    assert f"{record.raw:.6f}" == f"{cells['raw']:.6f}"
    assert f"{100 * record.o_eval:.2f}" == f"{100 * cells['o_eval']:.2f}"
    assert f"{100 * record.bo_eval:.2f}" == f"{100 * cells['bo_eval']:.2f}"
    assert record.hard_gate_failed is cells["hard_gated"]


@pytest.mark.parametrize("slug", sorted(NOT_REPRODUCIBLE))
def test_cells_that_cannot_be_reproduced_say_why(slug: str) -> None:
    cells, record = published(slug), rescored(slug)
    assert f"{record.raw:.6f}" != f"{cells['raw']:.6f}", f"{slug} is reproduced now: drop it from NOT_REPRODUCIBLE"
    missing = [m.path for m in record.metrics if m.status == "missing"]
    assert missing == ["experiment_result.q1.discount_profit_yuan"], NOT_REPRODUCIBLE[slug]
    waste = next(m for m in record.metrics if m.path.endswith("waste_profit_yuan"))
    implied = 2 * cells["raw"] - (waste.reward or 0.0)   # the discount metric's reward the published raw implies
    assert implied == pytest.approx(1.994857, abs=1e-6)


def test_the_reproduced_cells_give_the_published_mean_but_for_the_crop_cell() -> None:
    """18-task mean O-Eval of v4 pro in the report: 58.44 %; with the crop cell taken as published."""
    total = sum(published(s)["o_eval"] if s in NOT_REPRODUCIBLE else rescored(s).o_eval for s in SCORES)
    assert f"{100 * total / len(SCORES):.2f}" == "58.44"


def test_the_arithmetic_differs_from_paper_where_documented() -> None:
    """Two of the report's rules, seen on published answers: the overshoot bonus lifts raw above 1
    (heliostat), and its percent rule reads Juneau's 75.8 as 0.758 (paper: a domain violation)."""
    helio = rescored("cumcm-2023-a-heliostat-field")
    assert helio.raw > 1.0 and rescored("cumcm-2023-a-heliostat-field", "paper").raw <= 1.0
    juneau = {m.path.rsplit(".", 1)[-1]: m for m in rescored("mcm-2025-b-juneau-tourism").metrics}
    assert "percentage" in juneau["resident_acceptance_index"].reason
    paper = {m.path.rsplit(".", 1)[-1]: m for m in rescored("mcm-2025-b-juneau-tourism", "paper").metrics}
    assert paper["resident_acceptance_index"].status == "domain_violation"
