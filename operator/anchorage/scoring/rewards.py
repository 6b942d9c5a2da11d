"""Per-metric rewards, the panel, O-Eval and Robust BO-Eval (SPEC §4; appendix G).

Pure functions over numbers, called by :mod:`anchorage.scoring.scorer`. Every formula is the
contract of SPEC §4; ``a`` is the submitted value, ``O`` the anchor, ``B`` the baseline endpoint. The
per-mode formulas live with their mode in :mod:`anchorage.scoring.modes`:

* legacy: ``r = 1 / (1 + |a − O| / max(abs_scale, rel_scale·|O|))`` (15 of 18 reference tasks);
* min-max: ``r = clamp(1 − |a − O| / |O − B|, 0, 1)``, and r = 0 when O is not better than B in the
  normalisation direction (the reference's ``score_result.py`` semantics);
* one-sided (G.2): for ``higher_is_better`` / ``lower_is_better`` metrics (the *semantic* direction), a
  value reaching or beating O gets exactly 1.0 — the reference scorer penalised overshoot here; SPEC
  G.2 does not, and a contract test locks it. ``target_value`` / ``exact_value`` penalise both sides.
* degeneracy band (G.6): the denominator is never below the metric's band floor (see
  :mod:`anchorage.scoring.scoreconfig`), so nothing is divided by ~0; the compiled metric carries it.
"""

from __future__ import annotations

from anchorage.scoring.modes import reaches_anchor
from anchorage.scoring.scoreconfig import Domain, Metric

BO_MIN_GAP = 0.10
_GAP_TOLERANCE = 1e-12  # so that O = 1.0, F = 0.9 (gap 0.09999999999999998 in floats) takes the ≥ 0.10 branch

__all__ = ["BO_MIN_GAP", "bo_eval", "domain_violation", "metric_reward", "o_eval", "panel", "reaches_anchor"]


def metric_reward(metric: Metric, value: float) -> float:
    """r ∈ [0, 1] for a finite ``value`` inside the metric's domain (the caller checks both): its mode's reward."""
    return metric.rule.reward(metric, value)


def domain_violation(domain: Domain | None, value: float) -> str | None:
    """Why ``value`` lies outside ``domain`` (G.3), or None."""
    if domain is None:
        return None
    if domain == "correlation" and not -1.0 <= value <= 1.0:
        return f"correlation {value:g} outside [-1, 1]"
    if domain == "unit_interval" and not 0.0 <= value <= 1.0:
        return f"unit-interval quantity {value:g} outside [0, 1]"
    if domain == "count" and value < 0:
        return f"negative count {value:g}"
    if domain == "positive" and not value > 0:
        return f"non-positive physical quantity {value:g}"
    if domain == "nonnegative" and value < 0:
        return f"negative value {value:g} for a non-negative quantity"
    return None


def panel(pairs: list[tuple[float, float]]) -> float:
    """R = Σ wᵢ rᵢ / Σ wᵢ over (weight, reward) pairs with weight > 0; 0 when none."""
    total = sum(w for w, _ in pairs if w > 0)
    if total <= 0:
        return 0.0
    return min(1.0, max(0.0, sum(w * r for w, r in pairs if w > 0) / total))


def o_eval(raw: float, oracle_raw: float) -> float:
    """O-Eval = clamp(R / O, 0, 1); 0 when the oracle panel is not positive (nothing to scale by)."""
    if oracle_raw <= 0:
        return 0.0
    return min(1.0, max(0.0, raw / oracle_raw))


def bo_eval(raw: float, oracle_raw: float, baseline_raw: float) -> tuple[float, str]:
    """Robust BO-Eval and the branch taken.

    ``gap = O − F``; ``clip((R − F)/gap, ±1)`` when ``gap ≥ 0.10`` (``"normalized"``), else
    ``clip(R − F, ±0.10)`` (``"small_gap"``). Missing/ungradable artifacts and hard-gate failures are
    set to −1 by the caller.
    """
    gap = oracle_raw - baseline_raw
    if gap >= BO_MIN_GAP - _GAP_TOLERANCE:
        return min(1.0, max(-1.0, (raw - baseline_raw) / gap)), "normalized"
    return min(BO_MIN_GAP, max(-BO_MIN_GAP, raw - baseline_raw)), "small_gap"
