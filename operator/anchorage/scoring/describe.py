"""What a task scores under a profile, and how that differs from ``paper`` — for ``anchorage tasks show|list``.

* :func:`tally` — the seed's tally of a task (appendix A.2, G.1, G.3): metrics *declared* in its
  configuration, *scored* (entering the panel) and *excluded* (recorded with weight 0, each with its reason).
* :func:`differences` — every difference of a profile from ``paper`` on one task: anchors replaced (with
  the erratum's script, numbers, reason and check, or the compatibility profile's evidence), metrics whose
  weight or direction changes, the baseline F, gates that become hard penalties (each with its source and
  the reason the check gives) or stop being ones, and the arithmetic.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorage.invariants.spec import load_invariants
from anchorage.scoring.profiles import PAPER, Profile, apply_profile, get_profile, penalises
from anchorage.scoring.scoreconfig import ScoreConfig, compile_config
from anchorage.scoring.scorer import ArtifactError, as_task, load_score_model, read_json_file, run_gates
from anchorage.tasks.profiles import PROFILES_FILE, TaskProfiles, load_profiles

SEED_TALLY = {"scored": 60, "weight0_declared": 1, "panel_exclusions": 3}
"""The seed's own counts: 60 scored metrics over the 18 tasks plus one Wordle metric declared with weight 0
(A.2, G.1); G.3 excludes three declared metrics from the panel for every entry and the oracle (the Olympics
4th recommendation, the two lamprey raw population indices)."""

REPORT_ARITHMETIC = [
    "overshoot bonus: a one-sided metric beating O earns 1 + log1p(gain/scale), so raw can exceed 1 (paper: 1.0)",
    "legacy scale rel_scale·max(|O|, 1) (paper: rel_scale·|O|); min-max metrics use |S − B| as the scale",
    "exact_value metrics score 1 or 0; no degeneracy band",
    "its unit rule: a unit-scale percent-like field reported in (10, 100] is divided by 100",
    "its validity rules by field name instead of the task's domains (correlation, rate, negative counts, ...)",
    "the raw panel is not clamped to [0, 1]; values read with float() (booleans count 1/0)",
]


@dataclass(frozen=True, slots=True)
class Tally:
    task: str
    declared: int
    scored: int
    excluded: list[tuple[str, str]]     # (path, reason)


@dataclass(slots=True)
class Differences:
    """How ``profile`` differs from ``paper`` on one task (empty lists: no difference)."""

    task: str
    profile: Profile
    anchors: list[dict[str, Any]] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    gates_added: list[dict[str, Any]] = field(default_factory=list)
    gates_removed: list[dict[str, Any]] = field(default_factory=list)
    baseline: dict[str, Any] | None = None
    arithmetic: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.anchors or self.metrics or self.gates_added or self.gates_removed or self.baseline
                    or self.arithmetic or self.notes)


def tally(root: Path, profile: str | Profile = PAPER) -> Tally:
    """Declared / scored / excluded metrics of the task under ``profile`` (``paper``: the seed's tally)."""
    config = _config(root, get_profile(profile))
    excluded = [(m.path, m.excluded_reason or "") for m in config.metrics if m.weight <= 0]
    return Tally(root.name, len(config.metrics), len(config.metrics) - len(excluded), excluded)


def differences(root: Path, profile: str | Profile) -> Differences:
    """Every difference of ``profile`` from ``paper`` on the task at ``root``."""
    chosen = get_profile(profile)
    declared = load_profiles(root)
    out = Differences(root.name, chosen)
    if chosen.name == PAPER.name:
        return out
    _anchor_differences(root, chosen, declared, out)
    _gate_differences(root, chosen, declared, out)
    if chosen.arithmetic != PAPER.arithmetic:
        out.arithmetic = list(REPORT_ARITHMETIC)
    return out


def _config(root: Path, profile: Profile) -> ScoreConfig:
    model = load_score_model(root / "tests" / "score_config.json")
    return compile_config(apply_profile(model, load_profiles(root), profile, str(root / PROFILES_FILE)).model)


def _anchor_differences(root: Path, profile: Profile, declared: TaskProfiles, out: Differences) -> None:
    paper = {m.path: m for m in _config(root, PAPER).metrics}
    mine = {m.path: m for m in _config(root, profile).metrics}
    for path, metric in mine.items():
        before = paper[path]
        if metric.anchor != before.anchor:
            erratum = declared.erratum_of(path) if profile.anchors == "errata" else None
            entry: dict[str, Any] = {"path": path, PAPER.name: before.anchor, "profile": metric.anchor}
            if erratum is not None:
                entry.update(erratum=erratum.id, script=erratum.script, result=erratum.result,
                             reason=" ".join(erratum.reason.split()), check=" ".join(erratum.check.split()))
            else:
                compat = declared.anchors.compat.get(profile.name)
                entry["evidence"] = " ".join(compat.evidence.split()) if compat else ""
            out.anchors.append(entry)
        changes = {key: (getattr(before, key), getattr(metric, key))
                   for key in ("direction", "weight") if getattr(before, key) != getattr(metric, key)}
        if changes:
            out.metrics.append({"path": path, **{k: {PAPER.name: a, "profile": b} for k, (a, b) in changes.items()},
                                "excluded_reason": metric.excluded_reason})
    compat = declared.anchors.compat.get(profile.name) if profile.anchors == "compat" else None
    if compat is not None and compat.baseline is not None:
        out.baseline = {"raw": compat.baseline.raw, "source": compat.baseline.source}


def _gate_differences(root: Path, profile: Profile, declared: TaskProfiles, out: Differences) -> None:
    sources = _invariant_sources(root)
    for gate in _gates(root):
        if gate.severity != "hard":
            continue
        before, after = penalises(PAPER, declared, gate.name), penalises(profile, declared, gate.name)
        if before == after:
            continue
        entry = {"gate": gate.name, "form": gate.form, "source": _source_of(gate.name, gate.form, sources),
                 "status": gate.status, "reason": gate.message}
        paper_class = declared.paper_gate(gate.name)
        if paper_class is not None:
            entry["seed_class"] = paper_class.seed_class
        (out.gates_added if after else out.gates_removed).append(entry)
    compat = declared.anchors.compat.get(profile.name) if profile.anchors == "compat" else None
    if compat is not None and compat.gates_note:
        out.notes.append("gates: " + " ".join(compat.gates_note.split()))


def _gates(root: Path) -> list[Any]:
    """The gate results of the task's checks on its own anchor: every gate the task has, by name."""
    try:
        data = read_json_file(root / "tests" / "expected_result.json", exact=True)
    except ArtifactError:
        data = {}
    return run_gates(as_task(root), data)


def _invariant_sources(root: Path) -> dict[str, str]:
    spec = load_invariants(root)
    if spec is None:
        return {}
    return {inv.name: inv.source or f"tests/invariants.yaml: {inv.form} on {', '.join(inv.read_paths())}"
            for inv in spec.invariants}


def _source_of(name: str, form: str, sources: dict[str, str]) -> str:
    if form == "replay":
        return "replay check (anchorage.invariants.replays)"
    for invariant, source in sources.items():
        if re.fullmatch(rf"{re.escape(invariant)}(_\d+)?_{re.escape(form)}", name):
            return source
    return "tests/invariants.yaml"


def to_json(diff: Differences) -> str:
    return json.dumps({"task": diff.task, "profile": diff.profile.ref, "anchors": diff.anchors,
                       "metrics": diff.metrics, "gates_added": diff.gates_added,
                       "gates_removed": diff.gates_removed, "baseline": diff.baseline,
                       "arithmetic": diff.arithmetic, "notes": diff.notes}, indent=2, ensure_ascii=False)
