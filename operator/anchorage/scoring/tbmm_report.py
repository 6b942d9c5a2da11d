"""The arithmetic of the benchmark's published leaderboard (profile ``tbmm-report-2026-09``).

Called by :mod:`anchorage.scoring.scorer` for records of that profile, so that numbers can be set beside
the published ones. Written here from the report's stated rules and its per-task values (the report is
``reports/full-report.md`` at commit 4a3807d of wxj630/terminal-bench-math-modeling, 2026-09-16: cells
"direction-aware raw / O-Eval / B-Eval / Robust BO-Eval"); where it differs from SPEC §4 it follows the
report, and docs/design-notes.md ("Scoring profiles") lists each difference:

* overshoot bonus: a one-sided metric that beats O earns ``1 + log1p(gain / scale)`` (> 1), so a task's
  raw may exceed 1 and O-Eval is capped at 1 (SPEC G.2 gives exactly 1.0);
* scale: ``max(abs_scale, rel_scale·max(|O|, 1))``, or the endpoint gap ``|S − B|`` where a metric has
  both endpoints (SPEC: ``max(abs_scale, rel_scale·|O|)``); ``exact_value`` scores 1 or 0;
* no degeneracy band and no ``domain`` rule; instead its **unit rule** (a percent-like field of a
  unit-scale metric reported between 10 and 100 is read as a percentage and divided by 100) and its
  **validity rules** by field name (correlations outside [-1, 1]; accuracy/F1/rate/probability/acceptance
  outside [0, 1]; a negative percent-like unit-scale value; a non-positive speed, ratio, multiplier or
  thickness where O > 0; a negative duration, visitor, user, count, gain, fee or revenue; a normalised
  value reported for the lamprey raw population indices) each give reward 0;
* the panel is the weighted mean of the rewards, not clamped to [0, 1];
* values are read with ``float()`` (a boolean counts as 1 or 0).

The metric modes' ``report_reward`` (:mod:`anchorage.scoring.modes`) holds the per-mode formulas.
"""

from __future__ import annotations

from typing import Any

from anchorage.invariants.units import REPORT_UNIT_SCALE_MAX, report_percent_reading
from anchorage.scoring.scoreconfig import Metric
from anchorage.scoring.values import to_number

_PERCENT_TOKENS = ("percent", "percentage", "pct", "index", "score", "rate", "probability", "acceptance",
                   "sustainability", "accuracy", "f1", "auc")
_NOT_PERCENT = ("multiplier", "speed_ratio", "ratio", "factor")
_UNIT_INTERVAL_TOKENS = ("accuracy", "f1", "rate", "probability", "acceptance")
_POSITIVE_TOKENS = ("speed_mps", "speed_ratio", "multiplier", "thickness_um")
_NONNEGATIVE_TOKENS = ("duration_s", "visitors", "users", "count", "gain", "fee_usd", "revenue_usd")


def _unit_scale(metric: Metric) -> bool:
    """The report's test for a unit-scale metric: every endpoint it has is at most 1.5 in magnitude."""
    values = [v for v in (metric.oracle_value, metric.baseline_value, metric.outstanding_value) if v is not None]
    return bool(values) and max(abs(v) for v in values) <= REPORT_UNIT_SCALE_MAX


def _percent_like(path: str) -> bool:
    return not any(t in path for t in _NOT_PERCENT) and any(t in path for t in _PERCENT_TOKENS)


def read_value(metric: Metric, number: float) -> tuple[float, str]:
    """The value the report scores (its unit rule) and a note when it rescaled."""
    read = report_percent_reading(number) if _unit_scale(metric) and _percent_like(metric.path.lower()) else number
    if read != number:
        return read, f"read as a percentage: {number:g} -> {read:g} (the report's unit rule)"
    return number, ""


def invalid_reason(metric: Metric, value: float) -> str | None:
    """Why the report would score ``value`` 0 as invalid, or None."""
    path = metric.path.lower()
    oracle = metric.oracle_value if metric.oracle_value is not None else metric.anchor
    if ("correlation" in path or "spearman" in path) and not -1.0 <= value <= 1.0:
        return "correlation outside [-1, 1]"
    if path.endswith("parasite_coexistence_case.final_parasite_index") and oracle > 5.0 and 0.0 <= value <= 1.0:
        return "a normalised value for a raw population index"
    if path.endswith("parasite_coexistence_case.host_fish_index") and oracle > 100.0 and 0.0 <= value <= 10.0:
        return "a normalised value for a raw population index"
    if any(t in path for t in _UNIT_INTERVAL_TOKENS) and not 0.0 <= value <= 1.0:
        return "unit-interval quantity outside [0, 1]"
    if _unit_scale(metric) and _percent_like(path) and value < 0.0:
        return "negative unit-scale percentage-like value"
    if oracle > 0.0 and value <= 0.0 and any(t in path for t in _POSITIVE_TOKENS):
        return "non-positive physical quantity"
    if value < 0.0 and any(t in path for t in _NONNEGATIVE_TOKENS):
        return "negative quantity"
    return None


def read_number(value: Any) -> tuple[float | None, str, str]:
    """(number, why not a number, note) under the report's ``float()`` reading."""
    if isinstance(value, bool):
        return float(value), "", "a boolean read as a number (the report's float())"
    number, why_not, note = to_number(value)
    return number, why_not or "", note or ""


def reward(metric: Metric, value: float) -> tuple[float, str, str]:
    """(reward, status, reason) of a finite ``value`` under the report's arithmetic."""
    scored, note = read_value(metric, value)
    why = invalid_reason(metric, scored)
    if why is not None:
        return 0.0, "invalid", f"{why} (the report's validity rule)"
    return metric.rule.report_reward(metric, scored), "scored", note


def weighted_mean(pairs: list[tuple[float, float]]) -> float:
    """The report's raw panel: Σ w·r / Σ w over weight > 0, not clamped (bonuses can lift it above 1)."""
    total = sum(w for w, _ in pairs if w > 0)
    return sum(w * r for w, r in pairs if w > 0) / total if total > 0 else 0.0
