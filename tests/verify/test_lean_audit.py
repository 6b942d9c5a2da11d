"""Formalization audit: the scanner flags the planted sorry and axiom; the sorry gate compares git revisions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.lean.lake_on_path import install_fake_lake
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.errors import InputError
from anchorage.verify.lean_audit import audit_project, mask, scan_source


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
                   check=True, capture_output=True)


@pytest.fixture
def sample(data_dir: Path, tmp_path: Path) -> Path:
    project = tmp_path / "repo" / "formal"
    shutil.copytree(data_dir / "sample_lean", project)
    return project


def test_sample_project_flags_planted_sorry_and_axiom(data_dir: Path) -> None:
    record = audit_project(data_dir / "sample_lean", use_lean=False)
    findings = {(f["kind"], f["declaration"]) for f in record["findings"]}
    assert findings == {("axiom", "Sample.cheat"), ("sorry", "Sample.pending_lemma")}
    assert record["sorry_total"] == 1                      # comments, doc comments and strings saying sorry: none
    gates = {g["name"]: g["status"] for g in record["gates"]}
    assert gates == {"sorry_not_rising": "skipped", "no_axiom_declarations": "fail", "build": "skipped",
                     "axiom_audit": "skipped"}
    assert not record["ok"]
    names = {d["name"] for d in record["declarations"]}
    assert {"Sample.add_comm'", "Sample.double", "Sample.greeting", "Sample.quote"} <= names


def test_allowing_the_axiom_passes_the_declaration_gate(data_dir: Path) -> None:
    record = audit_project(data_dir / "sample_lean", allow_axioms=frozenset({"Sample.cheat"}), use_lean=False)
    assert record["ok"]
    assert audit_project(data_dir / "sample_lean", allow_axioms=frozenset({"Sample.cheat"}), max_sorry=0,
                         use_lean=False)["ok"] is False


def test_require_lean_fails_skipped_lean_gates(data_dir: Path) -> None:
    record = audit_project(data_dir / "sample_lean", allow_axioms=frozenset({"Sample.cheat"}), require_lean=True,
                           use_lean=False)
    assert {g["name"]: g["status"] for g in record["gates"]}["build"] == "fail" and not record["ok"]


def test_sorry_gate_fails_when_the_count_rises_between_revisions(sample: Path) -> None:
    repo = sample.parent
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    basic = sample / "Sample" / "Basic.lean"
    basic.write_text(basic.read_text().replace("  omega", "  sorry"))
    record = audit_project(sample, base="HEAD", allow_axioms=frozenset({"Sample.cheat"}), use_lean=False)
    gate = next(g for g in record["gates"] if g["name"] == "sorry_not_rising")
    assert gate["status"] == "fail" and "1 sorry at HEAD → 2 now" in gate["detail"]
    assert not record["ok"]
    rise = next(f for f in record["findings"] if f["declaration"] == "Sample.double")
    assert rise["rise"] == 1
    _git(repo, "commit", "-q", "-am", "more sorry")
    basic.write_text(basic.read_text().replace("  sorry", "  omega"))   # progress: the count falls
    record = audit_project(sample, base="HEAD", allow_axioms=frozenset({"Sample.cheat"}), use_lean=False)
    assert record["ok"] and record["sorry_total_base"] == 2 and record["sorry_total"] == 1


def test_unknown_base_revision_is_an_input_error(sample: Path) -> None:
    _git(sample.parent, "init", "-q")
    with pytest.raises(InputError, match="--base needs a revision"):
        audit_project(sample, base="no-such-rev", use_lean=False)


def test_cli_exit_codes(sample: Path) -> None:
    runner = CliRunner()
    failing = runner.invoke(app, ["audit", "lean", str(sample), "--json", "--no-lean"])
    assert failing.exit_code == 1 and json.loads(failing.output)["ok"] is False
    passing = runner.invoke(app, ["audit", "lean", str(sample), "--allow-axiom", "Sample.cheat", "--no-lean"])
    assert passing.exit_code == 0, passing.output
    assert "Sample.pending_lemma" in passing.output and "skipped" in passing.output


@pytest.mark.parametrize(("source", "sorries"), [
    ("theorem a : True := by sorry", 1),
    ("-- sorry\ntheorem a : True := trivial", 0),
    ("/- outer /- inner sorry -/ still comment sorry -/\ndef x := 1", 0),
    ('def s := "sorry \\" sorry"\ntheorem t : True := by\n  sorry', 1),
    ("theorem sorry_free : True := trivial", 0),
    ("theorem t : True := by\n  admit", 1),
    ("lemma h' : 1 = 1 := by\n  have h'' : True := sorry\n  rfl", 1),
], ids=["tactic", "line-comment", "nested-comment", "string-escape", "identifier", "admit", "primes"])
def test_scanner_counts_only_real_sorries(source: str, sorries: int) -> None:
    assert scan_source(source).sorries == sorries


def test_scanner_attributes_sorries_and_namespaces() -> None:
    source = ("namespace A\nnamespace B\ntheorem t1 : True := sorry\nend B\n"
              "@[simp] private lemma t2 : True := by\n  sorry\n  -- sorry\nexample : True := sorry\nend A\n"
              "theorem _root_.top : True := trivial\ninstance : Inhabited Nat := ⟨sorry⟩\n")
    decls = {d.name: d.sorries for d in scan_source(source).declarations}
    assert decls == {"A.B.t1": 1, "A.t2": 1, "example@8": 1, "top": 0, "instance@11": 1}
    assert len(mask("/- a -/ b")) == len("/- a -/ b")


FAKE_LAKE = """#!/bin/sh
# A stand-in for lake (no Lean toolchain on this machine): prints what Lean prints for the sample project.
if [ "$1" = "build" ]; then
  [ -f BROKEN ] && { echo "error: Sample/Basic.lean:3:0: unexpected token"; exit 1; }
  echo "Build completed successfully."; exit 0
fi
if [ "$1" = "env" ] && [ "$2" = "lean" ]; then
  grep -q "#print axioms Sample.pending_lemma" "$3" || exit 3
  echo "'Sample.add_comm'' does not depend on any axioms"
  echo "'Sample.double' depends on axioms: [propext, Classical.choice, Quot.sound]"
  echo "'Sample.uses_cheat' depends on axioms: [Sample.cheat]"
  echo "'Sample.pending_lemma' depends on axioms: [sorryAx]"
  exit 0
fi
exit 2
"""


@pytest.fixture
def fake_lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A labelled stand-in for `lake` on PATH, to exercise the Lean branch of the audit."""
    return install_fake_lake(monkeypatch, tmp_path / "fakebin", FAKE_LAKE, rest=os.environ["PATH"])


def test_axiom_audit_with_lean_flags_sorry_ax_and_the_planted_axiom(sample: Path, fake_lake: Path) -> None:
    record = audit_project(sample, allow_axioms=frozenset({"Sample.cheat"}))
    gates = {g["name"]: g for g in record["gates"]}
    assert gates["build"]["status"] == "pass"
    assert gates["axiom_audit"]["status"] == "fail" and "Sample.pending_lemma: sorryAx" in gates["axiom_audit"]["detail"]
    assert "Sample.uses_cheat" not in gates["axiom_audit"]["detail"]          # allowed explicitly
    axioms = {d["name"]: d["axioms"] for d in record["declarations"]}
    assert axioms["Sample.double"] == ["propext", "Classical.choice", "Quot.sound"]
    assert axioms["Sample.add_comm'"] == [] and axioms["Sample.greeting"] is None   # not printed → None
    assert not (sample / "AnchorageAxiomAudit.lean").exists()                 # the temporary file is removed
    strict = audit_project(sample)
    detail = {g["name"]: g["detail"] for g in strict["gates"]}["axiom_audit"]
    assert "Sample.uses_cheat: Sample.cheat" in detail


def test_build_gate_fails_when_lake_build_fails(sample: Path, fake_lake: Path) -> None:
    (sample / "BROKEN").write_text("")
    record = audit_project(sample, allow_axioms=frozenset({"Sample.cheat"}))
    build = next(g for g in record["gates"] if g["name"] == "build")
    assert build["status"] == "fail" and "unexpected token" in build["detail"] and not record["ok"]
