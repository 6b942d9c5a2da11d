"""The Lean plumbing (build verdicts mapped to theorems, python+lean reports, disagreements, the axiom
audit, discrimination with Lean) exercised with a FAKE `lake` on PATH.

The fake is a test double written here, clearly not Lean: `lake build` succeeds, or fails at the
theorem named by $FAKE_LAKE_FAIL in the `file:line:col: error` shape; `lake env lean Audit.lean`
answers every `#print axioms N` with $FAKE_LAKE_AXIOMS (or "no axioms"). It checks our code around
Lean, not Lean itself (tests/lean/test_lake.py does that where a real toolchain exists)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from anchorage.lean import discrimination
from anchorage.lean.audit import audit_package
from anchorage.lean.generation import generate_package
from anchorage.lean.obligations import check_artifact, summarize
from invariants.anchors import REFERENCE_TASKS, TASKS, anchor, anchor_path

from .lake_on_path import install_fake_lake

SLUG = "cumcm-2024-a-dragon-dance"
FAKE = f"""#!{sys.executable}
# FAKE lake for tests: not Lean.
import os, pathlib, re, sys
args = sys.argv[1:]
if args[:1] == ["build"]:
    fail = os.environ.get("FAKE_LAKE_FAIL")
    for path in sorted(pathlib.Path("Obligations").glob("*.lean")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if fail and line.startswith("theorem " + fail + " "):
                print(f"error: ././././Obligations/{{path.name}}:{{number + 1}}:4: decide failed: proposition is false")
                print("error: build failed")
                sys.exit(1)
    print("Build completed successfully.")
    sys.exit(0)
if args[:2] == ["env", "lean"]:
    axioms = os.environ.get("FAKE_LAKE_AXIOMS", "")
    for name in re.findall(r"#print axioms (\\S+)", pathlib.Path(args[2]).read_text(encoding="utf-8")):
        print(f"'{{name}}' depends on axioms: [{{axioms}}]" if axioms else f"'{{name}}' does not depend on any axioms")
    sys.exit(0)
sys.exit(2)
"""


@pytest.fixture
def fake_lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if not anchor_path(SLUG).is_file():
        pytest.skip("dragon anchor missing")
    lake = install_fake_lake(monkeypatch, tmp_path / "fakebin", FAKE)
    monkeypatch.delenv("FAKE_LAKE_FAIL", raising=False)
    monkeypatch.delenv("FAKE_LAKE_AXIOMS", raising=False)
    return lake


def test_python_and_lean_agree(fake_lake: Path) -> None:
    report = check_artifact(TASKS / SLUG, anchor(SLUG))
    assert report["checker"] == "python+lean" and report["lean"]["ok"]
    assert report["counts"]["proved_by_lean"] == report["counts"]["total"] == 17
    assert report["counts"]["disagreements"] == 0
    assert summarize(TASKS / SLUG, anchor(SLUG), lean=True)["proved_by_lean"] == 17


def test_lean_failure_is_mapped_to_its_theorem_and_paths(fake_lake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_LAKE_FAIL", "q5_head_ratio_identity")
    report = check_artifact(TASKS / SLUG, anchor(SLUG))
    (error,) = report["lean"]["errors"]
    assert error["theorem"] == "DragonDance.q5_head_ratio_identity"
    assert error["paths"] == ["experiment_result.q5.max_head_speed_mps",
                              "experiment_result.q5.max_speed_ratio_when_head_1mps"]
    rows = {r["theorem"]: r for r in report["obligations"]}
    assert rows["DragonDance.q5_head_ratio_identity"]["lean"] == "failed"
    assert report["counts"]["disagreements"] == 1  # Python proved it, the (fake) Lean did not


def test_audit_reads_the_axioms(fake_lake: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                repo_root: Path) -> None:
    package = generate_package(TASKS / SLUG, anchor(SLUG), tmp_path / "pkg")
    clean = audit_package(package, repo_root / "lean")
    assert clean.lean_ran and clean.ok and len(clean.axioms) == len(package.theorems) + 8
    monkeypatch.setenv("FAKE_LAKE_AXIOMS", "propext, sorryAx")
    dirty = audit_package(package, repo_root / "lean")
    assert not dirty.ok and all(v == ["sorryAx"] for v in dirty.violations.values())


def test_discrimination_needs_lean_to_cite_the_field(fake_lake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dragon = next(m for m in discrimination.MUTATIONS if m.form == "identity")
    monkeypatch.setenv("FAKE_LAKE_FAIL", "q5_head_ratio_identity")
    cited = discrimination.run_mutation(dragon, TASKS, REFERENCE_TASKS)
    assert cited.lean_ran and cited.lean_rejected_by == ["DragonDance.q5_head_ratio_identity"] and cited.rejected
    monkeypatch.setenv("FAKE_LAKE_FAIL", "q1_handles_finite_domain")  # fails, but on another field
    wrong = discrimination.run_mutation(dragon, TASKS, REFERENCE_TASKS)
    assert wrong.lean_rejected_by == [] and not wrong.rejected
    monkeypatch.delenv("FAKE_LAKE_FAIL")
    passed = discrimination.run_mutation(dragon, TASKS, REFERENCE_TASKS)
    assert not passed.rejected and "lake build succeeded on the mutant" in passed.note


def test_check_cli_keeps_the_package_and_exits_on_disagreement(fake_lake: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from anchorage.cli import app

    artifact = anchor_path(SLUG)
    args = ["lean", "check", "--task", str(TASKS / SLUG), str(artifact), "--report-dir", str(tmp_path / "r"),
            "--keep", str(tmp_path / "keep")]
    ok = CliRunner().invoke(app, args)
    assert ok.exit_code == 0 and "checker=python+lean" in ok.output and "proved_by_lean=17" in ok.output
    assert (tmp_path / "keep" / artifact.stem / "Obligations" / "DragonDance.lean").is_file()
    monkeypatch.setenv("FAKE_LAKE_FAIL", "q2_margin_sign")
    bad = CliRunner().invoke(app, args)
    assert bad.exit_code == 1 and "DragonDance.q2_margin_sign" in bad.output
