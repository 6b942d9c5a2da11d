"""A task's scoring-profile membership: ``tests/profiles.yaml`` (which anchors and hard gates each profile uses).

Read by the scorer (:mod:`anchorage.scoring.profiles` applies it), ``anchorage tasks show --profile`` and
``anchorage tasks validate``. The format is documented in docs/design-notes.md ("Scoring profiles"); in short:

* ``anchors.paper`` — where the task's default anchor (``score_config.json`` + ``expected_result.json``)
  comes from: ``published`` (the benchmark's value) or ``corrected`` (the seed's own correction), with
  the evidence. The ``paper`` and ``strict`` profiles score against it.
* ``anchors.errata[]`` — this project's re-derived anchors, each an erratum a reader can check: the
  reproduction ``script`` and its committed ``result``, the ``reason`` (and the ``check`` the published
  value fails, where one exists), and per metric the ``published`` value and the re-derived ``value``.
  The ``errata`` profile scores against them.
* ``anchors.compat.<profile>`` — what a compatibility profile (e.g. ``tbmm-report-2026-09``) scored
  against where it differs from ``paper``: per-metric ``oracle_value`` / ``direction`` / ``weight`` /
  ``exclude_reason``, and the published ``baseline`` panel score (F) with its source.
* ``gates.paper[]`` — the gates that belong to one of the seed's four hard-gate classes (G.4): hard
  penalties under every profile. Every other gate its check marks ``hard`` is this project's addition:
  a hard penalty under ``strict`` and ``errata``, a reported warning under ``paper``.

This module only parses and checks the file's shape (no scoring): a missing file means "no errata, no
compatibility overrides, no seed-class gates" — every hard gate of such a task is a ``strict`` gate.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from anchorage.errors import InputError

PROFILES_FILE = Path("tests") / "profiles.yaml"
SEED_GATE_CLASSES: dict[str, str] = {
    "heliostat_infeasibility": "heliostat infeasibility: rated power below 60 MW or a mirror side below 2 m",
    "smoke_coverage_replay": "a smoke-screen plan that fails the independent coverage replay",
    "juneau_units": "a Juneau answer with invalid acceptance/sustainability units",
    "olympics_coach_effect": "an Olympics answer with a degenerate coach effect",
}
"""The seed's four hard-gate classes (appendix G.4): the only whole-task penalties of the ``paper`` profile."""

SeedClass = Literal["heliostat_infeasibility", "smoke_coverage_replay", "juneau_units", "olympics_coach_effect"]
Direction = Literal["higher_is_better", "lower_is_better", "target_value", "exact_value"]
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_PATH = re.compile(r"^[^.\[\]]+(\[\d+\])*(\.[^.\[\]]+(\[\d+\])*)*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)


class PaperAnchor(_Strict):
    """Where the ``paper`` anchor (the task's score_config.json and expected_result.json) comes from."""

    source: Literal["published", "corrected", "original"] = Field(
        description="published: the benchmark's anchor as it publishes it; corrected: the seed's own correction; "
                    "original: a task of this project's own, whose anchor is its reproduction")
    evidence: str = Field(min_length=1, description="where the numbers come from (file, commit, seed section)")


class AnchorValue(_Strict):
    """One metric of a profile whose anchor (or weight/direction) differs from ``paper``."""

    path: str = Field(description="the metric's JSON path, as in score_config.json")
    published: float | None = Field(None, description="the paper anchor this replaces (checked against the config)")
    value: float | None = Field(None, description="the anchor under this profile (oracle and outstanding value)")
    direction: Direction | None = Field(None, description="the metric's direction under this profile")
    weight: float | None = Field(None, ge=0, description="the metric's weight under this profile")
    exclude_reason: str | None = Field(None, description="exclude the metric under this profile, with the reason")
    include: bool = Field(False, description="score a metric the paper configuration excludes")
    note: str = ""

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not _PATH.match(value):
            raise ValueError(f"bad JSON path {value!r}: use dotted keys and [i] indexes")
        return value


class Erratum(_Strict):
    """A re-derived anchor of this project (the ``errata`` profile), with what a reader needs to check it."""

    id: str = Field(description="short kebab-case name, unique in the task")
    reason: str = Field(min_length=1, description="why the published anchor is replaced")
    script: str = Field(description="the reproduction that computes the new value, relative to the task root")
    result: str = Field(description="the reproduction's committed artifact, relative to the task root")
    check: str = Field("", description="the physical or statistical check the published value fails, if any")
    metrics: list[AnchorValue] = Field(min_length=1)

    @model_validator(mode="after")
    def _numbers(self) -> Erratum:
        if not _ID.match(self.id):
            raise ValueError(f"erratum id {self.id!r} must be kebab-case (a-z, 0-9, -)")
        for metric in self.metrics:
            if metric.published is None or metric.value is None:
                raise ValueError(f"erratum {self.id!r}: metric {metric.path!r} needs both 'published' and 'value'")
        return self


class BaselinePanel(_Strict):
    """A published baseline panel score F (the zero point of Robust BO-Eval) and where it is printed."""

    raw: float
    source: str = Field(min_length=1)


class CompatAnchors(_Strict):
    """What a compatibility profile scored against, where it differs from ``paper``."""

    evidence: str = Field(min_length=1)
    baseline: BaselinePanel | None = None
    metrics: list[AnchorValue] = Field(default_factory=list)
    gates: list[str] | None = Field(None, description=(
        "the gates (names, * globs) that are hard penalties under this profile; unset: those of gates.paper"))
    gates_note: str = Field("", description="why the profile's gates differ from gates.paper")


class Anchors(_Strict):
    paper: PaperAnchor
    errata: list[Erratum] = Field(default_factory=list)
    compat: dict[str, CompatAnchors] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _unique(self) -> Anchors:
        ids = [e.id for e in self.errata]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"erratum ids must be unique; repeated: {', '.join(dupes)}")
        paths = [m.path for e in self.errata for m in e.metrics]
        twice = sorted({p for p in paths if paths.count(p) > 1})
        if twice:
            raise ValueError(f"a metric may be re-derived by one erratum only; repeated: {', '.join(twice)}")
        return self


class PaperGate(_Strict):
    """A gate of one of the seed's hard-gate classes (G.4): a hard penalty under every profile."""

    gate: str = Field(description="a gate result name (invariant name, expanded name or replay check); * globs")
    seed_class: SeedClass = Field(alias="class")
    reason: str = Field("", description="why this gate is that class")

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.gate)


class Gates(_Strict):
    paper: list[PaperGate] = Field(default_factory=list)


class TaskProfiles(_Strict):
    """The whole ``tests/profiles.yaml``."""

    anchors: Anchors
    gates: Gates = Field(default_factory=Gates)
    notes: str = ""

    def paper_gate(self, name: str) -> PaperGate | None:
        """The seed-class declaration that covers gate ``name``, or None (a project gate)."""
        for gate in self.gates.paper:
            if gate.matches(name):
                return gate
        return None

    def compat_gate(self, profile: str, name: str) -> bool:
        """Whether gate ``name`` is a hard penalty under compatibility profile ``profile``."""
        compat = self.anchors.compat.get(profile)
        if compat is None or compat.gates is None:
            return self.paper_gate(name) is not None
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in compat.gates)

    def erratum_of(self, path: str) -> Erratum | None:
        for erratum in self.anchors.errata:
            if any(m.path == path for m in erratum.metrics):
                return erratum
        return None


EMPTY = TaskProfiles(anchors=Anchors(paper=PaperAnchor(source="published", evidence="(no tests/profiles.yaml)")))
"""What a task without ``tests/profiles.yaml`` declares: the published anchor, no errata, no seed-class gates."""


def parse_profiles(text: str, origin: str = "<text>") -> TaskProfiles:
    """Parse the YAML text; :class:`InputError` names the file and every problem."""
    try:
        raw: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{origin} is not valid YAML: {exc}", hint="fix the YAML syntax") from None
    try:
        return TaskProfiles.model_validate(raw)
    except ValidationError as exc:
        lines = "\n".join(f"  {'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}"
                          for e in exc.errors())
        raise InputError(f"{origin} does not match the profiles format:\n{lines}",
                         hint="see docs/design-notes.md, section 'Scoring profiles'") from None


_CACHE: dict[Path, tuple[int, int, TaskProfiles]] = {}


def load_profiles(task_root: Path) -> TaskProfiles:
    """The task's ``tests/profiles.yaml`` (cached by mtime and size), or :data:`EMPTY` without one."""
    path = Path(task_root) / PROFILES_FILE
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return EMPTY
    hit = _CACHE.get(path)
    if hit is not None and hit[0] == info.st_mtime_ns and hit[1] == info.st_size:
        return hit[2]
    parsed = parse_profiles(path.read_text(encoding="utf-8"), str(path))
    _CACHE[path] = (info.st_mtime_ns, info.st_size, parsed)
    return parsed


def profiles_stamp(task_root: Path) -> tuple[int, int]:
    """(mtime_ns, size) of the task's profiles file, (-1, -1) without one: part of the scorer's cache key."""
    try:
        info = (Path(task_root) / PROFILES_FILE).stat()
    except OSError:
        return (-1, -1)
    return (info.st_mtime_ns, info.st_size)
