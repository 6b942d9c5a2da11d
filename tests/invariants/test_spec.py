"""The invariants file: exact decimals, shape validation with clear errors, caching."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from anchorage.errors import InputError
from anchorage.invariants.spec import load_invariants, parse_invariants


def test_yaml_decimals_are_exact() -> None:
    spec = parse_invariants("namespace: T\ninvariants:\n  - {name: a, form: range, path: x, lo: 0.1, hi: 1.0e-1}\n")
    inv = spec.invariants[0]
    assert inv.lo == Decimal("0.1") and isinstance(inv.lo, Decimal)
    assert inv.hi == Decimal("0.1")


@pytest.mark.parametrize(("entry", "needle"), [
    ("{name: a, form: range, path: x}", "needs lo and/or hi"),
    ("{name: a, form: sign, path: x, op: '<'}", "op must be > or >="),
    ("{name: a, form: ordering, lhs: x}", "needs lhs and rhs"),
    ("{name: a, form: identity, product: [x, y], target: 2}", "rel_tol and/or abs_tol"),
    ("{name: a, form: interval, lo: 1, hi: x}", "must both be JSON paths"),
    ("{name: a, form: finite_domain, path: x, values: []}", "non-empty list"),
    ("{name: 1a, form: sign, path: x, op: '>'}", "Lean identifier"),
    ("{name: a, form: sign, path: 'x[', op: '>'}", "malformed JSON path"),
    ("{name: a, form: cube, path: x}", "form"),
    ("{name: a, form: sign, path: x, op: '>', colour: red}", "colour"),
], ids=["range-no-bounds", "sign-op", "ordering-rhs", "identity-tol", "interval-number", "domain-empty",
        "bad-name", "bad-path", "bad-form", "extra-field"])
def test_bad_entries_are_input_errors_naming_the_problem(entry: str, needle: str) -> None:
    with pytest.raises(InputError) as info:
        parse_invariants(f"namespace: T\ninvariants:\n  - {entry}\n", "t.yaml")
    assert needle in str(info.value)
    assert "t.yaml" in str(info.value)


def test_duplicate_names_and_bad_namespace_are_rejected() -> None:
    twice = ("namespace: T\ninvariants:\n  - {name: a, form: sign, path: x, op: '>'}\n"
             "  - {name: a, form: sign, path: y, op: '>'}\n")
    with pytest.raises(InputError, match="appears twice"):
        parse_invariants(twice)
    with pytest.raises(InputError, match="CamelCase"):
        parse_invariants("namespace: lower\n")
    with pytest.raises(InputError, match="not valid YAML"):
        parse_invariants("namespace: [\n")


def test_loading_is_cached_and_follows_edits(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    path = tmp_path / "tests" / "invariants.yaml"
    path.write_text("namespace: A\n", encoding="utf-8")
    first = load_invariants(tmp_path)
    assert first is not None and load_invariants(tmp_path) is first
    path.write_text("namespace: Bee\n", encoding="utf-8")
    again = load_invariants(tmp_path)
    assert again is not None and again.namespace == "Bee"
    assert load_invariants(tmp_path / "nowhere") is None


def test_every_form_the_file_accepts_is_a_module_of_the_forms_package() -> None:
    """The model's ``form`` values, its shape checks and the forms' registry (one module each) cannot drift."""
    import typing

    from anchorage.invariants import spec
    from anchorage.invariants.forms import FORMS

    accepted = set(typing.get_args(spec.Invariant.model_fields["form"].annotation))
    assert accepted == set(spec._SHAPE_CHECKS) == set(FORMS)
    assert all(FORMS[name].name == name for name in FORMS)
