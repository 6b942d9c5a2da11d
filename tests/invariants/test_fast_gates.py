"""The compiled gate checker (``gates.check``) gives exactly what the reference evaluation
(``gates.check_exact``: every obligation built as a tree and evaluated on scaled integers) gives —
same names, paths, statuses, severities, messages and values — on every anchor, every discrimination
mutation, seeded perturbations of the anchors and hand-picked boundary cases."""

from __future__ import annotations

import copy
import json
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from anchorage.invariants.gates import LazyGate, check, check_exact
from anchorage.invariants.results import GateResult, GateStatus
from anchorage.lean.discrimination import MUTATIONS, set_leaf

from .anchors import SLUGS, TASKS, anchor, anchor_path


def _same(task_root: Path, data: Any) -> list[dict[str, Any]]:
    fast = [g.to_dict() for g in check(task_root, data)]
    exact = [g.to_dict() for g in check_exact(task_root, data)]
    assert fast == exact
    return fast


def _leaves(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(node, dict):
        return [leaf for key, value in node.items() for leaf in _leaves(value, (*prefix, key))]
    if isinstance(node, list):
        return [leaf for index, value in enumerate(node) for leaf in _leaves(value, (*prefix, index))]
    return [prefix]


def _perturb(data: Any, rng: random.Random) -> Any:
    out = copy.deepcopy(data)
    for path in _leaves(out):
        if not path or rng.random() > 0.3:
            continue
        parent = out
        for key in path[:-1]:
            parent = parent[key]
        value, roll = parent[path[-1]], rng.random()
        if roll < 0.1:
            parent[path[-1]] = str(value)
        elif roll < 0.15:
            parent[path[-1]] = None
        elif roll < 0.2 and isinstance(parent, dict):
            del parent[path[-1]]
        elif roll < 0.25:
            parent[path[-1]] = float("nan")
        elif isinstance(value, Decimal | int) and not isinstance(value, bool):
            parent[path[-1]] = rng.choice([-value, value * Decimal("1.0000000000000000001"), value + 1, 0,
                                           Decimal(rng.uniform(-2, 2)).quantize(Decimal("1e-20"))])
    return out


@pytest.mark.parametrize("slug", SLUGS)
def test_anchor_and_its_perturbations(slug: str) -> None:
    if not anchor_path(slug).is_file():
        pytest.skip(f"no anchor for {slug}")
    root, data = TASKS / slug, anchor(slug)
    results = _same(root, data)
    assert results and any(isinstance(g, LazyGate) for g in check(root, data))
    text = anchor_path(slug).read_text(encoding="utf-8")
    assert [g.to_dict() for g in check(root, text)] == results
    _same(root, json.loads(text))  # float-parsed: both read each float through its repr
    rng = random.Random(slug)
    statuses = set()
    for _ in range(12):
        statuses |= {g["status"] for g in _same(root, _perturb(data, rng))}
    assert {"passed", "missing"} <= statuses


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.label)
def test_discrimination_mutations(mutation: Any) -> None:
    if not anchor_path(mutation.task).is_file():
        pytest.skip(f"no anchor for {mutation.task}")
    mutated, _ = set_leaf(anchor(mutation.task), mutation.path, mutation.number)
    results = _same(TASKS / mutation.task, mutated)
    assert any(g["hard_error"] and g["form"] == mutation.form for g in results)


BOUNDARY = """namespace: Edge
invariants:
  - {name: p, form: range, path: "probs[*]", lo: 0, hi: 1}
  - {name: order, form: ordering, lhs: "rows[*].mean", rhs: "rows[*].q95", op: "<"}
  - {name: ratio, form: identity, product: [head, ratio], target: 2, rel_tol: 0.01}
  - {name: peak, form: identity, product: [users, share], target: peak, rel_tol: 0.01, abs_tol: 0.1}
  - {name: bit, form: finite_domain, path: "bits[*]", values: [0, 1, 2.5]}
  - {name: thick, form: sign, path: thickness, op: ">"}
  - {name: ci, form: interval, lo: ci.lo, hi: ci.hi}
  - {name: n, form: range, path: bits, measure: length, lo: 2, hi: 3}
  - {name: grid, form: range, path: "grid[*][*]", lo: 0}
  - {name: by_key, form: sign, path: "named[*]", op: ">="}
  - {name: pair, form: ordering, lhs: "a[*]", rhs: "b[*]"}
"""


@pytest.mark.parametrize("text", [
    '{"probs": [0, 1, 1.0000000000000000000001, -0.0], "rows": [{"mean": 0.1, "q95": 0.1}, {"mean": 1}],'
    ' "head": 1.98, "ratio": 1, "users": 100, "share": 0.5, "peak": 50.6, "bits": [0, 1.0, 2.50, 2.5000001],'
    ' "thickness": 1e-30, "ci": {"lo": 2, "hi": 1.99999999999999999999}, "grid": [[1, -1], []],'
    ' "named": {"a": 0, "b": -1e-400}, "a": [1, 2, 3], "b": [2, 1.5]}',
    '{"probs": [], "rows": [], "head": 1.979999999999, "ratio": 1, "users": "100", "share": true,'
    ' "bits": {"x": 1}, "thickness": 0, "ci": {"lo": null}, "grid": {"a": [0]}, "named": [], "a": [1], "b": {"0": 2}}',
    '{"probs": {"a": 0.5, "b": 2}, "rows": {"r": {"mean": 1, "q95": 2}}, "head": 2.0200000000000000001,'
    ' "ratio": 1, "users": 1e2, "share": 5e-1, "peak": 50.1, "bits": [1], "thickness": -1,'
    ' "ci": {"lo": 1E+2, "hi": 100}}',
    '{"probs": [7.4679027768534425e-65, 1e-300, 0.5], "rows": [{"mean": 1e-300, "q95": 7.4679027768534425e-65}],'
    ' "thickness": 5e-324, "a": [1e-200], "b": [0.1], "grid": [[1e-90]], "named": {"x": 1e-70},'
    ' "ci": {"lo": 1e-80, "hi": 1e-79}}',
    '[1, 2]', '{}', 'null',
], ids=["edges", "missing-and-odd", "maps-and-exponents", "tiny-scales", "array", "empty", "null"])
def test_boundary_cases(tmp_path: Path, text: str) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "invariants.yaml").write_text(BOUNDARY, encoding="utf-8")
    for data in (text, json.loads(text, parse_float=Decimal), json.loads(text)):
        _same(tmp_path, data)


def test_lazy_gate_pickles_and_copies_as_a_plain_result() -> None:
    import pickle

    slug = "cumcm-2024-a-dragon-dance"
    if not anchor_path(slug).is_file():
        pytest.skip("dragon anchor missing")
    lazy = next(g for g in check(TASKS / slug, anchor(slug)) if isinstance(g, LazyGate))
    for copied in (pickle.loads(pickle.dumps(lazy)), copy.deepcopy(lazy)):
        assert type(copied) is GateResult and copied.to_dict() == lazy.to_dict()
        assert copied == lazy and lazy == copied
    other: GateStatus = "failed" if lazy.status == "passed" else "passed"
    assert lazy != GateResult(lazy.name, lazy.form, lazy.paths, other, lazy.severity, lazy.message, lazy.values)


def test_value_text_is_the_scaled_integer_text() -> None:
    """The compiled checks' number text (messages, values) equals ``str(to_scaled(x))`` of the reference."""
    from anchorage.invariants.exact import to_scaled
    from anchorage.invariants.gates import _text

    rng = random.Random(6)
    texts = ["0", "-0", "0.000", "1E+2", "1.500", "-1.5e-7", "1e300", "-1e-400", "100.00",
             "123456789012345678901234567890.1234567890"]
    texts += [format(Decimal(rng.randint(-10**30, 10**30)).scaleb(rng.randint(-40, 40)), "E") for _ in range(500)]
    for text in texts:
        assert _text(Decimal(text)) == str(to_scaled(Decimal(text))), text
    assert to_scaled(Decimal("1e400")) is None  # past the bounds of anchorage.numbers: no number at all
    for number in (0, -7, 10**40, 0.1, -2.5e-9, 1e22):
        assert _text(number) == str(to_scaled(number))
