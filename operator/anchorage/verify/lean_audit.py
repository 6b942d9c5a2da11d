"""Formalization audit of a Lean project (seed 001; SPEC §7): sorry and axiom accounting, mechanical gates.

Called by ``anchorage audit lean PROJECT [--base REV]``. Parts:

* a **declaration scanner** (always runs, no Lean needed): comments (nested ``/- -/``, ``--``) and string
  and char literals are masked, then every ``theorem | lemma | def | instance | example | abbrev`` (and, as
  boundaries, ``axiom | opaque | structure | inductive | class``) starts a declaration that runs to the next
  one or to the next top-level command (``namespace``, ``end``, ``section``, ``open``, ``#…`` …). Names are
  qualified by the enclosing ``namespace``s. Per declaration it counts ``sorry`` (and ``admit``, Lean's
  synonym) tokens; every ``axiom`` declaration is flagged (a planted axiom makes anything provable);
* an **axiom audit** per declaration where ``lake`` is on PATH: ``#print axioms`` of every named
  declaration via ``lake env lean`` (parsed by :func:`parse_print_axioms`, which, unlike the obligation
  layer's, accepts names with ``'``); anything
  outside ``propext``, ``Quot.sound``, ``Classical.choice`` (and ``--allow-axiom``) — ``sorryAx``,
  ``Lean.ofReduceBool``, a planted axiom — is a violation. Without ``lake`` it is skipped and says so;
* **gates**: ``sorry_not_rising`` (the total may not rise against ``--base REV``: every ``.lean`` file of
  the project at that revision is read with ``git show REV:path``), ``build`` (``lake build`` passes),
  ``no_axiom_declarations``, ``axiom_audit``, and optionally ``max_sorry``. A gate is ``pass``, ``fail``
  or ``skipped`` (with the reason); the command exits 1 when any gate fails (``--require-lean`` turns a
  skipped Lean gate into a failure).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorage.errors import InputError

STANDARD_AXIOMS = frozenset({"propext", "Quot.sound", "Classical.choice"})
DECL_KEYWORDS = ("theorem", "lemma", "def", "instance", "example", "abbrev")
BOUNDARY_KEYWORDS = ("axiom", "opaque", "structure", "inductive", "class")
SKIP_DIRS = frozenset({".lake", "lake-packages", "build", ".git"})
_MODIFIERS = r"(?:(?:@\[[^\]]*\]|private|protected|noncomputable|partial|unsafe|nonrec|scoped|local)\s+)*"
_DECL = re.compile(
    rf"^[ \t]*{_MODIFIERS}(?P<kw>{'|'.join(DECL_KEYWORDS + BOUNDARY_KEYWORDS)})\b(?P<rest>[^\n]*)", re.MULTILINE)
_COMMAND = re.compile(r"^(?:namespace|end|section|open|variable|universe|set_option|import|mutual|attribute|#\w+)\b",
                      re.MULTILINE)
_SORRY = re.compile(r"(?<![\w.'])(?:sorry|admit)(?![\w'])")
_NAME = re.compile(r"^\s+(?P<name>[^\s:({\[⦃]+)")
GIT_TIMEOUT_S = 60
LAKE_TIMEOUT_S = 1800


def mask(source: str) -> str:
    """The source with comments and string/char literals blanked (same length, newlines kept)."""
    out = list(source)
    i, n, depth = 0, len(source), 0

    def blank(start: int, end: int) -> None:
        for j in range(start, end):
            if out[j] != "\n":
                out[j] = " "

    while i < n:
        if source.startswith("/-", i):
            depth, start = 1, i
            i += 2
            while i < n and depth:
                if source.startswith("/-", i):
                    depth, i = depth + 1, i + 2
                elif source.startswith("-/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            blank(start, i)
        elif source.startswith("--", i):
            end = source.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif source[i] == '"':
            start, i = i, i + 1
            while i < n and source[i] != '"':
                i += 2 if source[i] == "\\" else 1
            i = min(i + 1, n)
            blank(start, i)
        elif source[i] == "'" and (i == 0 or not (source[i - 1].isalnum() or source[i - 1] in "_'.")):
            literal = re.match(r"'(?:\\.[^']*|[^\\'\n])'", source[i:])
            if literal:
                blank(i, i + literal.end())
                i += literal.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


@dataclass
class Declaration:
    name: str
    kind: str
    file: str
    line: int
    end_line: int
    sorries: int = 0
    axioms: list[str] | None = None    # from #print axioms, where Lean ran
    header: str = ""                   # the statement: keyword to ``:=``/``where``, comments removed

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "file": self.file, "line": self.line,
                "end_line": self.end_line, "sorries": self.sorries, "axioms": self.axioms}


@dataclass
class FileScan:
    file: str
    declarations: list[Declaration] = field(default_factory=list)
    top_level_sorries: int = 0

    @property
    def sorries(self) -> int:
        return self.top_level_sorries + sum(d.sorries for d in self.declarations)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _namespaces(code: str, upto: int) -> list[str]:
    """The namespace stack in force at offset ``upto`` (sections pop their own ``end``)."""
    stack: list[tuple[str, str]] = []
    for match in re.finditer(r"^(namespace|section|end)\b[ \t]*([^\s]*)", code[:upto], re.MULTILINE):
        kind, name = match.group(1), match.group(2)
        if kind in ("namespace", "section"):
            stack.append((kind, name))
        elif stack:
            stack.pop()
    return [name for kind, name in stack if kind == "namespace" and name]


def _decl_name(kind: str, rest: str, prefix: list[str], line: int) -> str:
    match = _NAME.match(rest)
    if kind == "example" or match is None or (kind == "instance" and rest.lstrip().startswith(("(", ":", "["))):
        return f"{kind}@{line}"
    name = match.group("name")
    if name.startswith("_root_."):
        return name.removeprefix("_root_.")
    return ".".join([*prefix, name])


def _header(code: str, start: int, end: int) -> str:
    """The declaration's statement: from its keyword to the first ``:=``, ``where`` or ``|`` alternative."""
    body = code[start:end]
    stop = re.search(r":=|\bwhere\b|\n\s*\|", body)
    return re.sub(r"\s+", " ", body[:stop.start()] if stop else body).strip()[:1000]


def scan_source(source: str, filename: str = "<source>") -> FileScan:
    """Declarations with their sorry counts, for one Lean file."""
    code = mask(source)
    starts = [(m.start(), m) for m in _DECL.finditer(code)]
    stops = sorted([s for s, _ in starts] + [m.start() for m in _COMMAND.finditer(code)] + [len(code)])
    scan = FileScan(filename)
    covered = 0
    for start, match in starts:
        end = next(s for s in stops if s > start)
        line = _line_of(code, start)
        name = _decl_name(match.group("kw"), match.group("rest"), _namespaces(code, start), line)
        body = code[start:end]
        scan.declarations.append(Declaration(name, match.group("kw"), filename, line,
                                             _line_of(code, max(start, end - 1)), len(_SORRY.findall(body)),
                                             header=_header(code, start, end)))
        covered += len(_SORRY.findall(body))
    scan.top_level_sorries = len(_SORRY.findall(code)) - covered
    return scan


def _is_source(relative: Path) -> bool:
    """A project source (not the Lake build script, not build output or dependencies)."""
    return relative.suffix == ".lean" and relative.parts != ("lakefile.lean",) and \
        not SKIP_DIRS.intersection(relative.parts)


def lean_files(project: Path) -> list[Path]:
    return sorted(p for p in project.rglob("*.lean") if _is_source(p.relative_to(project)))


def scan_project(project: Path) -> list[FileScan]:
    if not project.is_dir():
        raise InputError(f"Lean project {project} is not a directory", hint="pass the folder holding lakefile.lean")
    return [scan_source(p.read_text(encoding="utf-8"), str(p.relative_to(project))) for p in lean_files(project)]


# ----- git revisions -------------------------------------------------------------------------------------

def _git(project: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(project), *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"git {' '.join(args)} failed: {exc}", hint="is git installed?") from exc
    if done.returncode != 0:
        raise InputError(f"git {' '.join(args)} failed in {project}: {done.stderr.strip()}",
                         hint="--base needs a revision of the git repository that holds PROJECT")
    return done.stdout


def scan_revision(project: Path, rev: str) -> list[FileScan]:
    """Scan every ``.lean`` file of the project as it was at ``rev`` (``git show REV:path``)."""
    prefix = _git(project, "rev-parse", "--show-prefix").strip()
    top = Path(_git(project, "rev-parse", "--show-toplevel").strip())
    _git(top, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    listing = _git(top, "ls-tree", "-r", "--name-only", rev, "--", prefix or ".").splitlines()
    scans = []
    for path in sorted(listing):
        relative = path.removeprefix(prefix)
        if not _is_source(Path(relative)):
            continue
        scans.append(scan_source(_git(top, "show", f"{rev}:{path}"), relative))
    return scans


# ----- Lean (optional) ------------------------------------------------------------------------------------

def _run(cmd: list[str], cwd: Path) -> tuple[bool, str]:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=LAKE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return False, f"{' '.join(cmd)} timed out after {LAKE_TIMEOUT_S} s"
    return done.returncode == 0, done.stdout + done.stderr


def build(project: Path, lake: str) -> tuple[bool, str]:
    return _run([lake, "build"], project)


_DEPENDS = re.compile(r"^'(?P<name>.+?)' depends on axioms: \[(?P<axioms>[^\]]*)\]", re.MULTILINE)
_NO_AXIOMS = re.compile(r"^'(?P<name>.+?)' does not depend on any axioms", re.MULTILINE)


def parse_print_axioms(output: str) -> dict[str, list[str]]:
    """Declaration → axioms from ``#print axioms`` output. Unlike the obligation layer's parser this one
    accepts names containing ``'`` (``add_comm'``), common in hand-written projects."""
    found = {m.group("name"): [a.strip() for a in m.group("axioms").split(",") if a.strip()]
             for m in _DEPENDS.finditer(output)}
    found.update({m.group("name"): [] for m in _NO_AXIOMS.finditer(output)})
    return found


def print_axioms(project: Path, lake: str, scans: list[FileScan]) -> tuple[dict[str, list[str]], str]:
    """``#print axioms`` of every named declaration (a temporary file beside the sources)."""
    modules = [s.file.removesuffix(".lean").replace("/", ".") for s in scans]
    names = [d.name for s in scans for d in s.declarations if "@" not in d.name and d.kind != "axiom"]
    audit = project / "AnchorageAxiomAudit.lean"
    audit.write_text("\n".join([*(f"import {m}" for m in modules), "", *(f"#print axioms {n}" for n in names)]) + "\n",
                     encoding="utf-8")
    try:
        _, output = _run([lake, "env", "lean", audit.name], project)
    finally:
        audit.unlink(missing_ok=True)
    return parse_print_axioms(output), output


# ----- the audit --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Gate:
    name: str
    status: str        # pass | fail | skipped
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


def _sorry_gate(now: int, base_scans: list[FileScan] | None, base: str | None) -> Gate:
    if base_scans is None:
        return Gate("sorry_not_rising", "skipped", "no --base revision given")
    before = sum(s.sorries for s in base_scans)
    status = "fail" if now > before else "pass"
    return Gate("sorry_not_rising", status, f"{before} sorry at {base} → {now} now")


def _axiom_decl_gate(scans: list[FileScan], allowed: frozenset[str]) -> Gate:
    planted = [d.name for s in scans for d in s.declarations if d.kind == "axiom" and d.name not in allowed]
    if planted:
        return Gate("no_axiom_declarations", "fail", f"axiom declared: {', '.join(planted)}")
    return Gate("no_axiom_declarations", "pass", "no axiom declarations")


def _lean_gates(project: Path, scans: list[FileScan], allowed: frozenset[str], lake: str | None) -> list[Gate]:
    if lake is None:
        reason = "Lean not run (lake not on PATH, or --no-lean): no build, no #print axioms; the source scanner ran"
        return [Gate("build", "skipped", reason), Gate("axiom_audit", "skipped", reason)]
    ok, output = build(project, lake)
    gates = [Gate("build", "pass" if ok else "fail", "lake build passed" if ok else output.strip()[-800:])]
    printed, _ = print_axioms(project, lake, scans)
    bad: list[str] = []
    for scan in scans:
        for decl in scan.declarations:
            if decl.name in printed:
                decl.axioms = printed[decl.name]
                extra = [a for a in decl.axioms if a not in STANDARD_AXIOMS | allowed]
                if extra:
                    bad.append(f"{decl.name}: {', '.join(extra)}")
    gates.append(Gate("axiom_audit", "fail" if bad else "pass", "; ".join(bad) or
                      f"{len(printed)} declarations use only {', '.join(sorted(STANDARD_AXIOMS))}"))
    return gates


def audit_project(project: Path, *, base: str | None = None, allow_axioms: frozenset[str] = frozenset(),
                  max_sorry: int | None = None, require_lean: bool = False, use_lean: bool = True) -> dict[str, Any]:
    """The audit record: per-file and per-declaration counts, findings, gates, ``ok``.

    Lean runs where ``lake`` is on PATH (``anchorage.lean.runner.lake_path``) unless ``use_lean`` is False.
    """
    from anchorage.lean.runner import lake_path

    lake = lake_path() if use_lean else None
    scans = scan_project(project)
    base_scans = scan_revision(project, base) if base else None
    total = sum(s.sorries for s in scans)
    gates = [_sorry_gate(total, base_scans, base), _axiom_decl_gate(scans, allow_axioms),
             *_lean_gates(project, scans, allow_axioms, lake)]
    if max_sorry is not None:
        gates.append(Gate("max_sorry", "fail" if total > max_sorry else "pass", f"{total} sorry (max {max_sorry})"))
    if require_lean:
        gates = [Gate(g.name, "fail", f"--require-lean: {g.detail}") if g.status == "skipped" and g.name in
                 ("build", "axiom_audit") else g for g in gates]
    return {
        "project": str(project), "base": base, "ok": all(g.status != "fail" for g in gates),
        "sorry_total": total, "sorry_total_base": sum(s.sorries for s in base_scans) if base_scans is not None else None,
        "files": [{"file": s.file, "sorries": s.sorries, "top_level_sorries": s.top_level_sorries} for s in scans],
        "declarations": [d.to_dict() for s in scans for d in s.declarations],
        "findings": _findings(scans, base_scans),
        "gates": [g.to_dict() for g in gates],
    }


def _findings(scans: list[FileScan], base_scans: list[FileScan] | None) -> list[dict[str, Any]]:
    before = {d.name: d.sorries for s in base_scans or [] for d in s.declarations}
    found: list[dict[str, Any]] = []
    for scan in scans:
        for decl in scan.declarations:
            where = {"declaration": decl.name, "file": decl.file, "line": decl.line}
            if decl.kind == "axiom":
                found.append({"kind": "axiom", **where})
            if decl.sorries:
                rise = decl.sorries - before.get(decl.name, 0) if base_scans is not None else None
                found.append({"kind": "sorry", "count": decl.sorries, "rise": rise, **where})
        if scan.top_level_sorries:
            found.append({"kind": "sorry", "count": scan.top_level_sorries, "declaration": None, "file": scan.file})
    return found
