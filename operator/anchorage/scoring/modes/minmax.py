"""The endpoint (min-max) mode, ``baseline_to_outstanding_target_minmax``: the reward falls linearly from 1 at the
outstanding endpoint O to 0 at the baseline B's distance from it. Declared as ``MODE`` (:mod:`anchorage.scoring.modes`)."""

from __future__ import annotations

from typing import ClassVar

from anchorage.scoring.modes import (
    EPS,
    LEGACY_BAND,
    MINMAX_BAND_REL,
    Metric,
    MetricMode,
    MetricSpec,
    Scales,
    overshoot_bonus,
    reaches_anchor,
    report_scale,
)


class MinMax(MetricMode):
    """``baseline_to_outstanding_target_minmax`` (Wordle, stair wear, Juneau: the endpoint metrics)."""

    name: ClassVar[str] = "baseline_to_outstanding_target_minmax"
    formula: ClassVar[str] = ("r = clamp(1 - |a - O| / max(|O - B|, band), 0, 1); r = 0 when O is not better than B; "
                              "O = outstanding_value, B = baseline_value")
    needs_baseline: ClassVar[bool] = True

    def problem(self, spec: MetricSpec) -> str | None:
        return None if spec.baseline_value is not None else f"normalization_mode {self.name} needs a baseline_value"

    def anchor(self, spec: MetricSpec) -> float:
        value = spec.outstanding_value if spec.outstanding_value is not None else spec.oracle_value
        assert value is not None
        return value

    def exclusion(self, spec: MetricSpec) -> str | None:
        if spec.baseline_value == self.anchor(spec):
            return "baseline_value equals the outstanding value: treated as a constant endpoint"
        return None

    def denominator(self, spec: MetricSpec, anchor: float) -> tuple[float, str]:
        assert spec.baseline_value is not None  # problem() says so first
        return abs(anchor - spec.baseline_value), "max(|O - B|{band})"

    def endpoint_error(self, spec: MetricSpec, anchor: float, direction: str) -> str | None:
        baseline = spec.baseline_value
        assert baseline is not None
        if direction == "higher_is_better" and not anchor > baseline:
            return f"outstanding {anchor:g} is not above baseline {baseline:g} (higher_is_better)"
        if direction == "lower_is_better" and not anchor < baseline:
            return f"outstanding {anchor:g} is not below baseline {baseline:g} (lower_is_better)"
        return None

    def default_band(self, spec: MetricSpec) -> tuple[float, float]:
        return MINMAX_BAND_REL, max(abs(spec.abs_scale), LEGACY_BAND[1])

    def reward(self, metric: Metric, value: float) -> float:
        if metric.endpoint_error is not None:
            return 0.0
        if reaches_anchor(metric, value):
            return 1.0
        return min(1.0, max(0.0, 1.0 - abs(value - metric.anchor) / metric.denominator))

    def report_reward(self, metric: Metric, value: float) -> float:
        baseline = metric.baseline_value if metric.baseline_value is not None else metric.anchor
        outstanding, scale = metric.anchor, report_scale(metric)
        if metric.direction == "higher_is_better":
            span = outstanding - baseline
            if span <= EPS:
                return 0.0
            return overshoot_bonus(value - outstanding, scale) if value >= outstanding else max(0.0, (value - baseline) / span)
        if metric.direction == "lower_is_better":
            span = baseline - outstanding
            if span <= EPS:
                return 0.0
            return overshoot_bonus(outstanding - value, scale) if value <= outstanding else max(0.0, (baseline - value) / span)
        if metric.direction == "exact_value":
            return 1.0 if value == outstanding else 0.0
        span = abs(outstanding - baseline)
        if span <= EPS:
            return 1.0 if value == outstanding else 0.0
        return min(1.0, max(0.0, 1.0 - abs(value - outstanding) / span))

    def tolerance(self, anchor: float, scales: Scales) -> float | None:
        """The distance from the anchor at which a two-sided reward falls to 0.5: half the endpoint gap."""
        return None if scales.baseline_value is None else abs(anchor - scales.baseline_value) / 2


MODE = MinMax()
