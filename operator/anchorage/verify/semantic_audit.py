"""Judge-based semantic audit of a Lean formalization (seed 001, §3.2; SPEC §7), plus textual duplicates.

Kernel acceptance does not make a formalization faithful. For each pair (natural-language statement,
Lean declaration) a fresh judge call through the gateway reads the source statement, the declaration's
statement (from :mod:`anchorage.verify.lean_audit`'s scanner, comments removed) and the other
declarations of the project, and answers on the three dimensions of the seed:

* **faithfulness** — ``YES | PARTIAL | NO`` with the issue (incomplete statement, weakened hypothesis,
  parameter restriction, vacuous, other);
* **library reuse** — ``OK | REINVENTS <name>``;
* **cross-file reuse** — ``OK | DUPLICATES <declaration>``.

A mechanical companion needs no model: :func:`duplicate_statements` groups theorems/lemmas/defs whose
statements are textually identical once keyword and name are removed (binder names count: it finds copies,
not alpha-equivalent restatements). Used by ``anchorage audit judge``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from anchorage.errors import InfrastructureError, InputError
from anchorage.verify.lean_audit import Declaration, FileScan, scan_project
from anchorage.verify.models import ModelClient
from anchorage.verify.prompts import PromptSet, fill, load_prompts

_STATEMENT_KINDS = ("theorem", "lemma", "def", "abbrev")
_LEADING = re.compile(r"^(?:@\[[^\]]*\]\s*|(?:private|protected|noncomputable|partial|unsafe|nonrec)\s+)*"
                      r"(?:theorem|lemma|def|abbrev)\s+\S+\s*")
_FIELD = {
    "faithful": re.compile(r"faithful\W*\s*(?P<v>yes|partial|no)\b", re.IGNORECASE),
    "issue": re.compile(r"issue\W*\s*(?P<v>[^\n]*)", re.IGNORECASE),
    "library_reuse": re.compile(r"library reuse\W*\s*(?P<v>[^\n]*)", re.IGNORECASE),
    "cross_file_reuse": re.compile(r"cross-file reuse\W*\s*(?P<v>[^\n]*)", re.IGNORECASE),
    "why": re.compile(r"why\W*\s*(?P<v>.*)", re.IGNORECASE | re.DOTALL),
}
MAX_CONTEXT = 200


def statement_of(decl: Declaration) -> str:
    """The declaration's statement without keyword, modifiers and name."""
    return _LEADING.sub("", decl.header).strip()


def duplicate_statements(scans: list[FileScan]) -> list[dict[str, Any]]:
    """Groups of declarations with textually identical statements (candidates for reuse)."""
    groups: dict[str, list[Declaration]] = defaultdict(list)
    for scan in scans:
        for decl in scan.declarations:
            if decl.kind in _STATEMENT_KINDS and statement_of(decl):
                groups[statement_of(decl)].append(decl)
    return [{"statement": text, "declarations": [{"name": d.name, "file": d.file, "line": d.line} for d in decls],
             "cross_file": len({d.file for d in decls}) > 1}
            for text, decls in groups.items() if len(decls) > 1]


def parse_judgement(reply: str) -> dict[str, Any]:
    """The judge's answer; an unreadable faithfulness line is recorded as ``unknown`` with the reason."""
    found = {key: (m.group("v").strip(" *_`[]") if (m := rx.search(reply)) else "") for key, rx in _FIELD.items()}
    faithful = found["faithful"].upper() or "UNKNOWN"
    record: dict[str, Any] = {
        "faithful": faithful, "issue": found["issue"] or "none",
        "reinvents": _after(found["library_reuse"], "REINVENTS"),
        "duplicates": _after(found["cross_file_reuse"], "DUPLICATES"),
        "why": re.sub(r"\s+", " ", found["why"]).strip(),
    }
    if faithful == "UNKNOWN":
        record["reason"] = "no 'Faithful: YES | PARTIAL | NO' line in the judge's reply"
    return record


def _after(value: str, word: str) -> str | None:
    match = re.search(rf"{word}\s*(?P<rest>.*)", value, re.IGNORECASE)
    return match.group("rest").strip(" *_`[]") or word.lower() if match else None


def _context(scans: list[FileScan], skip: str) -> str:
    lines = [f"- {d.name} ({d.file}): {statement_of(d)}" for s in scans for d in s.declarations
             if d.name != skip and d.kind in _STATEMENT_KINDS]
    return "\n".join(lines[:MAX_CONTEXT]) or "(none)"


def judge_pairs(project: Path, pairs: list[dict[str, str]], client: ModelClient, *, model: str,
                prompts: PromptSet | None = None) -> dict[str, Any]:
    """Judge every (statement, declaration) pair; the record lists judgements, duplicates and ``ok``."""
    prompts = prompts or load_prompts()
    scans = scan_project(project)
    by_name = {d.name: d for s in scans for d in s.declarations}
    unknown = [p.get("declaration") for p in pairs if p.get("declaration") not in by_name]
    if unknown:
        raise InputError(f"declarations not found in {project}: {', '.join(map(str, unknown))}",
                         hint="use namespace-qualified names as `anchorage audit lean --json` lists them")
    template = prompts.text("audit_judge.md")

    def judge(pair: dict[str, str]) -> dict[str, Any]:
        decl = by_name[pair["declaration"]]
        values = {"header": f"[anchorage-verify {prompts.version} role=audit-judge declaration={decl.name}]",
                  "statement": pair["statement"].strip(), "declaration": decl.header,
                  "context": _context(scans, decl.name)}
        try:
            reply = client.complete([{"role": "user", "content": fill(template, values, "audit_judge.md")}],
                                    model=model, seed=0, run_id=f"audit/{decl.name}").text
        except InfrastructureError as exc:
            return {"declaration": decl.name, "file": decl.file, "faithful": "UNKNOWN", "reason": exc.message}
        return {"declaration": decl.name, "file": decl.file, **parse_judgement(reply)}

    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="audit-judge") as pool:
        judgements = list(pool.map(judge, pairs))
    duplicates = duplicate_statements(scans)
    return {"project": str(project), "judgements": judgements, "duplicates": duplicates,
            "summary": {v: sum(j["faithful"] == v for j in judgements) for v in ("YES", "PARTIAL", "NO", "UNKNOWN")},
            "ok": all(j["faithful"] == "YES" and not j.get("duplicates") for j in judgements)}
