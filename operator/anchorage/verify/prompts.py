"""Versioned prompt files (``prompts/verify/<version>/``) and the typed builders that fill them.

The builders are where context isolation is enforced *by type*: a verifier's messages are built from a
:class:`VerifierInput`, which holds a :class:`Problem` and a :class:`CleanedSolution` and nothing else —
there is no slot for the solver's trace (a ``CleanedSolution`` can only come out of
:func:`anchorage.verify.cleaning.clean_solution`) nor for other verifiers' verdicts. A reviser gets the
cleaned solution and the hole reports, never the raw output. Every call is a new two-message
conversation (system + user): no history is ever carried over.

Each message starts with a header line ``[anchorage-verify <version> role=<role> problem=<id>
solution=<digest>]`` that attributes the call in gateway logs (and lets the labelled mock model script
replies per role); it names no other verdict.

Prompt files: a leading ``<!-- … -->`` comment documents the file and is stripped; ``{{name}}``
placeholders are filled, and a missing or unknown placeholder is an error. The directory is
``$ANCHORAGE_PROMPTS/verify`` or the repository's ``prompts/verify``. Used by the panel, the numeric
path and consequence-based utility.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from anchorage.errors import InputError
from anchorage.verify.cleaning import CleanedSolution
from anchorage.verify.verdicts import Kind, Verdict

Message = dict[str, str]
_LEADING_COMMENT = re.compile(r"\A\s*<!--.*?-->\s*\n", re.DOTALL)
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
REPO_PROMPTS = Path(__file__).resolve().parents[3] / "prompts"


@dataclass(frozen=True)
class Problem:
    """A problem statement with a stable id (file stem, task name …)."""

    id: str
    statement: str

    def __post_init__(self) -> None:
        if not self.statement.strip():
            raise InputError(f"problem {self.id!r} has an empty statement", hint="pass a non-empty problem file")


@dataclass(frozen=True)
class VerifierInput:
    """Everything a verifier may see: the problem and one cleaned solution. Nothing else, by construction."""

    problem: Problem
    solution: CleanedSolution

    def __post_init__(self) -> None:
        if not isinstance(self.problem, Problem) or not isinstance(self.solution, CleanedSolution):
            raise TypeError("VerifierInput takes a Problem and a CleanedSolution (see clean_solution())")


@dataclass(frozen=True)
class RevisionInput:
    """What a reviser sees: problem, cleaned solution and the hole reports (never the solver's trace)."""

    problem: Problem
    solution: CleanedSolution
    holes: tuple[Verdict, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.solution, CleanedSolution):
            raise TypeError("RevisionInput takes a CleanedSolution (see clean_solution())")
        if not self.holes or any(h.kind is not Kind.HOLE_FOUND for h in self.holes):
            raise ValueError("a revision needs at least one HOLE FOUND report")


@dataclass(frozen=True)
class Pattern:
    id: str
    name: str
    check: str


def prompts_root() -> Path:
    env = os.environ.get("ANCHORAGE_PROMPTS")
    return (Path(env) if env else REPO_PROMPTS) / "verify"


def fill(template: str, values: dict[str, str], name: str = "<template>") -> str:
    """Replace ``{{key}}`` placeholders; every placeholder must be given and every value used."""
    wanted = set(_PLACEHOLDER.findall(template))
    if wanted != set(values):
        raise InputError(f"prompt {name}: placeholders {sorted(wanted)} but values for {sorted(values)}",
                         hint="keep the prompt file's {{placeholders}} in line with anchorage.verify.prompts")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


class PromptSet:
    """One version of the prompt files."""

    def __init__(self, version: str = "v1", root: Path | None = None) -> None:
        self.version = version
        self.directory = (root or prompts_root()) / version
        if not self.directory.is_dir():
            raise InputError(f"prompt version {version!r} not found at {self.directory}",
                             hint="use a directory under prompts/verify/ or set ANCHORAGE_PROMPTS")

    def text(self, name: str) -> str:
        path = self.directory / name
        try:
            return _LEADING_COMMENT.sub("", path.read_text(encoding="utf-8"), count=1).strip() + "\n"
        except OSError as exc:
            raise InputError(f"cannot read prompt file {path}: {exc.strerror}",
                             hint=f"prompt version {self.version} must contain {name}") from exc

    def data(self, name: str) -> Any:
        try:
            return yaml.safe_load((self.directory / name).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise InputError(f"cannot read prompt data {self.directory / name}: {exc}") from exc

    def header(self, role: str, problem: Problem, solution: CleanedSolution | None = None) -> str:
        digest = f" solution={solution.digest}" if solution is not None else ""
        return f"[anchorage-verify {self.version} role={role} problem={problem.id}{digest}]"

    def _conversation(self, system: str, user: str, values: dict[str, str]) -> list[Message]:
        return [{"role": "system", "content": self.text(system)},
                {"role": "user", "content": fill(self.text(user), values, user)}]

    def verifier(self, given: VerifierInput) -> list[Message]:
        values = {"header": self.header("verifier", given.problem, given.solution),
                  "problem": given.problem.statement.strip(), "solution": given.solution.text}
        return self._conversation("verifier.md", "verifier_user.md", values)

    def patterns(self) -> list[Pattern]:
        return [Pattern(str(p["id"]), str(p["name"]), str(p["check"])) for p in self.data("patterns.yaml")]

    def pattern_verifier(self, given: VerifierInput, pattern: Pattern) -> list[Message]:
        system = fill(self.text("pattern_verifier.md"),
                      {"pattern_id": pattern.id, "pattern_name": pattern.name, "pattern_check": pattern.check})
        values = {"header": self.header(f"pattern{pattern.id}", given.problem, given.solution),
                  "problem": given.problem.statement.strip(), "solution": given.solution.text}
        return [{"role": "system", "content": system},
                {"role": "user", "content": fill(self.text("verifier_user.md"), values)}]

    def angles(self) -> list[str]:
        return [str(a) for a in self.data("angles.yaml")]

    def solver(self, problem: Problem, angle: str) -> list[Message]:
        values = {"header": self.header("solver", problem), "problem": problem.statement.strip(), "angle": angle}
        return self._conversation("solver.md", "solver_user.md", values)

    def reviser(self, given: RevisionInput) -> list[Message]:
        holes = "\n\n".join(h.hole_report() for h in given.holes)
        values = {"header": self.header("reviser", given.problem, given.solution),
                  "problem": given.problem.statement.strip(), "solution": given.solution.text, "holes": holes}
        return self._conversation("reviser.md", "reviser_user.md", values)

    def numeric_check(self, problem: Problem, answer: str) -> list[Message]:
        values = {"header": self.header("numeric-check", problem), "problem": problem.statement.strip(),
                  "answer": answer}
        return [{"role": "user", "content": fill(self.text("numeric_check.md"), values, "numeric_check.md")}]

    def cbu(self, problem: Problem, candidate: CleanedSolution, neighbour: Problem) -> list[Message]:
        values = {"header": self.header(f"cbu-solver neighbour={neighbour.id}", problem, candidate),
                  "problem": problem.statement.strip(), "candidate": candidate.text,
                  "neighbour": neighbour.statement.strip()}
        return [{"role": "user", "content": fill(self.text("cbu_exemplar.md"), values, "cbu_exemplar.md")}]


@cache
def load_prompts(version: str = "v1") -> PromptSet:
    return PromptSet(version)
