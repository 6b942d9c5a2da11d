"""The path walk and the value rule for artifact leaves (docs/design-notes.md "Scoring")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from anchorage.scoring.scoreconfig import parse_path
from anchorage.scoring.values import lookup, summarise, to_number


@pytest.mark.parametrize(
    ("path", "tokens"),
    [("a", ("a",)), ("a.b[0].c", ("a", "b", 0, "c")), ("a[2][10]", ("a", 2, 10)),
     ("experiment_result.q5.max_head_speed_mps", ("experiment_result", "q5", "max_head_speed_mps"))],
)
def test_parse_path(path: str, tokens: tuple[Any, ...]) -> None:
    assert parse_path(path) == tokens


@pytest.mark.parametrize("path", ["", "a..b", ".a", "a.", "a[x]", "a[-1]", "[0]"])
def test_parse_path_rejects_bad_syntax(path: str) -> None:
    with pytest.raises(ValueError, match="bad JSON path"):
        parse_path(path)


DOC = {"a": {"b": [{"c": 1.5}, None], "s": "x"}, "n": None}


@pytest.mark.parametrize(
    ("path", "value", "why_part"),
    [("a.b[0].c", 1.5, None), ("a.b[1]", None, "null"), ("a.b[5].c", None, "no index [5]"),
     ("a.zz", None, "no key 'zz'"), ("a.s.t", None, "a string, not a container"), ("n", None, "null"),
     ("a.b.c", None, "no key 'c'")],
)
def test_lookup(path: str, value: Any, why_part: str | None) -> None:
    found, why = lookup(DOC, parse_path(path))
    assert found == value
    if why_part is None:
        assert why is None
    else:
        assert why is not None and why_part in why


@pytest.mark.parametrize(
    ("value", "number"),
    [(3, 3.0), (-2.5, -2.5), (0, 0.0), ("1.25", 1.25), (" -3e2 ", -300.0), ("+.5", 0.5), ("7.", 7.0)],
)
def test_numbers_and_numeric_strings(value: Any, number: float) -> None:
    got, why, note = to_number(value)
    assert got == number and why is None
    assert (note is not None) == isinstance(value, str)


@pytest.mark.parametrize(
    ("value", "why_part"),
    [(float("nan"), "not finite"), (float("inf"), "not finite"), (float("-inf"), "not finite"),
     (True, "boolean"), (False, "boolean"), ("nan", "not a plain decimal"), ("Infinity", "not a plain decimal"),
     ("1,000", "not a plain decimal"), ("12%", "not a plain decimal"), ("0x10", "not a plain decimal"),
     ("", "not a plain decimal"), ("1e999", "beyond ±400"), ("1e350", "overflows"), ([1.0], "array"), ({"v": 1}, "object"),
     (10**400, "too large")],
)
def test_non_numeric_values(value: Any, why_part: str) -> None:
    got, why, _ = to_number(value)
    assert got is None and why is not None and why_part in why


def test_json_nan_tokens_are_read_then_rejected() -> None:
    data = json.loads('{"a": NaN, "b": Infinity, "c": -Infinity}')
    for key in "abc":
        assert to_number(data[key])[0] is None


def test_summarise_makes_values_json_safe() -> None:
    assert summarise({"a": 1}) == "<an object with 1 keys>"
    assert summarise(float("nan")) == "nan"
    assert len(summarise("x" * 1000)) == 200
    assert summarise(10**30).startswith("<integer")
    json.dumps([summarise(v) for v in (float("inf"), [1], "s", 2.5, None, True)], allow_nan=False)
