"""Trust audit of generated obligations (``anchorage lean audit``, SPEC §5 H.3).

Two independent parts:

* a **source grep** (always runs): the Lean sources of the package and of the Feasibility library,
  comments stripped, must not contain ``sorry``, ``admit``, ``native_decide``, ``axiom``
  declarations, ``Lean.ofReduceBool``, ``Lean.trustCompiler``, ``implemented_by``/``extern`` or
  ``unsafe``;
* an **axiom audit** (where ``lake`` is on PATH): a generated ``Audit.lean`` runs ``#print axioms``
  for every theorem; the full axiom set of each may only contain ``propext`` and ``Quot.sound``
  (or nothing). ``sorryAx``, ``Lean.ofReduceBool``, ``Lean.trustCompiler`` and any
  ``…native_decide…`` auxiliary axiom fail the audit, as does a theorem missing from the output.

:func:`parse_print_axioms` reads Lean's documented output lines
``'N' depends on axioms: [a, b]`` and ``'N' does not depend on any axioms``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from anchorage.lean import runner
from anchorage.lean.generation import LIB_NAME, GeneratedPackage

ALLOWED_AXIOMS = frozenset({"propext", "Quot.sound"})
FORBIDDEN_TOKENS = ("sorry", "admit", "native_decide", "axiom", "Lean.ofReduceBool", "Lean.trustCompiler",
                    "implemented_by", "extern", "unsafe")
AUDIT_FILE = "Audit.lean"

_BLOCK_COMMENT = re.compile(r"/-.*?-/", re.DOTALL)
_LINE_COMMENT = re.compile(r"--[^\n]*")
_DEPENDS = re.compile(r"'(?P<name>[^']+)'\s+depends on axioms:\s*\[(?P<axioms>[^\]]*)\]", re.DOTALL)
_NO_AXIOMS = re.compile(r"'(?P<name>[^']+)'\s+does not depend on any axioms")
_LIBRARY_LEMMAS = ("atMost_trans", "atLeast_mono", "inRange_widen", "inRange_wellFormed", "pos_nonNeg",
                   "int_atMost_trans", "int_atLeast_mono", "int_inRange_widen")


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    token: str
    text: str


def strip_comments(source: str) -> str:
    """Lean source with comments blanked out (line numbers kept)."""
    blanked = _BLOCK_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)
    return _LINE_COMMENT.sub("", blanked)


def grep_source(text: str, filename: str = "<source>") -> list[Finding]:
    """Forbidden tokens in one Lean source (outside comments), as whole identifiers."""
    findings: list[Finding] = []
    for number, line in enumerate(strip_comments(text).splitlines(), start=1):
        for token in FORBIDDEN_TOKENS:
            if re.search(rf"(?<![\w.]){re.escape(token)}(?![\w])", line):
                findings.append(Finding(filename, number, token, line.strip()))
    return findings


def grep_tree(*roots: Path) -> list[Finding]:
    """Forbidden tokens in every ``.lean`` file under the roots (build output excluded)."""
    findings: list[Finding] = []
    for root in roots:
        files = [root] if root.is_file() else sorted(root.rglob("*.lean"))
        for path in files:
            if ".lake" in path.parts or path.name == AUDIT_FILE:
                continue
            findings.extend(grep_source(path.read_text(encoding="utf-8"), str(path)))
    return findings


def parse_print_axioms(output: str) -> dict[str, list[str]]:
    """Theorem name → its axioms, from the output of ``#print axioms`` commands."""
    found: dict[str, list[str]] = {}
    for match in _DEPENDS.finditer(output):
        found[match.group("name")] = [a.strip() for a in match.group("axioms").split(",") if a.strip()]
    for match in _NO_AXIOMS.finditer(output):
        found[match.group("name")] = []
    return found


def disallowed(axioms: list[str]) -> list[str]:
    """The axioms that break trust (anything outside propext and Quot.sound)."""
    return [a for a in axioms if a not in ALLOWED_AXIOMS]


def audit_file_text(theorems: list[str]) -> str:
    lines = [f"import {LIB_NAME}", "import Feasibility", ""]
    lines += [f"#print axioms {name}" for name in theorems]
    return "\n".join(lines) + "\n"


@dataclass
class AuditReport:
    source_findings: list[Finding] = field(default_factory=list)
    lean_ran: bool = False
    reason: str = ""
    axioms: dict[str, list[str]] = field(default_factory=dict)
    violations: dict[str, list[str]] = field(default_factory=dict)   # theorem → bad axioms / "not printed"

    @property
    def ok(self) -> bool:
        return not self.source_findings and not self.violations

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "checker": "grep+lean" if self.lean_ran else "grep",
            "lean_ran": self.lean_ran,
            "reason": self.reason,
            "source_findings": [f.__dict__ for f in self.source_findings],
            "axioms": self.axioms,
            "violations": self.violations,
        }


def judge_axioms(expected: list[str], printed: dict[str, list[str]]) -> dict[str, list[str]]:
    """Violations: theorems with a disallowed axiom, and theorems absent from the output."""
    violations: dict[str, list[str]] = {}
    for name in expected:
        if name not in printed:
            violations[name] = ["<not printed: the theorem did not elaborate>"]
        elif disallowed(printed[name]):
            violations[name] = disallowed(printed[name])
    return violations


def audit_package(package: GeneratedPackage, library: Path) -> AuditReport:
    """Grep the sources always; print and judge every theorem's axioms where Lean is installed."""
    report = AuditReport(source_findings=grep_tree(package.root, library))
    theorems = [t.full_name for t in package.theorems] + [f"Feasibility.{name}" for name in _LIBRARY_LEMMAS]
    audit_path = package.root / AUDIT_FILE
    audit_path.write_text(audit_file_text(theorems), encoding="utf-8")
    if runner.lake_path() is None:
        report.reason = runner.no_lean_reason().replace("the Python exact checker", "the source grep")
        return report
    build = runner.build(package)
    if not build.ok:
        report.lean_ran = True
        report.reason = "lake build failed; axioms of the failing theorems cannot be printed"
    _, output = runner.run_lean_file(package.root, audit_path)
    report.lean_ran = True
    report.axioms = parse_print_axioms(output)
    report.violations = judge_axioms(theorems, report.axioms)
    return report
