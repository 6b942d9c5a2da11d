"""Judge-based semantic audit (seed 001): judgement parsing, textual duplicates, the CLI through the gateway."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.errors import InputError
from anchorage.verify.lean_audit import scan_project
from anchorage.verify.semantic_audit import duplicate_statements, judge_pairs, parse_judgement

from .fakes import ScriptedClient

PAIRS = [{"declaration": "Sample.add_comm'", "statement": "Addition of natural numbers is commutative."},
         {"declaration": "Sample.pending_lemma", "statement": "For every real x ≥ 1, x ≤ x²."}]


def test_cross_file_duplicate_is_found_without_a_model(data_dir: Path) -> None:
    groups = duplicate_statements(scan_project(data_dir / "sample_lean"))
    assert len(groups) == 1 and groups[0]["cross_file"] is True
    assert {d["name"] for d in groups[0]["declarations"]} == {"Sample.add_comm'", "Sample.comm_copy"}
    assert groups[0]["statement"] == "(a b : Nat) : a + b = b + a"


def test_parse_judgement_variants() -> None:
    reply = ("**Faithful**: PARTIAL\n**Issue**: parameter restriction\n**Library reuse**: REINVENTS Nat.le_mul_self\n"
             "**Cross-file reuse**: OK\n**Why**: the source is about reals,\nthe Lean statement about naturals.")
    judged = parse_judgement(reply)
    assert judged == {"faithful": "PARTIAL", "issue": "parameter restriction", "reinvents": "Nat.le_mul_self",
                      "duplicates": None, "why": "the source is about reals, the Lean statement about naturals."}
    assert parse_judgement("looks fine")["faithful"] == "UNKNOWN"


def test_judge_sees_source_declaration_and_project(data_dir: Path) -> None:
    def script(user: str, seed: int) -> str:
        if "declaration=Sample.pending_lemma" in user:
            return "**Faithful**: NO\n**Issue**: parameter restriction\n**Library reuse**: OK\n" \
                   "**Cross-file reuse**: OK\n**Why**: naturals instead of reals."
        return "**Faithful**: YES\n**Issue**: none\n**Library reuse**: OK\n**Cross-file reuse**: OK\n**Why**: exact."

    client = ScriptedClient(script)
    record = judge_pairs(data_dir / "sample_lean", PAIRS, client, model="m")
    assert record["summary"] == {"YES": 1, "PARTIAL": 0, "NO": 1, "UNKNOWN": 0} and record["ok"] is False
    prompt = next(u for u, _ in client.calls if "pending_lemma" in u.split("\n", 1)[0])
    assert "For every real x ≥ 1" in prompt and "theorem pending_lemma (n : Nat) : n ≤ n * n" in prompt
    assert "Sample.comm_copy (Sample/Planted.lean)" in prompt      # the rest of the project, for reuse
    with pytest.raises(InputError, match="not found"):
        judge_pairs(data_dir / "sample_lean", [{"declaration": "nope", "statement": "x"}], client, model="m")


def test_cli_judge_through_the_gateway(data_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "pairs.json").write_text(json.dumps(PAIRS[:1]))
    (tmp_path / "replies.yaml").write_text(
        "replies:\n  - marker: 'role=audit-judge'\n    reply: \"**Faithful**: YES\\n**Issue**: none\\n"
        "**Library reuse**: REINVENTS Nat.add_comm\\n**Cross-file reuse**: OK\\n**Why**: restates core.\"\n")
    done = CliRunner().invoke(app, ["audit", "judge", str(data_dir / "sample_lean"), "--pairs",
                                    str(tmp_path / "pairs.json"), "--mock-replies", str(tmp_path / "replies.yaml"), "--json"])
    assert done.exit_code == 0, done.output
    record = json.loads(done.output)
    assert record["judgements"][0]["reinvents"] == "Nat.add_comm" and record["duplicates"][0]["cross_file"]
