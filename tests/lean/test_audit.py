"""Trust audit: the source grep (always) and the `#print axioms` parser on hand-written SAMPLES of
Lean's documented output format (not recorded from a live Lean: none is installed here)."""

from __future__ import annotations

from pathlib import Path

from anchorage.invariants.exact import loads_exact
from anchorage.lean.audit import audit_package, disallowed, grep_source, grep_tree, judge_axioms, parse_print_axioms
from anchorage.lean.generation import generate_package
from anchorage.lean.runner import lake_path
from invariants.anchors import TASKS, anchor, anchor_path

# SAMPLE output, written by hand in the format Lean 4 documents for `#print axioms`.
SAMPLE_CLEAN = """'DragonDance.q5_head_ratio_identity' does not depend on any axioms
'Feasibility.atMost_trans' depends on axioms: [propext, Quot.sound]
'Feasibility.atLeast_mono' depends on axioms: [propext,
 Quot.sound]
"""
SAMPLE_SORRY = "'DragonDance.q5_head_speed_sign' depends on axioms: [propext, sorryAx]\n"
SAMPLE_NATIVE_OLD = "'DragonDance.q1_handles_finite_domain' depends on axioms: [Lean.ofReduceBool]\n"
SAMPLE_NATIVE_NEW = ("'DragonDance.q2_margin_sign' depends on axioms: "
                     "[DragonDance.q2_margin_sign._native.native_decide.ax_1_1, propext]\n")
SAMPLE_CLASSICAL = "'X.y' depends on axioms: [propext, Classical.choice, Quot.sound]\n"


def test_parser_reads_both_shapes_and_wrapped_lists() -> None:
    parsed = parse_print_axioms(SAMPLE_CLEAN)
    assert parsed == {"DragonDance.q5_head_ratio_identity": [], "Feasibility.atMost_trans": ["propext", "Quot.sound"],
                      "Feasibility.atLeast_mono": ["propext", "Quot.sound"]}
    assert not judge_axioms(list(parsed), parsed)


def test_untrusted_axioms_fail() -> None:
    for sample, bad in ((SAMPLE_SORRY, "sorryAx"), (SAMPLE_NATIVE_OLD, "Lean.ofReduceBool"),
                        (SAMPLE_NATIVE_NEW, "DragonDance.q2_margin_sign._native.native_decide.ax_1_1"),
                        (SAMPLE_CLASSICAL, "Classical.choice")):
        parsed = parse_print_axioms(sample)
        (name, axioms), = parsed.items()
        assert bad in disallowed(axioms)
        assert judge_axioms([name], parsed) == {name: disallowed(axioms)}
    assert disallowed(["Lean.trustCompiler"]) == ["Lean.trustCompiler"]


def test_a_theorem_missing_from_the_output_fails() -> None:
    violations = judge_axioms(["A.b", "A.c"], parse_print_axioms("'A.b' does not depend on any axioms"))
    assert list(violations) == ["A.c"]


def test_grep_finds_forbidden_tokens_outside_comments_only() -> None:
    source = """/-- a doc comment may say sorry and native_decide -/
theorem a : 1 = 1 := by decide  -- not sorry
theorem b : 2 = 2 := by sorry
theorem c : 3 = 3 := by native_decide
axiom cheat : False
theorem d : True := by admit
/- block
   sorry -/
theorem sorryless_name : True := trivial
"""
    found = [(f.line, f.token) for f in grep_source(source)]
    assert found == [(3, "sorry"), (4, "native_decide"), (5, "axiom"), (6, "admit")]


def test_library_and_generated_packages_are_clean(tmp_path: Path, repo_root: Path) -> None:
    assert grep_tree(repo_root / "lean") == []
    slug = "cumcm-2024-a-dragon-dance"
    data = anchor(slug) if anchor_path(slug).is_file() else loads_exact("{}")
    package = generate_package(TASKS / slug, data, tmp_path / "pkg")
    report = audit_package(package, repo_root / "lean")
    assert report.source_findings == []
    assert (tmp_path / "pkg" / "Audit.lean").read_text(encoding="utf-8").count("#print axioms") == \
        len(package.theorems) + 8
    if lake_path() is None:
        print("lake not on PATH: #print axioms not run; the source grep ran")
        assert not report.lean_ran and report.ok and "source grep" in report.reason
    else:
        assert report.lean_ran and report.ok, report.to_dict()


def test_injected_sorry_fails_the_audit(tmp_path: Path, repo_root: Path) -> None:
    slug = "cumcm-2024-a-dragon-dance"
    package = generate_package(TASKS / slug, anchor(slug), tmp_path / "pkg")
    text = package.module_path.read_text(encoding="utf-8").replace(":= by decide", ":= by sorry", 1)
    package.module_path.write_text(text, encoding="utf-8")
    report = audit_package(package, repo_root / "lean")
    assert not report.ok and [f.token for f in report.source_findings] == ["sorry"]
