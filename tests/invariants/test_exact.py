"""Exact numbers and JSON paths: decimals never go through binary floating point."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from anchorage.errors import InputError
from anchorage.invariants.exact import (
    MISSING,
    Scaled,
    get_path,
    loads_exact,
    parse_path,
    resolve,
    to_fraction,
    to_scaled,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("1.246266", Scaled(1246266, 6)), ("-0.0261", Scaled(-261, 4)), ("2.000", Scaled(2, 0)),
    ("0", Scaled(0, 0)), ("-0.0", Scaled(0, 0)), ("1E+3", Scaled(1000, 0)), ("1e-7", Scaled(1, 7)),
    ("119196.0", Scaled(119196, 0)),
], ids=lambda v: str(v))
def test_decimal_text_is_read_exactly(text: str, expected: Scaled) -> None:
    assert to_scaled(Decimal(text)) == expected
    assert to_scaled(float(text)) == expected


@pytest.mark.parametrize("value", [float("nan"), float("inf"), Decimal("NaN"), True, False, "1.0 mm", "nan", None, [1],
                                   Decimal("1E+999999999"), "1E+999999999", Decimal("1" * 101), 10**500],
                         ids=repr)
def test_non_numbers_are_not_numbers(value: object) -> None:
    assert to_scaled(value) is None


def test_quoted_decimals_are_numbers_as_for_the_scorer() -> None:
    """anchorage.numbers is the one value rule: a quoted plain decimal is the same number."""
    assert to_scaled("1.0") == Scaled(1, 0) and to_scaled(" -0.37 ") == Scaled(-37, 2)


def test_json_text_keeps_digits_that_a_float_would_lose() -> None:
    data = loads_exact('{"x": 0.1000000000000000055511151231257827}')
    assert to_fraction(data["x"]) == Fraction("0.1000000000000000055511151231257827")
    assert to_fraction(0.1) == Fraction(1, 10)  # a float is read through its shortest repr


@given(st.decimals(allow_nan=False, allow_infinity=False))
def test_scaled_equals_the_decimal(value: Decimal) -> None:
    scaled = to_scaled(value)
    assert scaled is not None
    assert scaled.to_fraction() == Fraction(value)
    assert Fraction(str(scaled)) == Fraction(value)
    assert scaled.k == 0 or scaled.n % 10 != 0  # normalised


@given(st.floats(allow_nan=False, allow_infinity=False))
@example(7.4679027768534425e-65)  # a scale past the powers-of-ten table (found by hypothesis in CI)
@example(5e-324)
@example(-1.7976931348623157e308)
def test_float_reads_as_its_repr(value: float) -> None:
    scaled = to_scaled(value)
    assert scaled is not None
    assert scaled.to_fraction() == Fraction(Decimal(repr(value)))


def test_paths() -> None:
    assert parse_path("a.b[2].c[*]") == ("a", "b", 2, "c", "*")
    data = {"a": {"rows": [{"v": 1}, {"v": 2}, {}]}, "m": {"x": 1, "y": 2}}
    assert [(p, v) for p, v in resolve(data, parse_path("a.rows[*].v"))] == [
        (("a", "rows", 0, "v"), 1), (("a", "rows", 1, "v"), 2), (("a", "rows", 2, "v"), MISSING)]
    assert [v for _, v in resolve(data, parse_path("m[*]"))] == [1, 2]
    assert resolve({"a": {"rows": []}}, parse_path("a.rows[*].v")) == []
    assert get_path(data, "a.rows[5].v") is MISSING
    assert get_path(data, "a.rows[1].v") == 2


@pytest.mark.parametrize("bad", ["", "a..[", "a[x]", "a]"])
def test_malformed_paths_are_input_errors(bad: str) -> None:
    with pytest.raises(InputError):
        parse_path(bad)
