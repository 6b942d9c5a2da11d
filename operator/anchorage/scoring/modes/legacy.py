"""The legacy mode, ``legacy_target_distance_to_outstanding``: the reward falls off with the distance from the oracle
value O over the metric's own scales. Declared as ``MODE`` (:mod:`anchorage.scoring.modes`)."""

from __future__ import annotations

from typing import ClassVar

from anchorage.scoring.modes import (
    LEGACY_BAND,
    Metric,
    MetricMode,
    MetricSpec,
    Scales,
    overshoot_bonus,
    reaches_anchor,
    report_scale,
)


class Legacy(MetricMode):
    """``legacy_target_distance_to_outstanding`` (15 of the 18 reference tasks)."""

    name: ClassVar[str] = "legacy_target_distance_to_outstanding"
    formula: ClassVar[str] = "r = 1 / (1 + |a - O| / max(abs_scale, rel_scale*|O|)); O = oracle_value"
    needs_baseline: ClassVar[bool] = False

    def problem(self, spec: MetricSpec) -> str | None:
        return None

    def anchor(self, spec: MetricSpec) -> float:
        value = spec.oracle_value if spec.oracle_value is not None else spec.outstanding_value
        assert value is not None  # MetricSpec requires one of the two
        return value

    def exclusion(self, spec: MetricSpec) -> str | None:
        return None

    def denominator(self, spec: MetricSpec, anchor: float) -> tuple[float, str]:
        return max(abs(spec.abs_scale), abs(spec.rel_scale) * abs(anchor)), "max(abs_scale, rel_scale·|O|{band})"

    def endpoint_error(self, spec: MetricSpec, anchor: float, direction: str) -> str | None:
        return None

    def default_band(self, spec: MetricSpec) -> tuple[float, float]:
        return LEGACY_BAND

    def reward(self, metric: Metric, value: float) -> float:
        if reaches_anchor(metric, value):
            return 1.0
        return 1.0 / (1.0 + abs(value - metric.anchor) / metric.denominator)

    def report_reward(self, metric: Metric, value: float) -> float:
        oracle = metric.oracle_value if metric.oracle_value is not None else metric.anchor
        scale = report_scale(metric)
        if metric.direction == "higher_is_better":
            return overshoot_bonus(value - oracle, scale) if value >= oracle else 1.0 / (1.0 + (oracle - value) / scale)
        if metric.direction == "lower_is_better":
            return overshoot_bonus(oracle - value, scale) if value <= oracle else 1.0 / (1.0 + (value - oracle) / scale)
        if metric.direction == "exact_value":
            return 1.0 if value == oracle else 0.0
        return 1.0 / (1.0 + abs(value - oracle) / scale)

    def tolerance(self, anchor: float, scales: Scales) -> float | None:
        """The distance from the anchor at which a two-sided reward falls to 0.5: its scale."""
        return max(scales.abs_scale, scales.rel_scale * abs(anchor))


MODE = Legacy()
