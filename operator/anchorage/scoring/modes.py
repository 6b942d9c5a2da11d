"""Normalisation modes of a score_config.json metric: one class per mode, everything about it in one place.

A mode says how a metric is *parsed* (which endpoint is its anchor O, what it needs, whether it is
excluded by construction, its denominator and default degeneracy band), how it is *rewarded* (SPEC §4,
and the published report's arithmetic for the ``tbmm-report-2026-09`` profile), and how it is described
in the JSON *schema* (its name and formula). :data:`MODES` is the registry: ``anchorage.scoring.scoreconfig``
compiles metrics through it, ``anchorage.scoring.rewards`` and ``anchorage.scoring.tbmm_report`` reward through
the compiled metric's ``rule``, the schema's ``normalization_mode`` enum comes from it. Adding a mode is one
class here plus a test (docs/architecture.md "add a metric mode").
"""

from __future__ import annotations

import math
from typing import ClassVar, Protocol


class Scales(Protocol):
    """What :meth:`MetricMode.tolerance` reads of a metric or of its scored result."""

    @property
    def baseline_value(self) -> float | None: ...
    @property
    def rel_scale(self) -> float: ...
    @property
    def abs_scale(self) -> float: ...


class MetricSpec(Scales, Protocol):
    """What a mode reads of a ``metrics[]`` entry (:class:`anchorage.scoring.scoreconfig.MetricSpec`): its
    scales and its endpoints."""

    @property
    def oracle_value(self) -> float | None: ...
    @property
    def outstanding_value(self) -> float | None: ...


class Metric(MetricSpec, Protocol):
    """What a mode reads of a compiled metric (:class:`anchorage.scoring.scoreconfig.Metric`): the entry's
    fields and what compiling adds."""

    @property
    def direction(self) -> str: ...
    @property
    def anchor(self) -> float: ...
    @property
    def denominator(self) -> float: ...
    @property
    def endpoint_error(self) -> str | None: ...

LEGACY_BAND = (0.0, 1e-12)
"""(rel, abs) floor of a legacy denominator: its own scales already bound it (``abs_scale`` ≥ 1e-12)."""
MINMAX_BAND_REL = 0.044
"""Degeneracy band of the endpoint (min-max) metrics, seed G.6: ``|O − B|`` is widened to at least
4.4 % of ``|O|``. The seed gives one figure for the band — widening it moved v4 pro by +0.35 pp (G.5) —
and 0.044 is the width with which the published v4 pro answers move by exactly that (any width in
[0.04398, 0.04404] does; ``tests/scoring/test_band.py``)."""
EPS = 1e-12


class MetricMode(Protocol):
    """What every mode provides (the registry's contract)."""

    name: ClassVar[str]
    formula: ClassVar[str]
    needs_baseline: ClassVar[bool]

    def problem(self, spec: MetricSpec) -> str | None: ...
    def anchor(self, spec: MetricSpec) -> float: ...
    def exclusion(self, spec: MetricSpec) -> str | None: ...
    def denominator(self, spec: MetricSpec, anchor: float) -> tuple[float, str]: ...
    def endpoint_error(self, spec: MetricSpec, anchor: float, direction: str) -> str | None: ...
    def default_band(self, spec: MetricSpec) -> tuple[float, float]: ...
    def reward(self, metric: Metric, value: float) -> float: ...
    def report_reward(self, metric: Metric, value: float) -> float: ...
    def tolerance(self, anchor: float, scales: Scales) -> float | None: ...


def reaches_anchor(metric: Metric, value: float) -> bool:
    """True when ``value`` reaches or beats the anchor in a one-sided metric's direction (G.2)."""
    if metric.direction == "higher_is_better":
        return value >= metric.anchor
    if metric.direction == "lower_is_better":
        return value <= metric.anchor
    return False


def report_scale(metric: Metric) -> float:
    """The published report's scale: the endpoint gap ``|S − B|`` when both are given and differ, else
    ``max(abs_scale, rel_scale·max(|O|, 1))`` (its verifier divides by ``rel_scale·|O|``)."""
    if metric.baseline_value is not None and metric.outstanding_value is not None:
        gap = abs(metric.outstanding_value - metric.baseline_value)
        if gap > EPS:
            return max(metric.abs_scale, gap, EPS)
    oracle = metric.oracle_value if metric.oracle_value is not None else metric.anchor
    return max(metric.abs_scale, metric.rel_scale * max(abs(oracle), 1.0), EPS)


def overshoot_bonus(gain: float, scale: float) -> float:
    """The report's reward for beating O in a one-sided metric: ``1 + log1p(gain / scale)`` (≥ 1)."""
    return 1.0 + math.log1p(max(0.0, gain) / scale)


class Legacy:
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


class MinMax:
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


class Constant(Legacy):
    """``constant_endpoint``: baseline = outstanding, nothing to normalise by — recorded, weight 0."""

    name: ClassVar[str] = "constant_endpoint"
    formula: ClassVar[str] = "excluded (weight 0): baseline = outstanding leaves nothing to normalise by"

    def anchor(self, spec: MetricSpec) -> float:
        value = spec.outstanding_value if spec.outstanding_value is not None else spec.oracle_value
        assert value is not None
        return value

    def exclusion(self, spec: MetricSpec) -> str | None:
        return "constant endpoint (baseline == outstanding): nothing to normalise by"

    def tolerance(self, anchor: float, scales: Scales) -> float | None:
        """Nothing to normalise by: only the anchor itself matches (None without a baseline)."""
        return None if scales.baseline_value is None else abs(anchor - scales.baseline_value) / 2


MODES: dict[str, MetricMode] = {mode.name: mode for mode in (Legacy(), MinMax(), Constant())}
"""The registry: ``normalization_mode`` → its mode."""


def get_mode(name: str) -> MetricMode:
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"unknown normalization_mode {name!r}; known: {', '.join(MODES)}") from None
