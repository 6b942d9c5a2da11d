"""The runnable anchor of CUMCM 2024 B (production decisions) reproduces its task's expected result.

Runs ``tasks/cumcm-2024-b-production-decision/solution/solve.sh`` as a subprocess on the task's data
and compares its artifact with ``tests/expected_result.json`` through the task's scoring
configuration; also checks the exact profit model on cases worked out by hand.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from fractions import Fraction
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .reproduction import run_reproduction, value_at

SLUG = "cumcm-2024-b-production-decision"


def data_dir(task: Path, reference: Path) -> Path:
    local = task / "environment" / "data"
    return local if (local / "problem.md").is_file() else reference / "tasks" / SLUG / "environment" / "data"


@pytest.fixture(scope="module")
def task(tasks_dir: Path) -> Path:
    return tasks_dir / SLUG


@pytest.fixture(scope="module")
def artifact(task: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_reproduction(task, tmp_path_factory.mktemp("results"))[0]


@pytest.fixture(scope="module")
def solver(task: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("production_decision_solve", task / "solution" / "solve.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_scored_fields_match_within_the_scoring_tolerance(task: Path, artifact: dict[str, Any]) -> None:
    config = json.loads((task / "tests" / "score_config.json").read_text(encoding="utf-8"))
    expected = json.loads((task / "tests" / "expected_result.json").read_text(encoding="utf-8"))
    assert config["metrics"], "the task scores no metric"
    for metric in config["metrics"]:
        ours, anchor = float(value_at(artifact, metric["path"])), float(metric["oracle_value"])
        tolerance = max(metric.get("abs_scale", 1e-6), metric.get("rel_scale", 0.12) * abs(anchor))
        assert abs(ours - anchor) <= tolerance, (metric["path"], ours, anchor)
        # Stronger: reproduced exactly to the 4 decimals the expected result carries.
        assert ours == pytest.approx(float(value_at(expected, metric["path"])), abs=5e-5), metric["path"]


@pytest.mark.slow
def test_every_question_reproduces_the_expected_result(task: Path, artifact: dict[str, Any]) -> None:
    expected = json.loads((task / "tests" / "expected_result.json").read_text(encoding="utf-8"))["experiment_result"]
    ours = artifact["experiment_result"]
    for plan_ours, plan_expected in zip(ours["q1_sampling"], expected["q1_sampling"], strict=True):
        for key, value in plan_expected.items():
            assert plan_ours[key] == (pytest.approx(value, abs=1e-6) if isinstance(value, float) else value), key
    for row_ours, row_expected in zip(ours["q2"]["best_decisions"], expected["q2"]["best_decisions"], strict=True):
        for key, value in row_expected.items():
            assert row_ours[key] == pytest.approx(value, abs=5e-5), (row_expected["case"], key)
    assert ours["q2"]["enumerated_decisions"] == expected["q2"]["enumerated_decisions"]
    assert ours["q3"]["best_expected_profit"] == pytest.approx(expected["q3"]["best_expected_profit"], abs=5e-5)
    assert ours["q3"]["enumerated_policies"] == 2 ** 16
    for row_ours, row_expected in zip(ours["q4"]["posterior_rows"], expected["q4"]["posterior_rows"], strict=True):
        for key in ("observed_defects", "posterior_mean_defect_rate", "posterior_q95_defect_rate"):
            assert row_ours[key] == pytest.approx(row_expected[key], abs=5e-5), key
        # The scored values are the exact rational optima rounded to the anchor's 4 decimals.
        assert round(float(Fraction(row_ours["q2_best_profit_case1_exact"])), 4) == row_ours["q2_best_profit_case1"]
        assert (round(float(Fraction(row_ours["q3_best_policy_profit_exact"])), 4)
                == row_ours["q3_best_policy_profit_under_posterior"])


def test_profit_model_on_hand_worked_cases(solver: ModuleType, task: Path, reference_dir: Path) -> None:
    text = (data_dir(task, reference_dir) / "problem.md").read_text(encoding="utf-8")
    cases = solver.parse_table1(text)
    # Case 1, nothing inspected: 56 - (4 + 18 + 6) - 6 x (1 - 0.9^3).
    value, good = solver.profit(cases[0], (0, 0, 0, 0))
    assert good == Fraction(729, 1000)
    assert value == 56 - 28 - 6 * (1 - Fraction(729, 1000))
    # Case 4, part 1 inspected: a good part 1 costs (4 + 1) / 0.8; the product is good with 0.8 x 0.8.
    value, good = solver.profit(cases[3], (1, 0, 0, 0))
    assert value == 56 - (Fraction(5) / Fraction(4, 5) + 18 + 6) - 30 * (1 - good)
    # Inspecting the product: only good units are sold, so no exchange loss.
    value, good = solver.profit(cases[0], (0, 0, 1, 0))
    assert value == 56 * good - 28 - 3
    q3 = solver.parse_table2(text)
    assert len(q3.parts) == 8 and len(q3.semis) == 3 and q3.price == 200 and q3.exchange_loss == 40


def test_enumeration_finds_the_true_optimum(solver: ModuleType, task: Path, reference_dir: Path) -> None:
    """The reported optimum is the maximum of the exact profit over every vector, ties to fewer actions."""
    text = (data_dir(task, reference_dir) / "problem.md").read_text(encoding="utf-8")
    for line in solver.parse_table1(text):
        bits, value, _, count = solver.best_policy(line)
        every = {vector: solver.profit(line, vector)[0] for vector in __import__("itertools").product((0, 1), repeat=4)}
        assert count == 16 and value == max(every.values())
        assert every[bits] == value
        assert sum(bits) == min(sum(v) for v, p in every.items() if p == value)
