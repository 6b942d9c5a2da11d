"""A task's reproduction compared with its published anchor: per-metric rewards, O-Eval and a verdict.

A reproduction is a task's ``solution/solve.sh`` (our own script implementing the Outstanding paper's
method); its committed output is ``solution/reproduced_result.json`` and its comparison with the anchor
(``tests/score_config.json`` + ``tests/expected_result.json``, which stay the published anchor) is
``solution/comparison.json``. Called by ``tools/anchor_table.py`` (writes the comparison files and the
anchor table of ``tasks/README.md``) and by ``tests/anchors/test_reproductions.py`` (checks the
committed figures are what the scorer computes now).

Verdicts (one per task, over the metrics that enter the panel):

* ``reproduces`` — every scored metric is within its own tolerance, ``|a − O| ≤ tol``: the distance at which
  the metric's two-sided reward falls to 0.5 — ``max(abs_scale, rel_scale·|O|)`` in the legacy mode,
  ``|O − B| / 2`` in the min-max mode —; and no hard gate fails;
* ``exceeds_anchor`` — no hard gate fails, every scored metric is within its tolerance or beats the anchor
  beyond it, and at least one beats it: the reproduction does *not* reproduce the published values (it finds
  better ones), though O-Eval, capped by the one-sided reward, may be 1.0 — a disagreement, explained like one;
* ``close`` — otherwise, O-Eval against the anchor ≥ 0.9 and no metric beats the anchor beyond its tolerance;
* ``disagrees`` — otherwise. A disagreement (``exceeds_anchor`` or ``disagrees``) is explained by hand in
  ``comparison.json`` (``disagreement.kind``: ``erratum`` — a check the published value fails, declared as an
  erratum anchor in ``tests/profiles.yaml`` — or ``not_reproduced`` — what differs, when no check decides).

A one-sided metric (``higher_is_better`` / ``lower_is_better``) that beats the anchor earns 1.0 however far
it lands (SPEC §4, G.2): beyond its tolerance it is not reproduced (the published value is not what the
reproduction finds) — it is marked ``exceeds_anchor``, counts fully in O-Eval, and never lets the verdict be
``reproduces`` or ``close``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from anchorage.scoring.modes import get_mode
from anchorage.scoring.profiles import PAPER, PROFILES
from anchorage.scoring.records import SCORER_VERSION, MetricResult, ScoreRecord
from anchorage.scoring.scorer import as_task, score_data
from anchorage.tasks import Task

Verdict = Literal["reproduces", "exceeds_anchor", "close", "disagrees"]
VERDICTS: tuple[Verdict, ...] = ("reproduces", "exceeds_anchor", "close", "disagrees")
DISAGREEING: tuple[Verdict, ...] = ("exceeds_anchor", "disagrees")
"""The verdicts whose ``comparison.json`` must explain the disagreement (``disagreement``)."""
DISAGREEMENT_KINDS = ("erratum", "not_reproduced")
TOLERANCE_REWARD = 0.5
"""Where no distance scale is known (a mode without one), a metric is within tolerance at this reward."""
CLOSE_O_EVAL = 0.9
PROFILE = PAPER.name
REPRODUCED_RESULT = "reproduced_result.json"
COMPARISON = "comparison.json"
COMPUTED_KEYS = ("task", "profile", "scorer_version", "metrics", "raw", "oracle_raw", "o_eval",
                 "hard_gates_failed", "verdict")
"""The keys of ``comparison.json`` that :func:`compare` computes (the rest is written by hand or measured)."""


@dataclass(frozen=True)
class MetricComparison:
    """One scored metric: the reproduction's value, the published anchor and the reward it earns."""

    path: str
    reproduced: float | None
    anchor: float
    reward: float | None
    weight: float
    status: str
    tolerance: float | None = None

    @property
    def within_tolerance(self) -> bool:
        if self.reproduced is None or self.reward is None or self.status != "scored":
            return False
        if self.tolerance is None:
            return self.reward >= TOLERANCE_REWARD
        return abs(self.reproduced - self.anchor) <= self.tolerance

    @property
    def exceeds_anchor(self) -> bool:
        """Beats the anchor in a one-sided metric's better direction by more than its tolerance (reward 1)."""
        return self.reward == 1.0 and self.reproduced is not None and not self.within_tolerance

    def to_dict(self) -> dict[str, Any]:
        scored = self.weight > 0
        return {"path": self.path, "reproduced": self.reproduced, "anchor": self.anchor,
                "reward": None if self.reward is None else round(self.reward, 6), "weight": self.weight,
                "status": self.status, "within_tolerance": self.within_tolerance if scored else None,
                "exceeds_anchor": self.exceeds_anchor if scored else None}


@dataclass(frozen=True)
class Comparison:
    """The reproduction of one task scored against its anchor under the ``paper`` profile."""

    task: str
    metrics: list[MetricComparison]
    raw: float
    oracle_raw: float
    o_eval: float
    hard_gates_failed: list[str]

    @property
    def verdict(self) -> Verdict:
        scored = [m for m in self.metrics if m.weight > 0]
        if not self.hard_gates_failed and scored and all(m.within_tolerance for m in scored):
            return "reproduces"
        beyond = any(m.exceeds_anchor for m in scored)
        if beyond and not self.hard_gates_failed and all(m.within_tolerance or m.exceeds_anchor for m in scored):
            return "exceeds_anchor"
        return "close" if self.o_eval >= CLOSE_O_EVAL and not beyond else "disagrees"

    @property
    def differing(self) -> list[MetricComparison]:
        """The panel metrics outside their tolerance."""
        return [m for m in self.metrics if m.weight > 0 and not m.within_tolerance]

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "profile": PROFILE, "scorer_version": SCORER_VERSION,
                "metrics": [m.to_dict() for m in self.metrics], "raw": round(self.raw, 6),
                "oracle_raw": round(self.oracle_raw, 6), "o_eval": round(self.o_eval, 6),
                "hard_gates_failed": list(self.hard_gates_failed), "verdict": self.verdict}


def compare(task: Task | str, data: Any) -> Comparison:
    """Score ``data`` (a reproduction's parsed artifact) against ``task``'s anchor."""
    loaded = as_task(task)
    return _comparison(loaded, score_data(loaded, data, profile=PROFILE))


def _comparison(task: Task, record: ScoreRecord) -> Comparison:
    metrics = [MetricComparison(r.path, r.number, r.anchor, r.reward, r.weight, r.status, _tolerance(r))
               for r in record.metrics]
    failed = [g.name for g in record.gates if g.status == "failed" and g.severity == "hard"]
    return Comparison(task.slug, metrics, record.raw, record.oracle_raw, record.o_eval, failed)


def outcome(task: Task | str, data: Any) -> dict[str, Any]:
    """The scorer's discrete verdict on ``data`` under every profile — what a run's last digits must not change.

    Per profile: gradable, the hard gates failed, the comparison's verdict, each metric's status (and, when it
    is in the panel, whether it is within its anchor's tolerance or beyond it on the better side), each gate's
    status. Rewards are continuous and left out: a digit moves them by as little. Used by
    :func:`anchorage.scoring.rerun.band_flips`.
    """
    loaded = as_task(task)
    out: dict[str, Any] = {}
    for name in PROFILES:
        record = score_data(loaded, data, profile=name)
        comparison = _comparison(loaded, record)
        out[f"{name}: gradable"] = record.gradable
        out[f"{name}: hard gates failed"] = tuple(comparison.hard_gates_failed)
        out[f"{name}: verdict"] = comparison.verdict
        for m in comparison.metrics:
            out[f"{name}: metric {m.path}"] = \
                (m.status, m.within_tolerance, m.exceeds_anchor) if m.weight > 0 else m.status
        for gate in record.gates:
            out[f"{name}: gate {gate.name}"] = gate.status
    return out


def scorer_reads(task: Task | str, data: Any) -> tuple[list[tuple[str, float | None]], list[tuple[str, list[str]]]]:
    """What the scorer reads of ``data``: the panel metrics (path, anchor) and the gates (name, paths), over
    every profile (a profile may add anchors or gates)."""
    loaded = as_task(task)
    metrics: dict[tuple[str, float | None], None] = {}
    gates: dict[str, list[str]] = {}
    for name in PROFILES:
        record = score_data(loaded, data, profile=name)
        metrics.update(((m.path, m.anchor), None) for m in record.metrics if m.weight > 0)
        for gate in record.gates:
            gates.setdefault(gate.name, list(gate.paths))
    return list(metrics), sorted(gates.items())


def _tolerance(result: MetricResult) -> float | None:
    """The distance from the anchor at which a two-sided reward falls to 0.5 (None: no such scale)."""
    return get_mode(result.mode).tolerance(result.anchor, result)


def check_disagreement(comparison: dict[str, Any]) -> list[str]:
    """Problems of the hand-written part of a ``comparison.json`` (empty when it is complete)."""
    problems: list[str] = []
    note = comparison.get("disagreement")
    verdict = comparison.get("verdict")
    if verdict in DISAGREEING:
        if not isinstance(note, dict):
            return [f"verdict {verdict!r} needs a 'disagreement' object (kind erratum | not_reproduced, reason)"]
        if note.get("kind") not in DISAGREEMENT_KINDS:
            problems.append(f"disagreement.kind must be one of {', '.join(DISAGREEMENT_KINDS)}")
        if not str(note.get("reason", "")).strip():
            problems.append("disagreement.reason is empty: say what differs and why")
        if note.get("kind") == "erratum" and not str(note.get("check", "")).strip():
            problems.append("an erratum names the check the published value fails (disagreement.check)")
    elif note is not None:
        problems.append(f"verdict {verdict!r} has a 'disagreement' entry; remove it")
    return problems
