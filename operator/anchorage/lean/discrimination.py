"""The discrimination suite (``anchorage lean discriminate``, SPEC §5 H.4).

Ten mutations over the six forms, each changing ONE numeric leaf of a task's anchor artifact. A
mutation is *rejected* when an obligation that reads the mutated field fails — by the exact Python
checker always, and by ``lake build`` (a failing theorem whose JSON paths include the field) where
Lean is installed. The suite fails (non-zero exit in the CLI) if any mutation is not rejected, or if
an anchor is not accepted before mutation (a suite that rejects everything proves nothing).
"""

from __future__ import annotations

import copy
import tempfile
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from anchorage.invariants.compiler import obligations
from anchorage.invariants.exact import WILDCARD, _step, format_path, load_exact, parse_path
from anchorage.invariants.spec import load_invariants
from anchorage.lean import runner
from anchorage.lean.generation import generate_package


@dataclass(frozen=True)
class Mutation:
    label: str
    task: str
    path: str
    value: str          # decimal text of the new leaf
    form: str           # the form expected to reject it

    @property
    def number(self) -> Decimal | int:
        return int(self.value) if self.value.lstrip("-").isdigit() else Decimal(self.value)


MUTATIONS: tuple[Mutation, ...] = (
    Mutation("probability out of bounds", "mcm-2024-b-submersible-search",
             "experiment_result.search_strategy.find_probability_6h", "1.2", "range"),
    Mutation("correlation out of bounds", "mcm-2024-c-tennis-momentum",
             "experiment_result.top_swing_features[0].warning_correlation", "1.5", "range"),
    Mutation("reversed ordering", "cumcm-2025-c-nipt", "experiment_result.earliest_recommended_week", "22", "ordering"),
    Mutation("violated exact identity", "cumcm-2024-a-dragon-dance", "experiment_result.q5.max_head_speed_mps",
             "1.406276", "identity"),
    Mutation("non-positive thickness", "cumcm-2025-b-sic-thickness", "experiment_result.si_recommended_thickness_um",
             "0", "sign"),
    Mutation("reversed interval", "mcm-2025-a-stair-wear", "experiment_result.age_interval_years[0]", "450", "interval"),
    Mutation("non-binary decision bit", "cumcm-2024-b-production-decision", "experiment_result.q3.decision_bits[0]",
             "2", "finite_domain"),
    Mutation("negative acceptance index", "mcm-2025-b-juneau-tourism", "experiment_result.resident_acceptance_index",
             "-0.1", "range"),
    Mutation("q95 below the mean", "cumcm-2024-b-production-decision",
             "experiment_result.q4.posterior_rows[0].posterior_q95_defect_rate", "0.1", "ordering"),
    Mutation("zero species count", "mcm-2023-a-plant-community", "target_comparison.optimal_species_count.actual",
             "0", "range"),
)


@dataclass
class MutationResult:
    mutation: Mutation
    original: str
    anchor_accepted: bool
    python_rejected_by: list[str] = field(default_factory=list)   # failing obligations citing the field
    lean_ran: bool = False
    lean_rejected_by: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def rejected(self) -> bool:
        forms_ok = any(name.endswith(f"_{self.mutation.form}") for name in self.python_rejected_by)
        lean_ok = bool(self.lean_rejected_by) if self.lean_ran else True
        return self.anchor_accepted and forms_ok and lean_ok

    def to_dict(self) -> dict[str, Any]:
        m = self.mutation
        return {"label": m.label, "task": m.task, "path": m.path, "original": self.original, "mutated": m.value,
                "form": m.form, "anchor_accepted": self.anchor_accepted, "python_rejected_by": self.python_rejected_by,
                "lean_ran": self.lean_ran, "lean_rejected_by": self.lean_rejected_by, "rejected": self.rejected,
                "note": self.note}


def anchor_path(tasks_dir: Path, task: str, reference_tasks: Path | None = None) -> Path:
    """The task's committed anchor (``tests/expected_result.json``), else the reference data pack's."""
    own = tasks_dir / task / "tests" / "expected_result.json"
    if own.is_file() or reference_tasks is None:
        return own
    return reference_tasks / task / "tests" / "expected_result.json"


def set_leaf(data: Any, path: str, value: Any) -> tuple[Any, Any]:
    """A deep copy of ``data`` with the leaf at ``path`` replaced; also the old leaf."""
    segments = parse_path(path)
    if WILDCARD in segments:
        raise ValueError(f"mutation path {path!r} must name one leaf")
    mutated = copy.deepcopy(data)
    parent = mutated
    for segment in segments[:-1]:
        parent = _step(parent, segment)
    last = segments[-1]
    old = parent[last]
    parent[last] = value
    return mutated, old


def _failing_citations(task_root: Path, data: Any, path: str) -> tuple[list[str], list[str]]:
    """(names of failing hard obligations reading ``path``, names of all failing hard obligations)."""
    spec = load_invariants(task_root)
    assert spec is not None
    failing = [ob for ob in obligations(spec, data) if not ob.skipped and ob.severity == "hard" and not ob.holds()]
    canonical = format_path(parse_path(path))
    return [ob.name for ob in failing if canonical in ob.paths], [ob.name for ob in failing]


def run_mutation(mutation: Mutation, tasks_dir: Path, reference_tasks: Path | None = None,
                 *, lean: bool = True) -> MutationResult:
    task_root = tasks_dir / mutation.task
    anchor = load_exact(anchor_path(tasks_dir, mutation.task, reference_tasks))
    _, failing_before = _failing_citations(task_root, anchor, mutation.path)
    mutated, old = set_leaf(anchor, mutation.path, mutation.number)
    cited, _ = _failing_citations(task_root, mutated, mutation.path)
    result = MutationResult(mutation, str(old), anchor_accepted=not failing_before, python_rejected_by=cited)
    if failing_before:
        result.note = f"anchor already fails: {', '.join(failing_before)}"
    if lean and runner.lake_path() is not None:
        with tempfile.TemporaryDirectory(prefix="anchorage-discriminate-") as tmp:
            package = generate_package(task_root, mutated, Path(tmp), artifact_label=f"mutation: {mutation.label}")
            outcome = runner.build(package)
        result.lean_ran = True
        canonical = format_path(parse_path(mutation.path))
        result.lean_rejected_by = sorted({e.theorem for e in outcome.errors if e.theorem and canonical in e.paths})
        if outcome.ok:
            result.note = (result.note + "; " if result.note else "") + "lake build succeeded on the mutant"
    elif lean:
        result.note = (result.note + "; " if result.note else "") + runner.no_lean_reason()
    return result


def run_suite(tasks_dir: Path, reference_tasks: Path | None = None, *, lean: bool = True) -> list[MutationResult]:
    return [run_mutation(m, tasks_dir, reference_tasks, lean=lean) for m in MUTATIONS]
