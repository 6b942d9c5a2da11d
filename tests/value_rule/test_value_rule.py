"""anchorage.numbers: one value rule for the scorer and the gates, bounded before any exact arithmetic."""

from __future__ import annotations

import json
import tracemalloc
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from anchorage import numbers
from anchorage.invariants.exact import loads_exact, to_fraction, to_scaled
from anchorage.invariants.gates import _number as gate_number
from anchorage.scoring import score_artifact
from anchorage.scoring.values import to_number

CORPUS: list[Any] = [
    0, 7, -3, 10**30, 10**99, 10**120, 10**400, 1.5, -2.5e-9, 1e308, float("nan"), float("inf"), True, False, None,
    Decimal("0.37"), Decimal("1E+999999999"), Decimal("-1e-400"), Decimal("1e-401"), Decimal("1.8e308"),
    Decimal("1.7e308"), Decimal("0E+999999999"), Decimal("1" * 101), Decimal("1" * 100), Decimal("NaN"),
    "0.37", " -1.25e3 ", "+.5", "7.", "1e999", "1E+999999999", "1e350", "nan", "Infinity", "1,000", "12%", "0x10",
    "", "0.37 mm", "1" * 500, [1.0], {"v": 1}, numbers.Unreadable.of("9" * 600, "a long number"),
]


@pytest.mark.parametrize("value", CORPUS, ids=lambda v: repr(v)[:40])
def test_scorer_and_gates_read_every_value_alike(value: Any) -> None:
    scored, why_not, _ = to_number(value)
    exact = to_scaled(value)
    assert (scored is None) == (exact is None), (scored, why_not, exact)
    assert (scored is None) == (gate_number(value) is None)
    assert (scored is None) == (to_fraction(value) is None)
    if scored is not None:
        assert exact is not None and float(exact.to_fraction()) == pytest.approx(scored, rel=1e-15)
    else:
        assert why_not


def test_quoted_decimals_are_numbers_with_a_note() -> None:
    reading = numbers.read(" 0.37 ")
    assert reading.kind == "number" and reading.exact == Decimal("0.37") and reading.number == 0.37
    assert reading.note is not None and "coerced" in reading.note


@pytest.mark.parametrize(("value", "reason"), [
    (Decimal("1E+999999999"), "beyond ±400"), ("1E+999999999", "beyond ±400"), (Decimal("1" * 101), "101 significant"),
    ("1e350", "overflows a float"), (10**500, "more than 401 digits"), (True, "boolean"), (None, "null"),
])
def test_reasons_say_what_was_wrong(value: Any, reason: str) -> None:
    reading = numbers.read(value)
    assert reading.exact is None and reading.reason is not None and reason in reading.reason


def test_parse_hooks_keep_out_of_bounds_numbers_as_text() -> None:
    data = loads_exact('{"e": 1E+999999999, "long": ' + "7" * 5000 + ', "digits": 0.' + "3" * 150 + ', "ok": 0.25}')
    assert isinstance(data["e"], numbers.Unreadable) and "beyond" in data["e"].reason
    assert isinstance(data["long"], numbers.Unreadable) and "5000 digits" in data["long"].reason
    assert isinstance(data["digits"], numbers.Unreadable) and "significant digits" in data["digits"].reason
    assert data["ok"] == Decimal("0.25")
    assert len(data["long"]) <= 60  # only a short excerpt is kept


def test_a_huge_exponent_allocates_nothing_big() -> None:
    reading_of = [numbers.read(Decimal("1E+999999999")), numbers.read("-1e-999999999")]
    tracemalloc.start()
    try:
        for value in (Decimal("1E+999999999"), "1E+999999999", Decimal("1e-999999999")):
            to_scaled(value), to_fraction(value), to_number(value), gate_number(value)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000
    assert all(r.kind == "non_numeric" for r in reading_of)
    assert to_fraction("0.5") == Fraction(1, 2)


def test_a_5000_digit_integer_leaves_the_rest_of_the_artifact_gradable(tmp_path: Path) -> None:
    task = Path(__file__).resolve().parents[2] / "tasks" / "smoke-inventory"
    expected = json.loads((task / "tests" / "expected_result.json").read_text())
    text = json.dumps(expected).replace('"space_multiplier": 10.48549', '"space_multiplier": ' + "9" * 5000)
    artifact = tmp_path / "smoke-inventory_result.json"
    artifact.write_text(text)
    record = score_artifact(task, artifact)
    assert record.gradable
    by_path = {m.path: m for m in record.metrics}
    assert by_path["experiment_result.space_multiplier"].status == "non_numeric"
    assert by_path["experiment_result.total_annual_cost"].status == "scored"
    gate = next(g for g in record.gates if g.name.startswith("multiplier_nonneg"))
    assert gate.status == "missing"
