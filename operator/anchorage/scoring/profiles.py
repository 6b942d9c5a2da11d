"""Scoring profiles: named, versioned rule sets a campaign, a ScoringRun or ``anchorage score`` opts into.

Used by :mod:`anchorage.scoring.scorer` (every record names its profile), the CLI (``--profile``), the
manifests (``spec.scoring.profile``), the leaderboard, the report and the metrics. The *rules* of a
profile live here; what each task contributes (its errata, its compatibility anchors, which of its gates
belong to the seed's hard-gate classes) lives in the task's ``tests/profiles.yaml``
(:mod:`anchorage.tasks.profiles`). docs/design-notes.md "Scoring profiles" is the reference.

* ``paper`` (default): the seed's rules — SPEC §4's formulas, the seed's exclusions and anchors; only the
  seed's four hard-gate classes (G.4) penalise; every other failed gate is a reported warning.
* ``strict``: ``paper`` plus this project's additional feasibility gates as hard penalties.
* ``errata``: ``strict`` plus this project's re-derived anchors (each an erratum with script and numbers).
* ``tbmm-report-2026-09``: the published leaderboard's arithmetic (reports/full-report.md at 4a3807d of
  the benchmark's repository), so numbers can be set beside it; see :mod:`anchorage.scoring.tbmm_report`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from anchorage.errors import InputError, did_you_mean
from anchorage.invariants.gates import with_severity
from anchorage.invariants.results import GateResult
from anchorage.scoring.scoreconfig import MetricSpec, ScoreConfigModel
from anchorage.tasks.profiles import AnchorValue, BaselinePanel, TaskProfiles

Arithmetic = Literal["seed", "tbmm-report-2026-09"]
AnchorSet = Literal["paper", "errata", "compat"]
GateSet = Literal["seed_classes", "all_hard"]


@dataclass(frozen=True, slots=True)
class Profile:
    """One scoring profile. ``ref`` (``name@version``) is what records, boards and metrics carry."""

    name: str
    version: int
    summary: str
    extends: str | None
    arithmetic: Arithmetic      # seed: SPEC §4; tbmm-report-2026-09: the published report's generator
    anchors: AnchorSet          # paper: the task's files; errata: + tests/profiles.yaml errata; compat: + compat
    gates: GateSet              # seed_classes: only gates.paper of tests/profiles.yaml; all_hard: every hard gate

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


PAPER = Profile(
    "paper", 1, "the seed's rules: SPEC §4 formulas, the seed's exclusions and anchors, only the seed's "
    "hard-gate classes penalise (other gates are reported warnings)", None, "seed", "paper", "seed_classes")
STRICT = Profile(
    "strict", 1, "paper + this project's additional feasibility gates as hard penalties", "paper", "seed",
    "paper", "all_hard")
ERRATA = Profile(
    "errata", 1, "strict + this project's re-derived anchors where a reproduction disagrees with the "
    "published one (each an erratum with script, numbers and reason)", "strict", "seed", "errata", "all_hard")
TBMM_REPORT = Profile(
    "tbmm-report-2026-09", 1, "compatibility: the arithmetic of the benchmark's published leaderboard "
    "(reports/full-report.md at 4a3807d, 2026-09-16): overshoot bonus, scale rel·max(|O|,1), its unit and "
    "validity rules, its anchors and flash baseline", None, "tbmm-report-2026-09", "compat", "seed_classes")

PROFILES: dict[str, Profile] = {p.name: p for p in (PAPER, STRICT, ERRATA, TBMM_REPORT)}
DEFAULT_PROFILE = PAPER.name


def get_profile(name: str | Profile | None) -> Profile:
    """The profile called ``name`` (``name`` or ``name@version``); None → the default (``paper``)."""
    if isinstance(name, Profile):
        return name
    if name is None or name == "":
        return PAPER
    base, _, version = name.partition("@")
    profile = PROFILES.get(base)
    if profile is None:
        close = did_you_mean(base, PROFILES)
        raise InputError(f"unknown scoring profile {name!r}" + (f" ({close})" if close else ""),
                         hint=f"use one of: {', '.join(PROFILES)} (docs/design-notes.md 'Scoring profiles')")
    if version and version != str(profile.version):
        raise InputError(f"scoring profile {base!r} has version {profile.version}, not {version!r}",
                         hint=f"use {profile.ref} (or just {base})")
    return profile


def profile_names() -> list[str]:
    return list(PROFILES)


# --- applying a profile to a task ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Applied:
    """A task's scoring configuration as a profile sees it."""

    model: ScoreConfigModel
    substitutions: dict[str, float]     # metric path → the profile's anchor (written into the oracle artifact)
    baseline: BaselinePanel | None      # the profile's published F for this task, if any
    anchor_source: str                  # e.g. "paper (published)", "errata: per-plot-milp-optimum"


def apply_profile(model: ScoreConfigModel, task_profiles: TaskProfiles, profile: Profile, source: str) -> Applied:
    """``model`` with the profile's metric overrides of the task applied; :class:`InputError` on a bad path."""
    patches: list[AnchorValue] = []
    anchor_source = f"paper ({task_profiles.anchors.paper.source})"
    baseline: BaselinePanel | None = None
    if profile.anchors == "errata" and task_profiles.anchors.errata:
        patches = [m for e in task_profiles.anchors.errata for m in e.metrics]
        anchor_source = "errata: " + ", ".join(e.id for e in task_profiles.anchors.errata)
    elif profile.anchors == "compat":
        compat = task_profiles.anchors.compat.get(profile.name)
        if compat is not None:
            patches, baseline = list(compat.metrics), compat.baseline
            anchor_source = f"{profile.name} (compat)"
    if not patches:
        return Applied(model, {}, baseline, anchor_source)
    by_path = {m.path: i for i, m in enumerate(model.metrics)}
    metrics = list(model.metrics)
    substitutions: dict[str, float] = {}
    for patch in patches:
        index = by_path.get(patch.path)
        if index is None:
            raise InputError(f"{source}: profile {profile.name!r} overrides metric {patch.path!r}, which the "
                             "task's score_config.json does not declare",
                             hint="use a path of tests/score_config.json in tests/profiles.yaml")
        metrics[index] = _patched(metrics[index], patch)
        if patch.value is not None:
            substitutions[patch.path] = patch.value
    return Applied(model.model_copy(update={"metrics": metrics}), substitutions, baseline, anchor_source)


def _patched(spec: MetricSpec, patch: AnchorValue) -> MetricSpec:
    update: dict[str, Any] = {}
    if patch.value is not None:
        update["oracle_value"] = patch.value
        if spec.outstanding_value is not None:
            update["outstanding_value"] = patch.value
    if patch.direction is not None:
        update.update(direction=patch.direction, semantic_direction=patch.direction,
                      normalization_direction=patch.direction)
    if patch.weight is not None:
        update["weight"] = patch.weight
        if spec.score_weight is not None:
            update["score_weight"] = patch.weight
    if patch.include:
        update["exclude_reason"] = None
    if patch.exclude_reason is not None:
        update["exclude_reason"] = patch.exclude_reason
    return spec.model_copy(update=update)


def penalises(profile: Profile, task_profiles: TaskProfiles, name: str) -> bool:
    """Whether a ``hard`` gate called ``name`` is a hard penalty under ``profile``: every hard gate
    (``strict``, ``errata``), the seed's classes (``paper``), or a compatibility profile's own list."""
    if profile.gates == "all_hard":
        return True
    if profile.anchors == "compat":
        return task_profiles.compat_gate(profile.name, name)
    return task_profiles.paper_gate(name) is not None


def profile_gates(results: list[GateResult], task_profiles: TaskProfiles, profile: Profile,
                  memo: dict[str, bool] | None = None) -> list[GateResult]:
    """The gate results as ``profile`` sees them: a ``hard`` gate outside its penalties becomes a reported
    warning (its message says where it is hard); everything else is unchanged. ``memo`` (gate name →
    penalises, kept by the caller per task and profile) spares the name matching on every artifact."""
    if profile.gates == "all_hard":
        return results
    memo = {} if memo is None else memo
    out: list[GateResult] = []
    for gate in results:
        if gate.severity != "hard":
            out.append(gate)
            continue
        hard = memo.get(gate.name)
        if hard is None:
            hard = memo[gate.name] = penalises(profile, task_profiles, gate.name)
        if hard:
            out.append(gate)
        elif gate.status == "failed":
            out.append(GateResult(gate.name, gate.form, gate.paths, gate.status, "warning",
                                  f"{gate.message} [a warning under {profile.name}; a hard gate under strict and "
                                  "errata]", dict(gate.values)))
        else:
            out.append(with_severity(gate, "warning"))
    return out
