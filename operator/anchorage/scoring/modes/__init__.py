"""Normalisation modes of a score_config.json metric: one module per mode, everything about it in one place.

A mode says how a metric is *parsed* (which endpoint is its anchor O, what it needs, whether it is
excluded by construction, its denominator and default degeneracy band), how it is *rewarded* (SPEC §4,
and the published report's arithmetic for the ``tbmm-report-2026-09`` profile), and how it is described
in the JSON *schema* (its name and formula). Each mode is a module of this package that declares it as ``MODE``
(an instance of a :class:`MetricMode` subclass: ``legacy.py``, ``minmax.py``, ``constant.py``); this module holds
what they share. :data:`MODES` is the registry, what the modules declare (:mod:`anchorage.registry`):
``anchorage.scoring.scoreconfig`` compiles metrics through it, ``anchorage.scoring.rewards`` and
``anchorage.scoring.tbmm_report`` reward through the compiled metric's ``rule``, the schema's ``normalization_mode``
enum comes from it. Adding a mode is adding a module plus a test (docs/architecture.md "add a metric mode").
"""

from __future__ import annotations

import math
from typing import ClassVar, Protocol

from anchorage.registry import by_name, declared


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


class MetricMode:
    """What every mode provides (the registry's contract): a mode is a subclass, and its module declares an instance
    as ``MODE``. Every method here is the contract's, not a default: a mode defines each one (or inherits it from the
    mode it extends); ``tests/scoring/test_modes.py`` fails when a declared mode leaves one undefined."""

    name: ClassVar[str]
    formula: ClassVar[str]
    needs_baseline: ClassVar[bool]

    def problem(self, spec: MetricSpec) -> str | None:
        """Why ``spec`` cannot be read in this mode (a validation error), None when it can."""
        raise NotImplementedError

    def anchor(self, spec: MetricSpec) -> float:
        """The anchor O: which of the entry's endpoints the reward is measured from."""
        raise NotImplementedError

    def exclusion(self, spec: MetricSpec) -> str | None:
        """Why the metric is excluded by construction (weight 0), None when it is not."""
        raise NotImplementedError

    def denominator(self, spec: MetricSpec, anchor: float) -> tuple[float, str]:
        """The reward's denominator before the degeneracy band widens it, and its rule's text (``{band}``: where the
        band's terms go)."""
        raise NotImplementedError

    def endpoint_error(self, spec: MetricSpec, anchor: float, direction: str) -> str | None:
        """Why the endpoints contradict ``direction`` (every value then scores 0), None when they do not."""
        raise NotImplementedError

    def default_band(self, spec: MetricSpec) -> tuple[float, float]:
        """The (rel, abs) degeneracy band when the entry gives none."""
        raise NotImplementedError

    def reward(self, metric: Metric, value: float) -> float:
        """The SPEC §4 reward of ``value``."""
        raise NotImplementedError

    def report_reward(self, metric: Metric, value: float) -> float:
        """The published report's reward of ``value`` (the ``tbmm-report-2026-09`` profile)."""
        raise NotImplementedError

    def tolerance(self, anchor: float, scales: Scales) -> float | None:
        """The distance from the anchor at which a two-sided reward falls to 0.5 (the reproductions' verdicts),
        None when the mode has no such scale."""
        raise NotImplementedError


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


MODES: dict[str, MetricMode] = by_name(declared(__name__, __path__, "MODE", MetricMode), "metric mode")
"""The registry, ``normalization_mode`` → its mode: what this package's modules declare as ``MODE``, in the order of
their module names (two modes of one name are an error)."""


def get_mode(name: str) -> MetricMode:
    """The mode called ``name``; an unknown name is a ValueError listing the known ones."""
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"unknown normalization_mode {name!r}; known: {', '.join(MODES)}") from None
