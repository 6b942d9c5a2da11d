"""The discrimination suite: each of the ten one-leaf mutations is rejected, citing its field; the
suite fails when a mutation slips through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.invariants.forms import FORMS
from anchorage.lean import discrimination
from anchorage.lean.discrimination import MUTATIONS, Mutation, run_mutation, set_leaf
from invariants.anchors import REFERENCE_TASKS, TASKS, anchor_path


def test_ten_mutations_cover_the_six_forms() -> None:
    assert len(MUTATIONS) == 10
    assert {m.form for m in MUTATIONS} == set(FORMS)


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.label)
def test_mutation_is_rejected_citing_its_field(mutation: Mutation) -> None:
    if not anchor_path(mutation.task).is_file():
        pytest.skip(f"no anchor for {mutation.task}")
    result = run_mutation(mutation, TASKS, REFERENCE_TASKS, lean=False)
    assert result.anchor_accepted, result.note
    assert result.python_rejected_by, f"{mutation.label} was not rejected"
    assert any(name.endswith(f"_{mutation.form}") for name in result.python_rejected_by)
    assert result.rejected
    assert result.original != mutation.value


def test_dragon_mutation_is_the_papers_value_on_the_corrected_anchor() -> None:
    dragon = next(m for m in MUTATIONS if m.form == "identity")
    result = run_mutation(dragon, TASKS, REFERENCE_TASKS, lean=False)
    assert result.original == "1.246266", "the dragon anchor should be the corrected continuous-time value"
    assert result.python_rejected_by == ["q5_head_ratio_identity"]


def test_set_leaf_changes_exactly_one_leaf() -> None:
    data = {"a": [{"b": 1}, {"b": 2}], "c": 3}
    mutated, old = set_leaf(data, "a[1].b", 9)
    assert old == 2 and mutated == {"a": [{"b": 1}, {"b": 9}], "c": 3} and data["a"][1]["b"] == 2
    with pytest.raises(ValueError):
        set_leaf(data, "a[*].b", 0)


def test_cli_table_and_exit_codes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["lean", "discriminate", "--tasks-dir", str(TASKS), "--reference", str(REFERENCE_TASKS),
                             "--json"])
    assert ok.exit_code == 0, ok.output
    rows = json.loads(ok.output)
    assert len(rows) == 10 and all(r["rejected"] for r in rows)
    # a mutation that stays inside every bound must make the suite fail
    harmless = Mutation("harmless", "mcm-2024-b-submersible-search",
                        "experiment_result.search_strategy.find_probability_6h", "0.4", "range")
    monkeypatch.setattr(discrimination, "MUTATIONS", (harmless,))
    bad = runner.invoke(app, ["lean", "discriminate", "--tasks-dir", str(TASKS), "--reference", str(REFERENCE_TASKS)])
    assert bad.exit_code == 1
    assert "NOT REJECTED" in bad.output and "0/1 mutations rejected" in bad.output
